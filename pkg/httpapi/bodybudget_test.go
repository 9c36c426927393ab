package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
)

// fakeTimers is a clock the test advances: timers fire, in their own
// goroutines as time.AfterFunc's do, only when Advance passes them.
type fakeTimers struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*fakeTimer]bool
}

type fakeTimer struct {
	at time.Time
	f  func()
}

func newFakeTimers() *fakeTimers {
	return &fakeTimers{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), timers: map[*fakeTimer]bool{}}
}

func (c *fakeTimers) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeTimers) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers[t] = true
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		pending := c.timers[t]
		delete(c.timers, t)
		return pending
	}
}

// Advance moves the clock by d and fires the timers it passes; it returns
// once their functions have returned.
func (c *fakeTimers) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	for t := range c.timers {
		if !t.at.After(c.now) {
			due = append(due, t)
			delete(c.timers, t)
		}
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range due {
		wg.Go(t.f)
	}
	wg.Wait()
}

// pending is how many timers wait.
func (c *fakeTimers) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// TestBodyBudget: bodies are charged as they arrive, not for what they
// declare; large bodies share the large part and small ones always find
// their own share beside them; one project holds at most its share; a
// delivery that cannot get room waits maxBodyWait (on the budget's clock)
// and is refused BODY_BUDGET, at once if it holds bytes while another
// such delivery already waits; room comes back on release.
func TestBodyBudget(t *testing.T) {
	clock := newFakeTimers()
	const maxBody = 4 << 20
	b := NewBodyBudget(8<<20, maxBody, WithTimers(clock), WithReceiveRate(0, 0))
	if b.Size() != 12<<20 || b.ProjectShare() != 4<<20 {
		t.Fatalf("size %d, share %d; want 12 MiB and 4 MiB", b.Size(), b.ProjectShare())
	}
	ctx := context.Background()
	charge := func(project string, declared, n int64) (*bodyCharge, error) {
		c := b.newCharge()
		c.body(ctx, project, declared, io.NopCloser(strings.NewReader("")), nil)
		return c, c.take(ctx, n)
	}
	isBusy := func(err error) bool {
		var e *automation.Error
		return errors.As(err, &e) && errors.Is(err, automation.ErrUnavailable) && e.Code == "BODY_BUDGET"
	}

	// A declared length costs nothing until bytes arrive.
	slow, err := charge("p1", 256<<10, 1)
	if err != nil || b.inUse("") != 1 {
		t.Fatalf("one byte of a 256 KiB body: %v, in use %d", err, b.inUse(""))
	}
	slow.release()

	// Large bodies of two projects fill the large part (8 MiB), each
	// within its share.
	var large []*bodyCharge
	for _, p := range []string{"p1", "p2"} {
		c, err := charge(p, 4<<20, 4<<20)
		if err != nil {
			t.Fatalf("large body of %s: %v", p, err)
		}
		large = append(large, c)
	}
	// A project past its share waits, and is refused once the wait ends.
	done := make(chan error)
	go func() { _, err := charge("p1", 1<<10, 1<<10); done <- err }()
	waitPending(t, clock, 1)
	clock.Advance(maxBodyWait)
	if err := <-done; !isBusy(err) {
		t.Fatalf("p1 past its share: %v; want BODY_BUDGET", err)
	}
	// A third project's large body: no room in the large part.
	go func() { _, err := charge("p3", 1<<20, 1<<10); done <- err }()
	waitPending(t, clock, 1)
	clock.Advance(maxBodyWait)
	if err := <-done; !isBusy(err) {
		t.Fatalf("large body past the large part: %v; want BODY_BUDGET", err)
	}
	// Small bodies of other projects are never held up by large ones.
	var small []*bodyCharge
	for range 12 {
		c, err := charge("p3", 200<<10, 200<<10)
		if err != nil {
			t.Fatalf("small body beside the large ones: %v", err)
		}
		small = append(small, c)
	}
	// A delivery that holds bytes and cannot get more waits; a second one
	// is refused at once rather than wait on it.
	half, err := charge("p4", 200<<10, 100<<10)
	if err != nil {
		t.Fatal(err)
	}
	other, err := charge("p5", 200<<10, 100<<10)
	if err != nil {
		t.Fatal(err)
	}
	go func() { done <- half.take(ctx, 1<<20) }()
	waitPending(t, clock, 1)
	if err := other.take(ctx, 1<<20); !isBusy(err) {
		t.Fatalf("a second holding delivery waited: %v", err)
	}
	// Room comes back on release, and the waiter gets it.
	large[0].release()
	if err := <-done; err != nil {
		t.Fatalf("the waiter after a release: %v", err)
	}
	for _, c := range append(append(small, large...), half, other) {
		c.release()
	}
	if n := b.inUse(""); n != 0 {
		t.Errorf("%d bytes still in use after every release", n)
	}
}

// waitPending waits until the clock holds n timers: a delivery waits.
func waitPending(t *testing.T, clock *fakeTimers, n int) {
	t.Helper()
	testwait.Event(t, fmt.Sprintf("%d timers pending on the fake clock", n), func() bool { return clock.pending() >= n })
}
