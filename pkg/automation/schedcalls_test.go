package automation_test

import (
	"context"
	"sync"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// countingScheduler records the calls a Service makes to its Scheduler.
type countingScheduler struct {
	mu      sync.Mutex
	syncs   map[string]int
	removes map[string]int
}

func (c *countingScheduler) SyncSchedule(_ context.Context, f automation.Flow) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncs[f.ID]++
	return nil
}

func (c *countingScheduler) RemoveSchedule(_ context.Context, _, flowID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removes[flowID]++
	return nil
}

// TestSchedulerCalledOnlyForScheduledFlows: enabling, disabling and
// deleting a webhook flow make no scheduler call (on AWS each was a
// DeleteSchedule answered 404); a SCHEDULE flow's are made, and a flow
// whose trigger changes from SCHEDULE to WEBHOOK has its schedule synced
// away once.
func TestSchedulerCalledOnlyForScheduledFlows(t *testing.T) {
	ctx := context.Background()
	sched := &countingScheduler{syncs: map[string]int{}, removes: map[string]int{}}
	e := flowtest.New(t, flowtest.Options{Scheduler: sched})
	p, _ := e.Project(t, "acme", automation.PlanEnterprise)
	set := automation.Step{Name: "s", Type: automation.StepSet, Values: []byte(`{"a":1}`)}

	hook := e.ActiveFlow(t, p, "hook", set)
	if _, err := e.Svc.DisableFlow(ctx, p, hook.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.Svc.DeleteFlow(ctx, p, hook.ID); err != nil {
		t.Fatal(err)
	}
	if sched.syncs[hook.ID] != 0 || sched.removes[hook.ID] != 0 {
		t.Errorf("a webhook flow made %d syncs and %d removes; want none", sched.syncs[hook.ID], sched.removes[hook.ID])
	}

	name, eng, steps := "cron", automation.FlowBuilder, []automation.Step{set}
	cron, err := e.Svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps,
		Trigger: &automation.Trigger{Type: automation.TriggerSchedule, Schedule: &automation.Schedule{Cron: "*/5 * * * *"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.EnableFlow(ctx, p, cron.ID); err != nil {
		t.Fatal(err)
	}
	webhook := automation.Trigger{Type: automation.TriggerWebhook}
	if _, err := e.Svc.UpdateFlow(ctx, p, cron.ID, automation.FlowInput{Trigger: &webhook}); err != nil {
		t.Fatal(err)
	}
	syncs := sched.syncs[cron.ID]
	if syncs != 2 {
		t.Errorf("enable and the change to a webhook trigger made %d syncs; want 2", syncs)
	}
	if _, err := e.Svc.DisableFlow(ctx, p, cron.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.Svc.DeleteFlow(ctx, p, cron.ID); err != nil {
		t.Fatal(err)
	}
	if sched.syncs[cron.ID] != syncs || sched.removes[cron.ID] != 0 {
		t.Errorf("once a webhook flow, it made %d more syncs and %d removes; want none", sched.syncs[cron.ID]-syncs, sched.removes[cron.ID])
	}
}
