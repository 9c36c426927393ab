package pgstore_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/pgstore"
)

// twoNodes opens two stores on one schema, as two flowd nodes, and waits
// until both listen for the other's changes.
func twoNodes(t *testing.T, opts ...pgstore.Option) (a, b *pgstore.Store) {
	t.Helper()
	a = open(t, opts...)
	b, err := pgstore.Open(context.Background(), a.URL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	testwait.Event(t, "both listeners to connect", func() bool { return a.Listening() && b.Listening() })
	return a, b
}

// changedOn waits until node n has applied a change notification after
// the count seen.
func changedOn(t *testing.T, n *pgstore.Store, seen uint64) {
	t.Helper()
	testwait.Event(t, "the change to reach the other node", func() bool { return n.ChangesSeen() > seen })
}

// nodeFixture is a project with a flow on node a.
func nodeFixture(t *testing.T, a *pgstore.Store) automation.Flow {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	p := automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "nodes", Plan: automation.PlanTeam, Created: now}
	if err := a.CreateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	f := automation.Flow{ID: automation.NewID(automation.PrefixFlow), Project: p.ID, Name: "hook",
		Status: automation.FlowActive, Engine: automation.FlowBuilder, TriggerType: automation.TriggerWebhook,
		Created: now, Updated: now, Version: 1,
		Trigger: automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{HTTPMethod: "POST"}},
		Steps:   []automation.Step{{Name: "set", Type: automation.StepSet, Values: json.RawMessage(`{"a": 1}`)}}}
	if err := a.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	return f
}

// runOn creates a run of f on node n and claims it there.
func runOn(t *testing.T, n *pgstore.Store, f automation.Flow) automation.Run {
	t.Helper()
	ctx := context.Background()
	r := automation.Run{ID: automation.NewID(automation.PrefixRun), Project: f.Project, FlowID: f.ID,
		Status: automation.RunRunning, Created: time.Now().UTC(), Steps: []automation.StepResult{},
		Trigger: automation.TriggerData{Method: "POST", Body: json.RawMessage(`{}`)}}
	if err := n.Enqueue(ctx, r); err != nil {
		t.Fatal(err)
	}
	c, err := n.ClaimRun(ctx, f.Project, r.ID, time.Now(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSubscriptionSeenByOtherNode: node B has cached the project's
// subscriptions (none) at a run's finish; a subscription created on node A
// then reaches B, whose next failed run writes the event for it.
func TestSubscriptionSeenByOtherNode(t *testing.T) {
	ctx := context.Background()
	a, b := twoNodes(t)
	at := time.Now().UTC()
	for _, n := range []*pgstore.Store{a, b} {
		n.UseOutbox(alerts.NewOutbox(func() time.Time { return at }))
	}
	f := nodeFixture(t, a)
	fail := func() automation.Run {
		t.Helper()
		r := runOn(t, b, f)
		started, fin, d := r.Created, time.Now().UTC(), int64(1)
		r.Status, r.Error = automation.RunFailed, "step set: boom"
		r.Started, r.Finished, r.DurationMs = &started, &fin, &d
		if err := b.FinishRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	claim := func() []alerts.Pending {
		t.Helper()
		got, err := a.ClaimDeliveries(ctx, time.Now().Add(time.Minute), time.Minute, 100, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	fail() // B loads and keeps the project's subscriptions: none
	if got := claim(); len(got) != 0 {
		t.Fatalf("%d deliveries without a subscription", len(got))
	}

	seen := b.ChangesSeen()
	sub := alerts.Subscription{ID: automation.NewID(alerts.PrefixSubscription), Project: f.Project, URL: "https://hooks.example.com/x",
		Events: []string{alerts.EventRunFailed}, Status: alerts.StatusActive, Secret: alerts.NewSecret(), Created: at}
	if err := a.CreateSubscription(ctx, sub); err != nil {
		t.Fatal(err)
	}
	changedOn(t, b, seen)
	r := fail()
	got := claim()
	if len(got) != 1 || got[0].Delivery.SubscriptionID != sub.ID || got[0].Event.Type != alerts.EventRunFailed {
		t.Fatalf("after a subscription made on A, B's failed run %s wrote %+v; want one run.failed delivery to %s", r.ID, got, sub.ID)
	}
}

// TestDisableOnOtherNodeStopsRun: a flow disabled on node A stops, at its
// next step on node B, a run B was executing.
func TestDisableOnOtherNodeStopsRun(t *testing.T) {
	ctx := context.Background()
	a, b := twoNodes(t)
	f := nodeFixture(t, a)
	r := runOn(t, b, f)
	step := []automation.StepPatch{{Path: automation.PatchRootSteps,
		Steps: []automation.StepResult{{Name: "set", Type: automation.StepSet, Status: automation.StepSucceeded}}}}
	if err := b.AppendSteps(ctx, r, step); err != nil {
		t.Fatalf("a step before the disable: %v", err)
	}
	r.JournalLen++

	seen := b.ChangesSeen()
	cur, err := a.Flow(ctx, f.Project, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now().UTC()
	cur.Status, cur.StoppedAt, cur.Version = automation.FlowInactive, &stopped, cur.Version+1
	if err := a.PutFlow(ctx, cur); err != nil {
		t.Fatal(err)
	}
	changedOn(t, b, seen)
	if err := b.AppendSteps(ctx, r, step); !automation.HasCode(err, automation.CodeFlowStopped) {
		t.Fatalf("a step on B after the disable on A: %v, want %s", err, automation.CodeFlowStopped)
	}
	// A node that starts later reads the stop from the flows.
	c, err := pgstore.Open(ctx, a.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	testwait.Event(t, "node C to listen", c.Listening)
	if err := c.AppendSteps(ctx, r, step); !automation.HasCode(err, automation.CodeFlowStopped) {
		t.Fatalf("a step on a node started after the disable: %v, want %s", err, automation.CodeFlowStopped)
	}
}

// TestFlowCacheAcrossNodes: with CacheFlows, node B's cached flow is
// dropped when node A changes it, and a flow deleted on A is gone on B.
func TestFlowCacheAcrossNodes(t *testing.T) {
	ctx := context.Background()
	a, b := twoNodes(t, pgstore.CacheFlows(time.Hour))
	f := nodeFixture(t, a)
	if got, err := b.FlowByID(ctx, f.ID); err != nil || got.Name != "hook" {
		t.Fatalf("B's first read: %+v, %v", got, err)
	}
	seen := b.ChangesSeen()
	f.Name, f.Version = "renamed", f.Version+1
	if err := a.PutFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	changedOn(t, b, seen)
	if got, err := b.FlowByID(ctx, f.ID); err != nil || got.Name != "renamed" {
		t.Fatalf("B's read after A's change: name %q, %v; want renamed", got.Name, err)
	}
	seen = b.ChangesSeen()
	if err := a.DeleteFlow(ctx, f.Project, f.ID); err != nil {
		t.Fatal(err)
	}
	changedOn(t, b, seen)
	if _, err := b.FlowByID(ctx, f.ID); !automation.IsNotFound(err) {
		t.Fatalf("B's read after A's delete: %v, want not found", err)
	}
}
