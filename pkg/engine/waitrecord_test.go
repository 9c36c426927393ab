package engine

import (
	"context"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestWaitInSwitchRecordsWhereTheRunStands: while a run waits at a WAIT
// inside a SWITCH's branch, its record says the SWITCH is RUNNING and the
// steps not reached yet (in the branch and after the SWITCH) are PENDING,
// not SKIPPED as if the run had ended; once it resumes and ends, every step
// is SUCCEEDED.
func TestWaitInSwitchRecordsWhereTheRunStands(t *testing.T) {
	now := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	e := New(Config{Clock: clock})
	f := automation.Flow{ID: "flw_1", Name: "waits", Engine: automation.WorkflowBuilder, Steps: []automation.Step{
		{Name: "route", Type: automation.StepSwitch, Cases: []automation.Case{{When: "true", Steps: []automation.Step{
			{Name: "before", Type: automation.StepSet, Values: []byte(`{"a": 1}`)},
			{Name: "pause", Type: automation.StepWait, Duration: "10m"},
			{Name: "after", Type: automation.StepSet, Values: []byte(`{"b": 2}`)},
		}}}},
		{Name: "reply", Type: automation.StepRespond, Body: []byte(`"done"`)},
	}}
	r := automation.Run{ID: "run_1", FlowID: f.ID, Status: automation.RunRunning, Trigger: automation.TriggerData{Body: []byte(`{}`)}}
	res := e.ExecuteJournaled(context.Background(), f, r, nil)
	if res.WaitUntil == nil {
		t.Fatalf("the run did not wait: %+v", res.Run)
	}
	got := map[string]automation.StepStatus{}
	var walk func([]automation.StepResult)
	walk = func(rs []automation.StepResult) {
		for _, s := range rs {
			got[s.Name] = s.Status
			walk(s.Steps)
		}
	}
	walk(res.Run.Steps)
	want := map[string]automation.StepStatus{
		"route": automation.StepRunning, "before": automation.StepSucceeded, "pause": automation.StepSucceeded,
		"after": automation.StepPending, "reply": automation.StepPending,
	}
	for name, st := range want {
		if got[name] != st {
			t.Errorf("while the run waits, %s is %s, want %s", name, got[name], st)
		}
	}

	// The next attempt, after the WAIT, resumes in the branch and ends.
	now = now.Add(11 * time.Minute)
	res = e.ExecuteJournaled(context.Background(), f, res.Run, nil)
	if res.Run.Status != automation.RunSucceeded {
		t.Fatalf("the resumed run ended %s: %s", res.Run.Status, res.Run.Error)
	}
	got = map[string]automation.StepStatus{}
	walk(res.Run.Steps)
	for _, name := range []string{"route", "before", "pause", "after", "reply"} {
		if got[name] != automation.StepSucceeded {
			t.Errorf("after the resume, %s is %s, want SUCCEEDED", name, got[name])
		}
	}
}
