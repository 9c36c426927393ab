package fairshare

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/internal/testwait"
)

// queue starts an Acquire for tenant and returns once it waits, so that the
// order of waiters is the order of calls. got receives the tenant when it
// holds its slot.
func queue(t *testing.T, s *Slots, tenant string, got chan<- string) {
	t.Helper()
	before := s.Waiting()
	go func() {
		if err := s.Acquire(context.Background(), tenant); err != nil {
			t.Errorf("Acquire(%s): %v", tenant, err)
			return
		}
		got <- tenant
	}()
	testwait.Event(t, tenant+"'s Acquire to queue", func() bool { return s.Waiting() != before })
}

func mustAcquire(t *testing.T, s *Slots, tenant string, n int) {
	t.Helper()
	for range n {
		if err := s.Acquire(context.Background(), tenant); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDefaultCapLeavesAQuarterForOthers(t *testing.T) {
	s := New(8, 0)
	if s.Cap() != 6 {
		t.Fatalf("Cap = %d, want 6 of 8", s.Cap())
	}
	mustAcquire(t, s, "flooder", 6)
	got := make(chan string, 1)
	queue(t, s, "flooder", got) // the flooder's 7th waits
	// Another tenant is served at once, ahead of the flooder's waiter.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Acquire(ctx, "quiet"); err != nil {
		t.Fatalf("quiet tenant: %v", err)
	}
	if s.Held("flooder") != 6 || s.Held("quiet") != 1 {
		t.Fatalf("held flooder=%d quiet=%d, want 6 and 1", s.Held("flooder"), s.Held("quiet"))
	}
	s.Release("flooder") // frees one; the flooder's waiter takes it back
	if who := <-got; who != "flooder" {
		t.Fatalf("slot went to %s", who)
	}
}

func TestFreedSlotGoesToTheTenantHoldingFewest(t *testing.T) {
	s := New(4, 3)
	mustAcquire(t, s, "a", 3)
	mustAcquire(t, s, "b", 1)
	got := make(chan string, 4)
	queue(t, s, "a", got) // a waits first, but holds 3
	queue(t, s, "b", got) // b holds 1
	queue(t, s, "c", got) // c holds none

	s.Release("a") // a now holds 2, b 1, c 0: c is served
	if who := <-got; who != "c" {
		t.Fatalf("first freed slot went to %s, want c", who)
	}
	s.Release("a") // a 1, b 1, c 1: a and b tie; a waited first
	if who := <-got; who != "a" {
		t.Fatalf("second freed slot went to %s, want a (earliest of equals)", who)
	}
	s.Release("c") // a 2, b 1, c 0: b
	if who := <-got; who != "b" {
		t.Fatalf("third freed slot went to %s, want b", who)
	}
	if s.Waiting() != 0 {
		t.Fatalf("%d still waiting", s.Waiting())
	}
}

func TestCancelledWaiterLeavesNoTrace(t *testing.T) {
	s := New(1, 1)
	mustAcquire(t, s, "a", 1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- s.Acquire(ctx, "b") }()
	testwait.Event(t, "b's Acquire to queue", func() bool { return s.Waiting() != 0 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after cancel = %v, want context.Canceled", err)
	}
	if s.Waiting() != 0 || s.Held("b") != 0 {
		t.Fatalf("after cancel: waiting %d, b holds %d", s.Waiting(), s.Held("b"))
	}
	s.Release("a")
	mustAcquire(t, s, "c", 1) // the slot is free again
}

// TestSharesUnderContention: two tenants hammer four slots; the invariants
// hold throughout, and the tenant with fewer requests is not starved.
func TestSharesUnderContention(t *testing.T) {
	s := New(4, 3)
	var inUse atomic.Int64
	var perTenant sync.Map
	var wg sync.WaitGroup
	work := func(tenant string, n int) {
		defer wg.Done()
		for range n {
			if err := s.Acquire(context.Background(), tenant); err != nil {
				t.Error(err)
				return
			}
			v, _ := perTenant.LoadOrStore(tenant, new(atomic.Int64))
			held := v.(*atomic.Int64).Add(1)
			if held > 3 {
				t.Errorf("%s holds %d slots, cap 3", tenant, held)
			}
			if now := inUse.Add(1); now > 4 {
				t.Errorf("%d slots in use, size 4", now)
			}
			// Held a moment on purpose, so that tenants contend for the
			// slots; no event can stand in for work that takes time.
			time.Sleep(50 * time.Microsecond)
			inUse.Add(-1)
			v.(*atomic.Int64).Add(-1)
			s.Release(tenant)
		}
	}
	for range 8 {
		wg.Add(1)
		go work("flood", 200)
	}
	wg.Add(1)
	go work("quiet", 50)
	wg.Wait()
	if s.Waiting() != 0 || s.Held("flood") != 0 || s.Held("quiet") != 0 {
		t.Fatalf("after all: waiting %d, flood %d, quiet %d", s.Waiting(), s.Held("flood"), s.Held("quiet"))
	}
}

func TestReleaseOfAnUnheldSlotPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Release of an unheld slot did not panic")
		}
	}()
	New(2, 0).Release("nobody")
}
