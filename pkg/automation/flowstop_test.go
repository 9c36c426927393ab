package automation_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// TestDisabledFlowStopsWaitingRun: a run that was accepted (and is
// waiting in the queue) when its flow was disabled ends FAILED "flow
// disabled" at its next attempt without calling out; a run accepted after
// the flow is enabled again executes.
func TestDisabledFlowStopsWaitingRun(t *testing.T) {
	// Every reading of the clock is a millisecond later, so that no two
	// events share the instant a stop compares (runs created at the very
	// millisecond of the disable are stopped).
	base, tick := time.Now(), atomic.Int64{}
	e := newEnv(t, automation.RunPolicy{}, func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Millisecond) })
	srv, calls := flowtest.StatusServer(t, 200)
	f := e.flowCalling(t, srv.URL)
	r := e.start1(t, f)
	ctx := context.Background()
	if _, err := e.svc.DisableFlow(ctx, e.project, f.ID); err != nil {
		t.Fatal(err)
	}
	at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Outcome != automation.OutcomeFinished || at.Run.Status != automation.RunFailed || at.Run.Error != automation.StoppedMessage {
		t.Fatalf("attempt after disable = %v %s %q, %v; want finished FAILED %q", at.Outcome, at.Run.Status, at.Run.Error, err, automation.StoppedMessage)
	}
	if calls.Load() != 0 {
		t.Fatalf("the stopped run called out %d times", calls.Load())
	}
	if _, err := e.svc.EnableFlow(ctx, e.project, f.ID); err != nil {
		t.Fatal(err)
	}
	later := e.start1(t, f)
	if at, err := e.svc.ExecuteRun(ctx, later.Project, later.ID); err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("run after enabling again = %s %q, %v; want SUCCEEDED", at.Run.Status, at.Run.Error, err)
	}
}
