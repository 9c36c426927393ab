package storetest

import (
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// RunRateBuckets checks a store's shared RateBuckets: two handles, as two
// instances (Lambda environments, cluster nodes), take from one bucket
// together; the counts are exact because the clock is the test's.
//   - A bucket of 10 a second with a burst of 10 gives 10 of 40 takes at
//     one instant, whichever handle asks, and each refusal says how long
//     until a token is there (at most the 0.1 s one takes).
//   - Peek takes nothing and reports the tokens in use and the wait.
//   - Half a second later 5 more are there; 10 s later the bucket is
//     full again.
//   - Buckets are independent by key.
func RunRateBuckets(t *testing.T, open func(t *testing.T) (a, b automation.RateBuckets)) {
	a, b := open(t)
	ctx := t.Context()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	take := func(key string, n int) (ok int) {
		for i := range n {
			h := a
			if i%2 == 1 {
				h = b
			}
			wait, err := h.Take(ctx, key, 10, 10, now)
			if err != nil {
				t.Fatal(err)
			}
			if wait == 0 {
				ok++
			} else if wait > 100*time.Millisecond {
				t.Errorf("take %d of %s: wait %v, want at most a token's 100ms", i, key, wait)
			}
		}
		return ok
	}
	if n, wait, err := a.Peek(ctx, "p1", 10, 10, now); err != nil || n != 0 || wait != 0 {
		t.Fatalf("an unknown bucket peeks %d in use, wait %v, %v; want 0, 0", n, wait, err)
	}
	if got := take("p1", 40); got != 10 {
		t.Errorf("two handles took %d tokens at one instant, want the burst's 10", got)
	}
	for _, h := range []automation.RateBuckets{a, b} {
		n, wait, err := h.Peek(ctx, "p1", 10, 10, now)
		if err != nil || n != 10 || wait <= 0 || wait > 100*time.Millisecond {
			t.Errorf("peek of an empty bucket: %d in use, wait %v, %v; want 10, (0, 100ms]", n, wait, err)
		}
	}
	if got := take("p2", 3); got != 3 {
		t.Errorf("another key's bucket gave %d of 3", got)
	}
	now = now.Add(500 * time.Millisecond)
	if n, _, err := b.Peek(ctx, "p1", 10, 10, now); err != nil || n != 5 {
		t.Errorf("after 0.5 s %d in use (%v), want 5", n, err)
	}
	if got := take("p1", 40); got != 5 {
		t.Errorf("after 0.5 s %d taken, want 5", got)
	}
	now = now.Add(10 * time.Second)
	if got := take("p1", 40); got != 10 {
		t.Errorf("after a pause %d taken, want 10", got)
	}
}
