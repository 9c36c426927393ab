package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"flowservice/pkg/automation"
)

// readSlots reads a scope's slots through an UpdateSlots that changes
// nothing.
func readSlots(t *testing.T, s automation.Store, project, scope string) automation.Slots {
	t.Helper()
	var got automation.Slots
	must(t, "UpdateSlots (read)", s.UpdateSlots(context.Background(), project, scope, func(cur automation.Slots) (automation.Slots, error) {
		got = cur
		return cur, nil
	}))
	return got
}

// A bound's slots: empty at first, replaced by each update, per project,
// and gone once empty; a refusing change writes nothing.
func testSlots(t *testing.T, s automation.Store) {
	ctx := context.Background()
	project, other := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)
	scope := "c:flw_x:abc"
	if got := readSlots(t, s, project, scope); !got.Empty() {
		t.Fatalf("new scope = %+v, want empty", got)
	}
	want := automation.Slots{
		Held:    map[string]int64{"run_a": 1_700_000_060_000, "run_b": 1_700_000_070_000},
		Waiting: []automation.SlotWaiter{{Run: "run_c", Arrived: 1_700_000_000_001, Until: 1_700_000_120_000}},
	}
	must(t, "UpdateSlots", s.UpdateSlots(ctx, project, scope, func(automation.Slots) (automation.Slots, error) { return want, nil }))
	if diff := cmp.Diff(want, readSlots(t, s, project, scope)); diff != "" {
		t.Errorf("slots (-want +got):\n%s", diff)
	}
	if got := readSlots(t, s, project, "c:flw_x"); !got.Empty() {
		t.Errorf("another scope reads %+v", got)
	}
	if got := readSlots(t, s, other, scope); !got.Empty() {
		t.Errorf("another project reads %+v", got)
	}

	refused := errors.New("refused")
	err := s.UpdateSlots(ctx, project, scope, func(automation.Slots) (automation.Slots, error) { return automation.Slots{}, refused })
	if !errors.Is(err, refused) {
		t.Errorf("refusing change: err = %v, want it back", err)
	}
	if diff := cmp.Diff(want, readSlots(t, s, project, scope)); diff != "" {
		t.Errorf("slots after a refused change (-want +got):\n%s", diff)
	}

	// Emptied, the document goes; the next update starts from nothing.
	must(t, "UpdateSlots (empty)", s.UpdateSlots(ctx, project, scope, func(automation.Slots) (automation.Slots, error) { return automation.Slots{}, nil }))
	if got := readSlots(t, s, project, scope); !got.Empty() {
		t.Errorf("emptied scope = %+v", got)
	}
	must(t, "UpdateSlots (again)", s.UpdateSlots(ctx, project, scope, func(cur automation.Slots) (automation.Slots, error) {
		if !cur.Empty() {
			return cur, fmt.Errorf("change got %+v, want empty", cur)
		}
		return automation.Slots{Held: map[string]int64{"run_d": 1}}, nil
	}))
	if got := readSlots(t, s, project, scope); !maps.Equal(got.Held, map[string]int64{"run_d": 1}) {
		t.Errorf("slots = %+v, want run_d held", got)
	}
}

// Runners racing for the slots of one bound (limit 3) never hold more
// than the limit between them: every change sees the one before it.
func testSlotsRace(t *testing.T, s automation.Store) {
	ctx := context.Background()
	project := automation.NewID(automation.PrefixProject)
	const scope, limit, runners = "q:race", 3, 8
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won []string
	)
	for i := range runners {
		wg.Go(func() {
			run := fmt.Sprintf("run_%d", i)
			took := false
			err := s.UpdateSlots(ctx, project, scope, func(cur automation.Slots) (automation.Slots, error) {
				took = false
				if len(cur.Held) >= limit {
					return cur, nil
				}
				next := automation.Slots{Held: maps.Clone(cur.Held), Waiting: cur.Waiting}
				if next.Held == nil {
					next.Held = map[string]int64{}
				}
				next.Held[run] = 1
				took = true
				return next, nil
			})
			if err != nil {
				t.Errorf("%s: UpdateSlots: %v", run, err)
				return
			}
			if took {
				mu.Lock()
				won = append(won, run)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	got := readSlots(t, s, project, scope)
	held := slices.Sorted(maps.Keys(got.Held))
	slices.Sort(won)
	if len(won) != limit || !slices.Equal(held, won) {
		t.Errorf("runners that took a slot %v, slots held %v: want the same %d", won, held, limit)
	}
}

// A flow's concurrency and throttle are kept with it, and a put without
// them removes them.
func testFlowLimits(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	f := flowBuilderWebhook(automation.NewID(automation.PrefixProject), "limited", base)
	f.Concurrency = &automation.Concurrency{Limit: 2, Key: "trigger.body.user"}
	f.Throttle = &automation.Throttle{Limit: 10, Period: "1m", Key: "trigger.body.team"}
	must(t, "CreateFlow", s.CreateFlow(ctx, f))
	equalFlow(t, "Flow with limits", getFlow(t, s, f.Project, f.ID), f)

	g := f
	g.Concurrency, g.Version, g.Updated = nil, 2, base.Add(time.Second)
	must(t, "PutFlow without concurrency", s.PutFlow(ctx, g))
	equalFlow(t, "Flow after the concurrency went", getFlow(t, s, f.Project, f.ID), g)
}

// A run given back waiting shows why (waitingFor) and keeps its count of
// claims that found no slot (Deferred); the next attempt's writes without
// a reason clear it.
func testRunWaitingFor(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f, r := storedRun(t, env)
	t0, lease := now(), time.Minute
	a, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0, lease)
	must(t, "claim", err)
	next := t0.Add(time.Second)
	a.WaitingFor, a.Deferred, a.NextAttemptAt = automation.WaitingConcurrency, 1, &next
	must(t, "release waiting", env.Runs.ReleaseRun(ctx, a))
	if got := getRun(t, env, r); got.WaitingFor != automation.WaitingConcurrency || got.Deferred != 1 {
		t.Fatalf("released waiting: waitingFor %q, deferred %d; want CONCURRENCY, 1", got.WaitingFor, got.Deferred)
	}
	b, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, next, lease)
	must(t, "claim again", err)
	if b.WaitingFor != automation.WaitingConcurrency || b.Deferred != 1 {
		t.Fatalf("claimed: waitingFor %q, deferred %d", b.WaitingFor, b.Deferred)
	}
	b.WaitingFor, b.NextAttemptAt = "", nil
	b.Steps = []automation.StepResult{{Name: "call", Type: automation.StepHTTP, Status: automation.StepSucceeded}}
	must(t, "journal", env.Runs.RecordSteps(ctx, b))
	if got := getRun(t, env, r); got.WaitingFor != "" {
		t.Fatalf("executing run still waiting for %q", got.WaitingFor)
	}
	b.Status = automation.RunSucceeded
	must(t, "finish", env.Runs.FinishRun(ctx, b))
	if got := getRun(t, env, r); got.WaitingFor != "" || got.Status != automation.RunSucceeded {
		t.Fatalf("finished run: %s waiting for %q", got.Status, got.WaitingFor)
	}
}
