package dashboard

import (
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestWaitInSwitchIsDrawnWaiting: a run paused at a WAIT inside a SWITCH's
// branch draws the WAIT and the SWITCH amber (waiting) and the steps not
// reached yet pale, not green and grey (skipped).
func TestWaitInSwitchIsDrawnWaiting(t *testing.T) {
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	next := at.Add(10 * time.Minute)
	f := automation.Flow{Name: "waits", Steps: []automation.Step{
		{Name: "route", Type: automation.StepSwitch, Cases: []automation.Case{{When: "true", Steps: []automation.Step{
			{Name: "pause", Type: automation.StepWait, Duration: "10m"}, {Name: "after", Type: automation.StepSet}}}}},
		{Name: "reply", Type: automation.StepRespond},
	}}
	r := automation.Run{Status: automation.RunRunning, WaitingFor: automation.WaitingWait, NextAttemptAt: &next, Steps: []automation.StepResult{
		{Name: "route", Type: automation.StepSwitch, Status: automation.StepRunning, StartedAt: &at, Steps: []automation.StepResult{
			{Name: "pause", Type: automation.StepWait, Status: automation.StepSucceeded, StartedAt: &at, FinishedAt: &at},
			{Name: "after", Type: automation.StepSet, Status: automation.StepPending}}},
		{Name: "reply", Type: automation.StepRespond, Status: automation.StepPending},
	}}
	pic := string(newRunView(f, r).Picture)
	for step, want := range map[string]string{"route": "st-waiting", "pause": "st-waiting", "after": "st-unreached", "reply": "st-unreached"} {
		i := strings.Index(pic, `data-step="`+step+`"`)
		if i < 0 {
			t.Fatalf("no box for %s", step)
		}
		if cls := pic[strings.LastIndex(pic[:i], `class="`):i]; !strings.Contains(cls, want) {
			t.Errorf("%s is drawn %q, want %s", step, cls, want)
		}
	}
}
