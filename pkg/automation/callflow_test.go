package automation_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/sqlitestore"
)

// TestCallFlowWaitsWithoutSpendingRetries drives a waiting CALL_FLOW claim
// by claim on real SQLite: the first attempt parks the caller and then
// starts the child (derived ID, trigger.caller, depth 1); a look while the
// child runs parks it again without a second child; once the child has
// ended, the caller goes on with its answer. With MaxAttempts 2, the
// caller's flaky HTTP step after the call still gets its retry: the claims
// that only looked at the child are not attempts.
func TestCallFlowWaitsWithoutSpendingRetries(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{MaxAttempts: 2})
	ctx := context.Background()
	flaky, calls := flowtest.StatusServer(t, 503, 200)
	child := e.ActiveFlow(t, e.project, "child",
		automation.Step{Name: "answer", Type: automation.StepRespond, Body: json.RawMessage(`{"got": "{{ trigger.body.ref }}"}`)})
	parent := e.ActiveFlow(t, e.project, "parent",
		automation.Step{Name: "call", Type: automation.StepCallFlow, FlowID: child.ID, Input: json.RawMessage(`{"ref": "{{ trigger.body.ref }}"}`)},
		automation.Step{Name: "notify", Type: automation.StepHTTP, Method: "POST", URL: flaky.URL, Body: json.RawMessage(`{"got": "{{ steps.call.got }}"}`)})
	r := e.start1(t, parent)

	at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	childID := automation.CallRunID(r.ID, "call", child.ID)
	if at.Outcome != automation.OutcomeRetry || at.Run.Status != automation.RunRunning {
		t.Fatalf("first attempt = %v %s, want the caller parked", at.Outcome, at.Run.Status)
	}
	if wait := time.Until(at.RetryAt); wait < 50*time.Second || wait > automation.CallStartCheck {
		t.Errorf("parked for %s, want about %s (the first look after asking for the child)", wait, automation.CallStartCheck)
	}
	kid, err := e.svc.Run(ctx, e.project, child.ID, childID)
	if err != nil {
		t.Fatalf("the child %s was not started: %v", childID, err)
	}
	if kid.Trigger.Caller == nil || kid.Trigger.Caller.RunID != r.ID || kid.Trigger.Depth() != 1 || string(kid.Trigger.Body) != `{"ref":"main"}` {
		t.Fatalf("child trigger = %+v, want caller %s, depth 1, body {\"ref\":\"main\"}", kid.Trigger, r.ID)
	}

	// A look before the child ran: parked again, for longer, no new child.
	at, _ = e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if at.Outcome != automation.OutcomeRetry || time.Until(at.RetryAt) < automation.CallCheckInterval-time.Minute {
		t.Fatalf("look while the child runs = %v until %s, want parked about %s", at.Outcome, at.RetryAt, automation.CallCheckInterval)
	}
	if id, ok := automation.WaitingCall(at.Run.Steps[0]); !ok || id != childID || at.Run.Steps[0].Attempts != 2 {
		t.Fatalf("call step = %+v, want waiting for %s with 2 attempts", at.Run.Steps[0], childID)
	}

	if at, err := e.svc.ExecuteRun(ctx, r.Project, childID); err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("child = %v %v", at.Run.Status, err)
	}
	at, _ = e.svc.ExecuteRun(ctx, r.Project, r.ID) // the child's answer; notify gets a 503
	if at.Outcome != automation.OutcomeRetry || string(at.Run.Steps[0].Output) != `{"got":"main"}` {
		t.Fatalf("after the child = %v, call output %s; want a retry of notify with the child's answer", at.Outcome, at.Run.Steps[0].Output)
	}
	at, _ = e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if at.Run.Status != automation.RunSucceeded || calls.Load() != 2 {
		t.Fatalf("caller = %s (%s) after %d notify calls, want SUCCEEDED on notify's retry", at.Run.Status, at.Run.Error, calls.Load())
	}
}

