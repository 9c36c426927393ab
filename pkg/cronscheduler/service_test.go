package cronscheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// TestWithService wires the Scheduler as flowd does, into a real Service on
// SQLite: enable, firings (one run per due time, however often it is
// handled), disable, delete, and Load from ScheduledFlows after a restart.
func TestWithService(t *testing.T) {
	ctx := context.Background()
	var logs bytes.Buffer
	sched := New(logTo(&logs))
	svc := flowtest.New(t, flowtest.Options{Scheduler: sched}).Svc
	sched.start = svc // as Start does, without the cron runner: the test fires by hand
	p, err := svc.CreateProject(ctx, "test", automation.PlanTeam)
	if err != nil {
		t.Fatal(err)
	}

	name, eng := "report", automation.FlowBuilder
	trigger := automation.Trigger{Type: automation.TriggerSchedule,
		Schedule: &automation.Schedule{Cron: "*/5 * * * *", Timezone: "Europe/Paris"}}
	steps := []automation.Step{{Name: "set", Type: automation.StepSet, Values: json.RawMessage(`{"at": "{{ trigger.body.firedAt }}"}`)}}
	f, err := svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &eng, Trigger: &trigger, Steps: &steps})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := sched.lookup(p.ID, f.ID); ok {
		t.Fatal("a new (INACTIVE) flow has a schedule")
	}
	if _, err := svc.EnableFlow(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	if c, tz, ok := sched.lookup(p.ID, f.ID); !ok || c != "*/5 * * * *" || tz != "Europe/Paris" {
		t.Fatalf("after enable: schedule %q in %q (%v)", c, tz, ok)
	}

	e := sched.entryOf(t, f)
	due := time.Date(2026, 3, 2, 10, 5, 0, 0, time.UTC)
	sched.fire(e, due)
	sched.fire(e, due) // delivered twice: still one run
	sched.fire(e, due.Add(5*time.Minute))
	runs := listRuns(t, svc, p, f.ID)
	if len(runs) != 2 {
		t.Fatalf("%d runs after two due times (one handled twice), want 2; log: %s", len(runs), logs.String())
	}
	// Runs list newest first, but two made in the same millisecond may come
	// in either order: compare as a set.
	fired := map[string]bool{}
	for _, r := range runs {
		var body struct{ FiredAt, Cron, Timezone string }
		if err := json.Unmarshal(r.Trigger.Body, &body); err != nil || body.Cron != "*/5 * * * *" || body.Timezone != "Europe/Paris" {
			t.Errorf("run %s trigger = %s (%v)", r.ID, r.Trigger.Body, err)
		}
		if r.Status != automation.RunRunning || r.Trigger.Method != "SCHEDULE" {
			t.Errorf("run %s = %s %s, want a RUNNING SCHEDULE run", r.ID, r.Status, r.Trigger.Method)
		}
		fired[body.FiredAt] = true
	}
	if !fired["2026-03-02T10:05:00Z"] || !fired["2026-03-02T10:10:00Z"] {
		t.Errorf("runs fired at %v, want 10:05 and 10:10 UTC", fired)
	}

	// A restarted flowd loads the schedule back from the store.
	restarted := started(&recorder{}, logTo(&bytes.Buffer{}))
	flows, err := svc.ScheduledFlows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := restarted.Load(ctx, flows); err != nil {
		t.Fatal(err)
	}
	if c, _, ok := restarted.lookup(p.ID, f.ID); !ok || c != "*/5 * * * *" {
		t.Errorf("after Load: schedule %q (%v)", c, ok)
	}

	if _, err := svc.DisableFlow(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := sched.lookup(p.ID, f.ID); ok {
		t.Error("a disabled flow keeps its schedule")
	}
	// A firing already on its way when the flow was disabled starts nothing.
	logs.Reset()
	sched.fire(e, due.Add(10*time.Minute))
	if n := len(listRuns(t, svc, p, f.ID)); n != 2 || !strings.Contains(logs.String(), "no longer scheduled") {
		t.Errorf("firing after disable: %d runs, log %q; want 2 runs and a note", n, logs.String())
	}

	if _, err := svc.EnableFlow(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteFlow(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := sched.lookup(p.ID, f.ID); ok {
		t.Error("a deleted flow keeps its schedule")
	}
}

func listRuns(t *testing.T, svc *automation.Service, p automation.Project, flowID string) []automation.Run {
	t.Helper()
	page, err := svc.ListRuns(context.Background(), p, flowID, automation.PageRequest{Limit: "100"})
	if err != nil {
		t.Fatal(err)
	}
	// Lists hold summaries: read each run whole, trigger body included.
	out := make([]automation.Run, 0, len(page.Data))
	for _, r := range page.Data {
		full, err := svc.Run(context.Background(), p, flowID, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, full)
	}
	return out
}
