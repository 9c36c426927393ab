// Package testwait is how tests wait: for a condition they can observe,
// never for a fixed time. A negative check ("nothing ran again") first
// waits for the positive event it follows ("the restart has drained its
// queue"), so that a slow machine makes the test slower, never vacuous.
package testwait

import (
	"testing"
	"time"
)

// interval is how often a condition is checked: short against the waits
// tests make, long enough not to busy the machine, and under flowd's
// default rate limit (50 requests a second per project) for conditions
// that ask the management API.
const interval = 50 * time.Millisecond

// For calls cond until it reports true, and fails the test with what it
// waited for if within passes first. cond runs in the test's goroutine, so
// it may call t.Fatal itself.
func For(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(within, cond) {
		t.Fatalf("waited %s for %s", within, what)
	}
}

// Until calls cond until it reports true or within passes, and reports
// whether it did: for the callers that go on either way and judge later.
func Until(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval)
	}
	return true
}
