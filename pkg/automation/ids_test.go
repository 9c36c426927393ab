package automation

import (
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestNewRunIDSortsByTime: run IDs are URL-safe, distinct, and sort as
// their creation times do, to the millisecond, across the years.
func TestNewRunIDSortsByTime(t *testing.T) {
	shape := regexp.MustCompile(`^run_[0-9a-v]{10}[a-z2-7]{20}$`)
	base := time.Date(2026, 11, 22, 23, 0, 0, 0, time.UTC)
	var times []time.Time
	for _, d := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, time.Second, time.Hour, 24 * time.Hour, 365 * 24 * time.Hour, 80 * 365 * 24 * time.Hour} {
		times = append(times, base.Add(d))
	}
	times = append(times, time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
	seen := map[string]bool{}
	prev := ""
	for _, at := range times {
		id := NewRunID(at)
		if !shape.MatchString(id) {
			t.Fatalf("NewRunID(%v) = %q, not of the run ID shape", at, id)
		}
		if id <= prev {
			t.Errorf("NewRunID(%v) = %q sorts before the earlier %q", at, id, prev)
		}
		if seen[id] {
			t.Errorf("NewRunID(%v) = %q twice", at, id)
		}
		seen[id], prev = true, id
	}
	a, b := NewRunID(base), NewRunID(base)
	if a == b || a[:14] != b[:14] {
		t.Errorf("two IDs of one millisecond: %q, %q; want the same time part and different random parts", a, b)
	}
	if id := NewID(PrefixRun); !shape.MatchString(id) {
		t.Errorf("NewID(PrefixRun) = %q, not a run ID", id)
	}
}

// TestAuditIDsSortInTheOrderMade: audit entries made within one
// millisecond keep their order in the log (AuditSortKey), whatever their
// random part.
func TestAuditIDsSortInTheOrderMade(t *testing.T) {
	at := time.UnixMilli(1_800_000_000_000)
	prev := ""
	for i := range 1000 {
		id := NewID(PrefixAudit)
		if !strings.HasPrefix(id, PrefixAudit) || len(id) != len(PrefixAudit)+13+16 {
			t.Fatalf("audit ID %q: want %s, 13 time characters and 16 random ones", id, PrefixAudit)
		}
		key := AuditSortKey(AuditEntry{ID: id, Time: at})
		if key <= prev {
			t.Fatalf("entry %d's sort key %q is not after the previous one, %q", i, key, prev)
		}
		prev = key
	}
}
