// Package schedtest is the contract suite every automation.Scheduler adapter
// passes: the in-process cron of flowd and EventBridge Scheduler run the same
// test functions, so the Service can call SyncSchedule after every write and
// RemoveSchedule after a delete whichever adapter is wired.
//
// The suite builds flows by hand (no Service), as the Service stores them,
// and looks at what the adapter holds through Env.Lookup. It never waits for
// a schedule to fire: firing is each adapter's own test.
package schedtest

import (
	"context"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// Env is one adapter under test.
type Env struct {
	// Scheduler is the adapter, holding no schedules yet.
	Scheduler automation.Scheduler
	// Lookup reports the schedule the adapter holds for a flow: its cron
	// spec and IANA time zone, and ok false when it holds none.
	Lookup func(ctx context.Context, project, flowID string) (cron, timezone string, ok bool, err error)
	// Expression, when set, is how the adapter writes a five-field spec
	// (EventBridge Scheduler keeps cron(...) expressions): Lookup's cron is
	// compared with Expression(spec) instead of spec itself.
	Expression func(spec string) (string, error)
}

// Run runs the scheduler contract against the adapter open makes. open must
// return an adapter holding no schedules each call and arrange its own
// cleanup (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) Env) {
	t.Run("ActiveScheduleFlow", func(t *testing.T) { testActive(t, open(t)) })
	t.Run("EmptyTimezoneIsUTC", func(t *testing.T) { testEmptyTimezone(t, open(t)) })
	t.Run("Update", func(t *testing.T) { testUpdate(t, open(t)) })
	t.Run("Disable", func(t *testing.T) { testDisable(t, open(t)) })
	t.Run("NoneWhenNotActiveSchedule", func(t *testing.T) { testNone(t, open(t)) })
	t.Run("SwitchToWebhook", func(t *testing.T) { testSwitchToWebhook(t, open(t)) })
	t.Run("Remove", func(t *testing.T) { testRemove(t, open(t)) })
	t.Run("Independent", func(t *testing.T) { testIndependent(t, open(t)) })
}

// ScheduleFlow is an ACTIVE flow builder flow on a schedule, as the Service
// stores it after enable.
func ScheduleFlow(project, cron, timezone string) automation.Flow {
	created := time.Now().UTC().Truncate(time.Millisecond)
	return automation.Flow{
		ID: automation.NewID(automation.PrefixFlow), Project: project, Name: "nightly report",
		Status: automation.FlowActive, Engine: automation.FlowBuilder,
		TriggerType: automation.TriggerSchedule, Created: created, Updated: created, Version: 2,
		Trigger: automation.Trigger{Type: automation.TriggerSchedule,
			Schedule: &automation.Schedule{Cron: cron, Timezone: timezone}},
		Steps: []automation.Step{{Name: "filter", Type: automation.StepFilter, Condition: "trigger.body.firedAt != ''"}},
	}
}

// WebhookFlow is an ACTIVE flow builder webhook flow.
func WebhookFlow(project string) automation.Flow {
	f := ScheduleFlow(project, "", "")
	toWebhook(&f)
	return f
}

// toWebhook switches f to a webhook trigger, as an update does.
func toWebhook(f *automation.Flow) {
	f.TriggerType = automation.TriggerWebhook
	f.Trigger = automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{HTTPMethod: "POST"}}
}

// newProject is a project ID as the Service makes them.
func newProject() string { return automation.NewID(automation.PrefixProject) }

// sync calls SyncSchedule with a bumped version, as the Service does after
// each write.
func sync(t *testing.T, e Env, f *automation.Flow) {
	t.Helper()
	f.Version++
	if err := e.Scheduler.SyncSchedule(context.Background(), *f); err != nil {
		t.Fatalf("SyncSchedule(%s %s %s): %v", f.ID, f.Status, f.Trigger.Type, err)
	}
}

// wantSchedule fails unless the adapter holds f's schedule with cron and tz.
func wantSchedule(t *testing.T, e Env, what string, f automation.Flow, cron, tz string) {
	t.Helper()
	want := cron
	if e.Expression != nil {
		var err error
		if want, err = e.Expression(cron); err != nil {
			t.Fatalf("%s: Expression(%q): %v", what, cron, err)
		}
	}
	gotCron, gotTZ, ok, err := e.Lookup(context.Background(), f.Project, f.ID)
	if err != nil {
		t.Fatalf("%s: Lookup(%s): %v", what, f.ID, err)
	}
	if !ok {
		t.Fatalf("%s: no schedule for flow %s, want %q in %s", what, f.ID, want, tz)
	}
	if gotCron != want || gotTZ != tz {
		t.Errorf("%s: schedule = %q in %q, want %q in %q", what, gotCron, gotTZ, want, tz)
	}
}

// wantNone fails if the adapter holds a schedule for the flow.
func wantNone(t *testing.T, e Env, what, project, flowID string) {
	t.Helper()
	cron, tz, ok, err := e.Lookup(context.Background(), project, flowID)
	if err != nil {
		t.Fatalf("%s: Lookup(%s): %v", what, flowID, err)
	}
	if ok {
		t.Errorf("%s: flow %s has schedule %q in %q, want none", what, flowID, cron, tz)
	}
}

func testActive(t *testing.T, e Env) {
	f := ScheduleFlow(newProject(), "*/5 * * * *", "Europe/Berlin")
	sync(t, e, &f)
	wantSchedule(t, e, "after enable", f, "*/5 * * * *", "Europe/Berlin")
}

func testEmptyTimezone(t *testing.T, e Env) {
	// Flows stored before the default was filled in have no time zone; the
	// validator's default is UTC, so the schedule must be in UTC too.
	f := ScheduleFlow(newProject(), "@daily", "")
	sync(t, e, &f)
	wantSchedule(t, e, "no time zone", f, "@daily", "UTC")
}

