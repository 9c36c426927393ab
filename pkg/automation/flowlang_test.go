package automation_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// onError runs once, when the run has failed for good (after its
// retries), records its results under onErrorSteps and leaves the run's
// status as it was.
func TestOnErrorRunsOnceAfterRetries(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{MaxAttempts: 2})
	down, downCalls := service(t, 503)
	alert, alertCalls := service(t, 200)
	ctx := context.Background()
	name, eng := "fails", automation.FlowBuilder
	steps := []automation.Step{{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: down.URL, Body: json.RawMessage(`{}`)}}
	onError := []automation.Step{{Name: "alert", Type: automation.StepHTTP, Method: "POST", URL: alert.URL,
		Body: json.RawMessage(`{"text": "{{ error.step }}: {{ error.message }}"}`)}}
	f, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps, OnError: &onError})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = e.svc.EnableFlow(ctx, e.project, f.ID); err != nil {
		t.Fatal(err)
	}
	r := e.start1(t, f)
	if at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID); at.Outcome != automation.OutcomeRetry {
		t.Fatalf("first attempt = %v, %v; want a retry", at.Outcome, err)
	}
	if alertCalls.Load() != 0 {
		t.Fatalf("onError ran before the run's last attempt")
	}
	e.svc.ExecuteRun(ctx, r.Project, r.ID)
	got, err := e.svc.Run(ctx, e.project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != automation.RunFailed || downCalls.Load() != 2 || alertCalls.Load() != 1 {
		t.Fatalf("run %s after %d calls, %d alerts; want FAILED, 2, 1", got.Status, downCalls.Load(), alertCalls.Load())
	}
	if len(got.OnErrorSteps) != 1 || got.OnErrorSteps[0].Name != "alert" || got.OnErrorSteps[0].Status != automation.StepSucceeded {
		t.Fatalf("onErrorSteps = %+v", got.OnErrorSteps)
	}
	if !strings.Contains(got.Error, "gave up after 2 attempts") {
		t.Errorf("run error %q", got.Error)
	}
	// A run that succeeds runs no onError.
	up, _ := service(t, 200)
	steps[0].URL = up.URL
	if f, err = e.svc.UpdateFlow(ctx, e.project, f.ID, automation.FlowInput{Steps: &steps}); err != nil {
		t.Fatal(err)
	}
	r = e.start1(t, f)
	if at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID); err != nil || at.Run.Status != automation.RunSucceeded || alertCalls.Load() != 1 {
		t.Fatalf("succeeding run: %s %v, %d alerts", at.Run.Status, err, alertCalls.Load())
	}
}
