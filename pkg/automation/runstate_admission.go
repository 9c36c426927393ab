package automation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// WaitReason says why a RUNNING run is not executing (Run.WaitingFor).
type WaitReason string

// Why a run waits: a bound of its flow or project (admission), a WAIT
// step, or the backoff before a retry.
const (
	WaitingConcurrency WaitReason = "CONCURRENCY"
	WaitingThrottle    WaitReason = "THROTTLE"
	WaitingQuota       WaitReason = "QUOTA"
	WaitingWait        WaitReason = "WAIT"
	WaitingRetry       WaitReason = "RETRY"
)

// Slots is the bookkeeping of one bound (a flow's concurrency or throttle
// for one key value, a project's concurrentRuns): the runs that hold a
// slot, each until a time, and the runs that wait for one, in arrival
// order. Every hold and every place in the line expires, so a runner that
// dies leaks nothing past its lease: there is no counter to get wrong.
type Slots struct {
	// Held maps a run ID to the end of its hold, in Unix milliseconds.
	Held map[string]int64 `json:"held,omitempty"`
	// Waiting is the line, oldest run first (at most MaxSlotWaiters).
	Waiting []SlotWaiter `json:"waiting,omitempty"`
}

// SlotWaiter is a run in a bound's line.
type SlotWaiter struct {
	Run     string `json:"run"`
	Arrived int64  `json:"arrived"` // the run's creation, Unix ms
	Until   int64  `json:"until"`   // its place is kept until then, Unix ms
}

// Empty reports whether nothing holds or waits: the store drops the
// document.
func (s Slots) Empty() bool { return len(s.Held) == 0 && len(s.Waiting) == 0 }

// MaxSlotWaiters bounds a bound's line. Runs past it wait too, polling,
// and join the line as it shortens: arrival order is kept for the first
// MaxSlotWaiters waiting runs of a key (docs/reliability.md).
const MaxSlotWaiters = 100

// Admission polling: a run refused a concurrency or quota slot is tried
// again after slotPoll, doubling per refusal up to slotPollMax (where the
// queue can wake it when a slot frees, SlotWaker, later: it is woken), but a
// run next in line every slotPoll; its place in the line is kept slotGrace
// past its next try.
const (
	slotPoll        = time.Second
	slotPollMax     = 10 * time.Second
	slotPollMaxWake = 30 * time.Second
	slotGrace       = time.Minute
)

// admissionWait reports whether w is a wait for a bound (not a WAIT step
// or a retry's backoff).
func admissionWait(w WaitReason) bool {
	return w == WaitingConcurrency || w == WaitingThrottle || w == WaitingQuota
}

// bound is one limit a run must fit in before it executes.
type bound struct {
	scope   string
	reason  WaitReason
	limit   int
	hold    time.Duration // how long a slot is held: the claim's lease, or the throttle's period
	release bool          // given back when the attempt ends (not a throttle's start)
	until   int64         // the end of the hold this attempt took (Unix ms), once taken
}

// scopeKey names a bound's document: kind, owner and a digest of the key
// value (any text, bounded to a fixed size).
func scopeKey(kind, owner, key string) string {
	if key == "" {
		return kind + ":" + owner
	}
	h := sha256.Sum256([]byte(key))
	return kind + ":" + owner + ":" + hex.EncodeToString(h[:12])
}

// bounds are the limits run r of flow f must fit in now, in the order they
// are taken. A flow without concurrency or throttle, in a project without
// concurrentRuns, has none and costs no store access (the project's limits
// are cached).
func (s *RunService) bounds(ctx context.Context, f Flow, r Run, lease time.Duration) ([]bound, error) {
	var bs []bound
	if c := f.Concurrency; c != nil {
		bs = append(bs, bound{scope: scopeKey("c", f.ID, s.limitKey(ctx, c.Key, r)), reason: WaitingConcurrency,
			limit: c.Limit, hold: lease, release: true})
	}
	if t := f.Throttle; t != nil && r.Started == nil { // a start, not a resumed or retried run
		d, err := t.PeriodDuration()
		if err != nil {
			return nil, Invalid("throttle.%v", err)
		}
		bs = append(bs, bound{scope: scopeKey("t", f.ID, s.limitKey(ctx, t.Key, r)), reason: WaitingThrottle,
			limit: t.Limit, hold: d})
	}
	pq, err := s.projects.projectQuota(ctx, r.Project, s.clock())
	if err != nil {
		return nil, err
	}
	if n := pq.limits.ConcurrentRuns; n != nil {
		bs = append(bs, bound{scope: scopeKey("q", r.Project, ""), reason: WaitingQuota,
			limit: int(min(*n, int64(1<<31-1))), hold: lease, release: true})
	}
	return bs, nil
}