func testUpdate(t *testing.T, e Env) {
	f := ScheduleFlow(newProject(), "*/5 * * * *", "UTC")
	sync(t, e, &f)
	f.Trigger.Schedule = &automation.Schedule{Cron: "30 9 * * 1-5", Timezone: "America/New_York"}
	sync(t, e, &f)
	wantSchedule(t, e, "after update", f, "30 9 * * 1-5", "America/New_York")
	// The Service may sync an unchanged flow (an update of its name, or a
	// retried request): that changes nothing and is no error.
	sync(t, e, &f)
	sync(t, e, &f)
	wantSchedule(t, e, "after syncing again", f, "30 9 * * 1-5", "America/New_York")
	f.Trigger.Schedule.Cron = "0 0 1 * *"
	sync(t, e, &f)
	wantSchedule(t, e, "after a second update", f, "0 0 1 * *", "America/New_York")
}

func testDisable(t *testing.T, e Env) {
	f := ScheduleFlow(newProject(), "0 * * * *", "UTC")
	sync(t, e, &f)
	f.Status = automation.FlowInactive
	sync(t, e, &f)
	wantNone(t, e, "after disable", f.Project, f.ID)
	sync(t, e, &f) // disabling twice
	wantNone(t, e, "after disabling twice", f.Project, f.ID)
	f.Status = automation.FlowActive
	sync(t, e, &f)
	wantSchedule(t, e, "after enabling again", f, "0 * * * *", "UTC")
}

func testNone(t *testing.T, e Env) {
	project := newProject()
	hook := WebhookFlow(project)
	sync(t, e, &hook)
	wantNone(t, e, "active webhook flow", project, hook.ID)

	inactive := ScheduleFlow(project, "*/10 * * * *", "UTC")
	inactive.Status = automation.FlowInactive
	sync(t, e, &inactive)
	wantNone(t, e, "inactive schedule flow", project, inactive.ID)

	wantNone(t, e, "flow never synced", project, automation.NewID(automation.PrefixFlow))
}

func testSwitchToWebhook(t *testing.T, e Env) {
	f := ScheduleFlow(newProject(), "15 3 * * *", "Asia/Tokyo")
	sync(t, e, &f)
	toWebhook(&f)
	sync(t, e, &f)
	wantNone(t, e, "after switching to a webhook", f.Project, f.ID)

	// And back: the schedule returns with the new spec.
	f.TriggerType = automation.TriggerSchedule
	f.Trigger = automation.Trigger{Type: automation.TriggerSchedule,
		Schedule: &automation.Schedule{Cron: "45 4 * * *", Timezone: "Asia/Tokyo"}}
	sync(t, e, &f)
	wantSchedule(t, e, "after switching back", f, "45 4 * * *", "Asia/Tokyo")
}

func testRemove(t *testing.T, e Env) {
	ctx := context.Background()
	f := ScheduleFlow(newProject(), "0 12 * * *", "UTC")
	sync(t, e, &f)
	if err := e.Scheduler.RemoveSchedule(ctx, f.Project, f.ID); err != nil {
		t.Fatalf("RemoveSchedule: %v", err)
	}
	wantNone(t, e, "after RemoveSchedule", f.Project, f.ID)
	if err := e.Scheduler.RemoveSchedule(ctx, f.Project, f.ID); err != nil {
		t.Errorf("RemoveSchedule of a removed schedule: %v, want nil", err)
	}
	if err := e.Scheduler.RemoveSchedule(ctx, f.Project, automation.NewID(automation.PrefixFlow)); err != nil {
		t.Errorf("RemoveSchedule of an unknown flow: %v, want nil", err)
	}
	// A flow deleted while inactive never had one.
	g := ScheduleFlow(f.Project, "0 12 * * *", "UTC")
	g.Status = automation.FlowInactive
	sync(t, e, &g)
	if err := e.Scheduler.RemoveSchedule(ctx, g.Project, g.ID); err != nil {
		t.Errorf("RemoveSchedule of an inactive flow: %v, want nil", err)
	}
}

func testIndependent(t *testing.T, e Env) {
	ctx := context.Background()
	p1, p2 := newProject(), newProject()
	a := ScheduleFlow(p1, "0 6 * * *", "UTC")
	b := ScheduleFlow(p1, "0 18 * * 0", "Europe/Paris")
	c := ScheduleFlow(p2, "@hourly", "UTC")
	for _, f := range []*automation.Flow{&a, &b, &c} {
		sync(t, e, f)
	}
	wantSchedule(t, e, "a", a, "0 6 * * *", "UTC")
	wantSchedule(t, e, "b", b, "0 18 * * 0", "Europe/Paris")
	wantSchedule(t, e, "c", c, "@hourly", "UTC")

	a.Trigger.Schedule.Cron = "0 7 * * *"
	sync(t, e, &a)
	wantSchedule(t, e, "a after its update", a, "0 7 * * *", "UTC")
	wantSchedule(t, e, "b after a's update", b, "0 18 * * 0", "Europe/Paris")

	b.Status = automation.FlowInactive
	sync(t, e, &b)
	wantNone(t, e, "b after its disable", p1, b.ID)
	wantSchedule(t, e, "a after b's disable", a, "0 7 * * *", "UTC")

	if err := e.Scheduler.RemoveSchedule(ctx, p1, a.ID); err != nil {
		t.Fatalf("RemoveSchedule(a): %v", err)
	}
	wantNone(t, e, "a after its removal", p1, a.ID)
	wantSchedule(t, e, "c after a's removal", c, "@hourly", "UTC")
}