// TestCallFlowWithoutWait starts the child at once and outputs its run ID;
// executing the step again (a retry) finds the same child.
func TestCallFlowWithoutWait(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	child := e.ActiveFlow(t, e.project, "child", automation.Step{Name: "s", Type: automation.StepSet, Values: json.RawMessage(`{"a": 1}`)})
	no := false
	parent := e.ActiveFlow(t, e.project, "parent",
		automation.Step{Name: "go", Type: automation.StepCallFlow, FlowID: child.ID, Wait: &no})
	r := e.start1(t, parent)
	at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	childID := automation.CallRunID(r.ID, "go", child.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded || string(at.Run.Steps[0].Output) != `{"runId":"`+childID+`"}` {
		t.Fatalf("caller = %s %v, output %s; want SUCCEEDED with runId %s", at.Run.Status, err, at.Run.Steps[0].Output, childID)
	}
	if err := e.svc.StartCall(ctx, automation.Call{Project: e.project.ID, FlowID: child.ID, RunID: childID, Depth: 1}); err != nil {
		t.Fatalf("starting the same call again = %v, want nil (the same child)", err)
	}
	if at, err := e.svc.ExecuteRun(ctx, r.Project, childID); err != nil || at.Run.Status != automation.RunSucceeded || at.Run.Trigger.Caller.Wait {
		t.Fatalf("child = %+v %v, want SUCCEEDED, its caller not waiting", at.Run, err)
	}
	if _, err := e.svc.CalledRun(ctx, e.project.ID, child.ID, automation.CallRunID(r.ID, "go2", child.ID)); !automation.IsNotFound(err) {
		t.Errorf("a call never made = %v, want not found", err)
	}
	if err := e.svc.CheckCall(ctx, "prj_other", child.ID); err == nil || !strings.Contains(err.Error(), "does not exist in this project") {
		t.Errorf("another project's call = %v, want not found in this project", err)
	}
}

// TestPausesInsideASwitch pauses a run inside a SWITCH's branch, with a
// WAIT and with a waiting CALL_FLOW: the attempt that resumes the run
// enters the branch again, in the case it chose, and runs the steps after
// the pause.
func TestPausesInsideASwitch(t *testing.T) {
	clock := newTestClock()
	e := newEnv(t, automation.RunPolicy{}, clock.now)
	ctx := context.Background()
	child := e.ActiveFlow(t, e.project, "child", automation.Step{Name: "s", Type: automation.StepSet, Values: json.RawMessage(`{"a": 1}`)})
	for _, pause := range []automation.Step{
		{Name: "pause", Type: automation.StepWait, Duration: "1ms"},
		{Name: "pause", Type: automation.StepCallFlow, FlowID: child.ID},
	} {
		t.Run(string(pause.Type), func(t *testing.T) {
			f := e.ActiveFlow(t, e.project, "switch "+string(pause.Type), automation.Step{Name: "route", Type: automation.StepSwitch,
				Cases: []automation.Case{{When: "trigger.body.ref == 'main'", Steps: []automation.Step{pause,
					{Name: "after", Type: automation.StepSet, Values: json.RawMessage(`{"x": 1}`)}}}}},
				automation.Step{Name: "last", Type: automation.StepSet, Values: json.RawMessage(`{"y": "{{ steps.after.x }}"}`)})
			r := e.start1(t, f)
			at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID)
			if at.Outcome != automation.OutcomeRetry || at.Run.Status != automation.RunRunning {
				t.Fatalf("first attempt = %v %s, want the run paused", at.Outcome, at.Run.Status)
			}
			if pause.Type == automation.StepCallFlow {
				if at, err := e.svc.ExecuteRun(ctx, r.Project, automation.CallRunID(r.ID, "pause", child.ID)); err != nil || at.Run.Status != automation.RunSucceeded {
					t.Fatalf("child = %s %v", at.Run.Status, err)
				}
			} else {
				clock.advance(time.Millisecond) // past the 1ms WAIT
			}
			at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
			if err != nil || at.Run.Status != automation.RunSucceeded {
				t.Fatalf("resumed = %s (%s) %v, want SUCCEEDED", at.Run.Status, at.Run.Error, err)
			}
			branch := at.Run.Steps[0].Steps
			if len(branch) != 2 || branch[1].Status != automation.StepSucceeded || string(at.Run.Steps[1].Output) != `{"y":1}` {
				t.Fatalf("steps = %+v, want the step after the pause run, and the step after the SWITCH see it", at.Run.Steps)
			}
		})
	}
}

// wakingQueue is the embedded queue with the wake-ups it is told of
// (automation.Waker), as SQS's would send them.
type wakingQueue struct {
	automation.RunQueue
	mu    sync.Mutex
	woken []string
}

func (q *wakingQueue) WakeRun(_ context.Context, _, runID string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.woken = append(q.woken, runID)
	return nil
}

func (q *wakingQueue) wakes() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.woken)
}

// TestCallFlowWakeUps checks the wake-ups a queue without the embedded
// store's (SQS) is told of: the child's end wakes its waiting caller, and
// a look at a child never claimed a CallStartCheck after it was started
// wakes the child (its message may never have been sent), not before.
func TestCallFlowWakeUps(t *testing.T) {
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	q := &wakingQueue{}
	fe := flowtest.New(t, flowtest.Options{Clock: func() time.Time { return *now.Load() },
		Queue: func(s *sqlitestore.Store) automation.RunQueue { q.RunQueue = s; return q }})
	project, _ := fe.Project(t, "wake", automation.PlanEnterprise)
	ctx := context.Background()
	child := fe.ActiveFlow(t, project, "child", automation.Step{Name: "s", Type: automation.StepSet, Values: json.RawMessage(`{"a": 1}`)})
	parent := fe.ActiveFlow(t, project, "parent", automation.Step{Name: "call", Type: automation.StepCallFlow, FlowID: child.ID})
	r := fe.StartRef(t, parent)
	childID := automation.CallRunID(r.ID, "call", child.ID)

	if at, _ := fe.Svc.ExecuteRun(ctx, r.Project, r.ID); at.Outcome != automation.OutcomeRetry {
		t.Fatalf("first attempt = %v, want the caller parked", at.Outcome)
	}
	fe.Svc.ExecuteRun(ctx, r.Project, r.ID) // a look at once: the child is young
	if got := q.wakes(); len(got) != 0 {
		t.Fatalf("wake-ups before the child is due a look = %v, want none", got)
	}
	later := start.Add(automation.CallStartCheck + time.Second)
	now.Store(&later)
	fe.Svc.ExecuteRun(ctx, r.Project, r.ID)
	if got := q.wakes(); !slices.Equal(got, []string{childID}) {
		t.Fatalf("wake-ups after a look at a child never claimed = %v, want the child %s", got, childID)
	}
	if at, err := fe.Svc.ExecuteRun(ctx, r.Project, childID); err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("child = %s %v", at.Run.Status, err)
	}
	if got := q.wakes(); !slices.Equal(got, []string{childID, r.ID}) {
		t.Fatalf("wake-ups after the child ended = %v, want its caller %s", got, r.ID)
	}
	if at, err := fe.Svc.ExecuteRun(ctx, r.Project, r.ID); err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("caller = %s (%s) %v, want SUCCEEDED", at.Run.Status, at.Run.Error, err)
	}
}