// limitKey is the value of a concurrency or throttle key for the run: ""
// (one bound for the flow) without a key, or when it evaluates to null or
// fails.
func (s *RunService) limitKey(ctx context.Context, expr string, r Run) string {
	if expr == "" || s.checker == nil {
		return ""
	}
	k, err := s.checker.TriggerKey(ctx, expr, r.Trigger)
	if err != nil {
		return ""
	}
	return k
}

// admission is what admit came to.
type admission struct {
	held    []bound    // taken, to give back when the attempt ends
	waitFor WaitReason // "" when admitted
	retryAt time.Time  // when to try again, when not
}

// admit takes a slot of every bound for run r, or none: refused at one,
// it gives back what it took and puts r in that bound's line.
func (s *RunService) admit(ctx context.Context, rt *RunRuntime, bs []bound, r Run) (admission, error) {
	var a admission
	for _, b := range bs {
		var (
			ok      bool
			retryAt time.Time
		)
		err := s.store.UpdateSlots(ctx, r.Project, b.scope, func(sl Slots) (Slots, error) {
			var next Slots
			next, ok, retryAt = takeSlot(sl, b, r, s.clock(), s.pollAfter(rt, r))
			b.until = next.Held[r.ID]
			return next, nil
		})
		if err != nil {
			s.giveBack(context.WithoutCancel(ctx), rt, r, a.held)
			return admission{}, fmt.Errorf("take a %s slot: %w", b.reason, err)
		}
		if !ok {
			s.giveBack(context.WithoutCancel(ctx), rt, r, a.held)
			return admission{waitFor: b.reason, retryAt: retryAt}, nil
		}
		a.held = append(a.held, b)
	}
	return a, nil
}

// pollAfter is how long a run refused a slot waits before it tries again.
func (s *RunService) pollAfter(rt *RunRuntime, r Run) time.Duration {
	d, top := slotPoll, slotPollMax
	if rt.SlotWaker != nil {
		top = slotPollMaxWake
	}
	for i := 0; i < r.Deferred && d < top; i++ {
		d *= 2
	}
	return min(d, top)
}

// giveBack releases the slots r holds of bounds bs (all of them: a
// throttle's start too, when the run did not start after all) and wakes
// the runs first in line for them. A failure is only logged: the holds
// expire with the claim's lease.
func (s *RunService) giveBack(ctx context.Context, rt *RunRuntime, r Run, bs []bound) {
	var wake []string
	for _, b := range bs {
		err := s.store.UpdateSlots(ctx, r.Project, b.scope, func(sl Slots) (Slots, error) {
			var next Slots
			next, wake = releaseSlot(sl, b, r.ID, s.clock())
			return next, nil
		})
		if err != nil {
			s.log.WarnContext(ctx, "give back a run's slot; it expires with the run's lease", "run", r.ID, "bound", b.reason, "err", err)
			continue
		}
		s.wake(ctx, rt, wake)
	}
}

// releaseHeld gives back, when an attempt ends, the slots it holds that
// last no longer than it does (not a throttle's starts).
func (s *RunService) releaseHeld(ctx context.Context, rt *RunRuntime, r Run, a admission) {
	var bs []bound
	for _, b := range a.held {
		if b.release {
			bs = append(bs, b)
		}
	}
	if len(bs) > 0 {
		s.giveBack(ctx, rt, r, bs)
	}
}

func (s *RunService) wake(ctx context.Context, rt *RunRuntime, runs []string) {
	if rt.SlotWaker == nil || len(runs) == 0 {
		return
	}
	if err := rt.SlotWaker.Wake(ctx, runs, s.clock()); err != nil {
		s.log.WarnContext(ctx, "wake waiting runs; they try again at their own time", "err", err)
	}
}

