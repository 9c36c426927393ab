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

// Hang bounds a wait for something that does happen: far above what any
// wait takes on a loaded machine, so that it never decides a test that
// works, only turns a hang into a failure that names what was awaited.
const Hang = 2 * time.Minute

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
	return poll(within, interval, cond)
}

// Event waits for cond as For does, bounded by Hang: for an event the test
// knows will come, whose time it cannot know. The first checks come at a
// millisecond and the gap doubles up to the usual interval, so that a
// condition of the test's own process that holds soon (a goroutine has
// queued) costs no more than it takes. A condition that asks flowd's API
// uses For: its fixed interval stays under the rate limit.
func Event(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !poll(Hang, time.Millisecond, cond) {
		t.Fatalf("waited %s for %s", Hang, what)
	}
}

// Paced waits for cond as Event does, checking it every gap (a gap under
// the usual interval grows to it): for a
// condition whose every check is heavy (a look that reads a whole large
// run), which checks at the usual interval would slow, or weigh on what
// the test measures.
func Paced(t testing.TB, gap time.Duration, what string, cond func() bool) {
	t.Helper()
	if !poll(Hang, gap, cond) {
		t.Fatalf("waited %s for %s", Hang, what)
	}
}

// poll calls cond until it holds or within passes, with gaps from first
// doubling up to interval.
func poll(within, first time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	gap := first
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(gap)
		if gap < interval {
			gap = min(2*gap, interval)
		}
	}
	return true
}
