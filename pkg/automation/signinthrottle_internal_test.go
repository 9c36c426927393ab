package automation

import (
	"strconv"
	"testing"
	"time"
)

// TestSigninThrottleBounded: a flood of distinct emails and addresses keeps
// each table at MaxSigninThrottleEntries, and a full table still counts
// the newest failures.
func TestSigninThrottleBounded(t *testing.T) {
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	th := newSigninThrottle(func() time.Time { return now })
	for i := range MaxSigninThrottleEntries + 500 {
		now = now.Add(time.Microsecond)
		th.fail("u"+strconv.Itoa(i)+"@example.com", "addr"+strconv.Itoa(i))
	}
	emails, addrs := th.size()
	if emails > MaxSigninThrottleEntries || addrs > MaxSigninThrottleEntries {
		t.Fatalf("tables hold %d emails and %d addresses, bound %d", emails, addrs, MaxSigninThrottleEntries)
	}
	last := "u" + strconv.Itoa(MaxSigninThrottleEntries+499) + "@example.com"
	for range SigninFailuresPerEmail - 1 {
		th.fail(last, "")
	}
	if th.wait(last, "") <= 0 {
		t.Fatal("the newest email in a full table is not slowed after its failures")
	}
}
