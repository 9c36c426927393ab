package automation_test

import (
	"context"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// A run refused a slot is given back waiting (CONCURRENCY, nextAttemptAt),
// without executing; those claims spend none of its retries: once the
// slot frees, a transient failure is retried, not the run's end.
func TestWaitingForASlotSpendsNoRetries(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{MaxAttempts: 2})
	flaky, calls := flowtest.StatusServer(t, 503, 200)
	ctx := context.Background()
	f := e.flowCalling(t, flaky.URL)
	f, err := e.svc.UpdateFlow(ctx, e.project, f.ID, automation.FlowInput{
		Concurrency: automation.Nullable[automation.Concurrency]{Set: true, Value: &automation.Concurrency{Limit: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	// Another run's attempt holds the flow's slot (its process died: the
	// hold lasts until its lease ends).
	scope := "c:" + f.ID
	hold := func(until time.Time) {
		t.Helper()
		if err := e.Store.UpdateSlots(ctx, e.project.ID, scope, func(automation.Slots) (automation.Slots, error) {
			return automation.Slots{Held: map[string]int64{"run_other": until.UnixMilli()}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	hold(time.Now().Add(time.Hour))
	r := e.start1(t, f)
	for range 3 {
		at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID)
		got, err := e.svc.Run(ctx, e.project, f.ID, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if at.Outcome != automation.OutcomeRetry || got.Status != automation.RunRunning ||
			got.WaitingFor != automation.WaitingConcurrency || got.NextAttemptAt == nil || calls.Load() != 0 {
			t.Fatalf("attempt while the slot is held: %v, run %s waiting for %q next %v, %d calls",
				at.Outcome, got.Status, got.WaitingFor, got.NextAttemptAt, calls.Load())
		}
	}
	hold(time.Now().Add(-time.Millisecond)) // the hold ran out
	if at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID); at.Outcome != automation.OutcomeRetry || calls.Load() != 1 {
		t.Fatalf("first real attempt = %v after %d calls; want a retry after the 503", at.Outcome, calls.Load())
	}
	at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded || calls.Load() != 2 {
		t.Fatalf("second real attempt = %s, %v after %d calls; want SUCCEEDED (three waits spent no retry)", at.Run.Status, err, calls.Load())
	}
	if at.Run.WaitingFor != "" {
		t.Errorf("finished run waiting for %q", at.Run.WaitingFor)
	}
}
