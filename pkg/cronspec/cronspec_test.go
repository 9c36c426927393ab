package cronspec

import (
	"errors"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

func TestParse(t *testing.T) {
	s, loc, err := Parse("*/5 * * * *", "Europe/Paris")
	if err != nil || loc.String() != "Europe/Paris" {
		t.Fatalf("Parse = %v, %v", loc, err)
	}
	from := time.Date(2026, 1, 1, 10, 2, 0, 0, loc)
	if next := s.Next(from); !next.Equal(time.Date(2026, 1, 1, 10, 5, 0, 0, loc)) {
		t.Errorf("next after 10:02 = %v", next)
	}
	for _, bad := range [][2]string{{"", ""}, {"@every 1m", ""}, {"TZ=UTC * * * * *", ""}, {"* * *", ""}, {"@daily", "Local"}, {"@daily", "Mars/Base"}} {
		if _, _, err := Parse(bad[0], bad[1]); !errors.Is(err, automation.ErrInvalid) {
			t.Errorf("Parse(%q, %q) = %v, want an ErrInvalid error", bad[0], bad[1], err)
		}
	}
}
