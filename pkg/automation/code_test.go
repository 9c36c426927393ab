package automation

import (
	"testing"
	"time"
)

func TestCodeTimeoutDefaults(t *testing.T) {
	if d, err := (Step{}).CodeTimeout(); d != DefaultCodeTimeout || err != nil {
		t.Errorf("default timeout %v %v", d, err)
	}
	for ms, want := range map[int64]time.Duration{0: time.Second, 250: 250 * time.Millisecond, 60_000: MaxCodeTimeout} {
		if got := (CodeRequest{TimeoutMs: ms}).Timeout(); got != want {
			t.Errorf("CodeRequest{TimeoutMs: %d}.Timeout() = %v, want %v", ms, got, want)
		}
	}
}