// takeSlot is the admission rule of one bound, on its document: run r
// takes a slot when the slots held and the runs that arrived before it and
// still wait leave one; otherwise it keeps (or takes) its place in the
// line and learns when to try again. A run that holds a slot already (an
// attempt after a crash) keeps it.
func takeSlot(sl Slots, b bound, r Run, now time.Time, poll time.Duration) (next Slots, ok bool, retryAt time.Time) {
	sl = pruneSlots(sl, now)
	ms := now.UnixMilli()
	if _, held := sl.Held[r.ID]; held {
		if b.release { // a concurrency hold follows the claim; a start stays where it was
			sl.Held[r.ID] = ms + b.hold.Milliseconds()
		}
		return sl, true, time.Time{}
	}
	arrived := r.Created.UnixMilli()
	pos := slices.IndexFunc(sl.Waiting, func(w SlotWaiter) bool { return w.Run == r.ID })
	ahead := 0
	for _, w := range sl.Waiting {
		if w.Run != r.ID && before(w, arrived, r.ID) {
			ahead++
		}
	}
	if len(sl.Held)+ahead < b.limit {
		if pos >= 0 {
			sl.Waiting = slices.Delete(sl.Waiting, pos, pos+1)
		}
		if sl.Held == nil {
			sl.Held = map[string]int64{}
		}
		sl.Held[r.ID] = ms + b.hold.Milliseconds()
		return sl, true, time.Time{}
	}
	retryAt = now.Add(poll)
	if ahead < b.limit {
		// Next in line: a wake may cross this refusal (Waker skips an
		// entry that an attempt holds), so it looks again soon.
		retryAt = now.Add(min(poll, slotPoll))
	}
	if !b.release { // a throttle: a slot frees when the oldest start leaves the period
		ends := make([]int64, 0, len(sl.Held))
		for _, u := range sl.Held {
			ends = append(ends, u)
		}
		slices.Sort(ends)
		if i := max(0, ahead-(b.limit-len(sl.Held))); len(ends) > 0 {
			retryAt = time.UnixMilli(ends[min(i, len(ends)-1)])
		}
	}
	until := retryAt.Add(slotGrace).UnixMilli()
	switch {
	case pos >= 0:
		sl.Waiting[pos].Until = until
	case len(sl.Waiting) < MaxSlotWaiters:
		w := SlotWaiter{Run: r.ID, Arrived: arrived, Until: until}
		at, _ := slices.BinarySearchFunc(sl.Waiting, w, func(x, y SlotWaiter) int {
			if before(x, y.Arrived, y.Run) {
				return -1
			}
			return 1
		})
		sl.Waiting = slices.Insert(sl.Waiting, at, w)
	}
	return sl, false, retryAt
}

// before orders waiters by arrival, then run ID.
func before(w SlotWaiter, arrived int64, run string) bool {
	return w.Arrived < arrived || (w.Arrived == arrived && w.Run < run)
}

// releaseSlot drops run's hold (and place in line) and names the runs
// first in line that now fit, to be woken. A hold that another attempt at
// the run took since (b.until differs: this one lost its lease) stays.
func releaseSlot(sl Slots, b bound, run string, now time.Time) (next Slots, wake []string) {
	sl = pruneSlots(sl, now)
	if until, ok := sl.Held[run]; ok && (b.until == 0 || until == b.until) {
		delete(sl.Held, run)
	}
	sl.Waiting = slices.DeleteFunc(sl.Waiting, func(w SlotWaiter) bool { return w.Run == run })
	for i := 0; i < len(sl.Waiting) && len(sl.Held)+i < b.limit; i++ {
		wake = append(wake, sl.Waiting[i].Run)
	}
	return sl, wake
}

// pruneSlots drops the holds and places in line that expired.
func pruneSlots(sl Slots, now time.Time) Slots {
	ms := now.UnixMilli()
	held := make(map[string]int64, len(sl.Held))
	for id, until := range sl.Held {
		if until > ms {
			held[id] = until
		}
	}
	sl.Held = held
	sl.Waiting = slices.DeleteFunc(slices.Clone(sl.Waiting), func(w SlotWaiter) bool { return w.Until <= ms })
	return sl
}
