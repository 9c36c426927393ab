// Package fairshare shares a fixed number of slots (sandboxes, workers)
// among tenants so that one tenant's backlog cannot take them all.
//
// Two rules do it. A tenant may hold at most Cap slots at once, which is
// below the total, so a newcomer always finds a slot that no single flooder
// can take. And when a slot frees and several tenants wait, it goes to the
// waiting tenant that holds the fewest slots (the earliest waiter among
// equals), so tenants with a backlog converge to equal shares instead of
// first come, first served.
package fairshare

import (
	"context"
	"sync"
)

// Slots is a counting semaphore with per-tenant fairness. The zero value is
// not usable; make one with New. It is safe for concurrent use.
type Slots struct {
	size, cap int

	mu      sync.Mutex
	used    int
	held    map[string]int
	waiters []*waiter // arrival order
}

type waiter struct {
	tenant string
	ready  chan struct{} // closed when the slot is handed over
}

// New shares size slots; no tenant holds more than perTenant of them. A
// perTenant of 0 or above size takes size - size/4 (at least 1), which
// keeps a quarter free for tenants other than a flooder.
func New(size, perTenant int) *Slots {
	if size < 1 {
		size = 1
	}
	if perTenant <= 0 || perTenant > size {
		perTenant = max(1, size-size/4)
	}
	return &Slots{size: size, cap: perTenant, held: map[string]int{}}
}

// Size is the number of slots shared; Cap the most one tenant may hold.
func (s *Slots) Size() int { return s.size }

// Cap is the most slots one tenant may hold at once.
func (s *Slots) Cap() int { return s.cap }

// Acquire takes a slot for tenant, waiting for one while the slots are all
// in use or the tenant holds its cap. It fails only when ctx ends first.
func (s *Slots) Acquire(ctx context.Context, tenant string) error {
	s.mu.Lock()
	if len(s.waiters) == 0 && s.admits(tenant) {
		s.take(tenant)
		s.mu.Unlock()
		return nil
	}
	w := &waiter{tenant: tenant, ready: make(chan struct{})}
	s.waiters = append(s.waiters, w)
	// Another tenant may be admissible though this one is not.
	s.dispatch()
	s.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		defer s.mu.Unlock()
		select {
		case <-w.ready: // handed over while we gave up: give it back
			s.release(tenant)
		default:
			s.remove(w)
		}
		return ctx.Err()
	}
}

// Release gives back a slot tenant holds.
func (s *Slots) Release(tenant string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.release(tenant)
}

// Held is how many slots tenant holds now (for metrics and tests).
func (s *Slots) Held(tenant string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[tenant]
}

// Used is how many slots are held now.
func (s *Slots) Used() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Waiting is how many acquirers wait now.
func (s *Slots) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters)
}

func (s *Slots) admits(tenant string) bool {
	return s.used < s.size && s.held[tenant] < s.cap
}

func (s *Slots) take(tenant string) {
	s.used++
	s.held[tenant]++
}

func (s *Slots) release(tenant string) {
	if s.held[tenant] == 0 {
		panic("fairshare: release of a slot " + tenant + " does not hold")
	}
	s.used--
	if s.held[tenant]--; s.held[tenant] == 0 {
		delete(s.held, tenant)
	}
	s.dispatch()
}

// dispatch hands free slots to waiters: each time to the admissible waiter
// whose tenant holds the fewest, the earliest among equals.
func (s *Slots) dispatch() {
	for s.used < s.size {
		best := -1
		for i, w := range s.waiters {
			if !s.admits(w.tenant) {
				continue
			}
			if best < 0 || s.held[w.tenant] < s.held[s.waiters[best].tenant] {
				best = i
			}
		}
		if best < 0 {
			return
		}
		w := s.waiters[best]
		s.waiters = append(s.waiters[:best], s.waiters[best+1:]...)
		s.take(w.tenant)
		close(w.ready)
	}
}

func (s *Slots) remove(w *waiter) {
	for i, x := range s.waiters {
		if x == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			return
		}
	}
}
