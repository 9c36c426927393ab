package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
)

// AlertsEnv is a store with event subscriptions: the run store whose
// finish writes run events, and the alerts store over the same data.
type AlertsEnv struct {
	RunEnv
	Alerts alerts.Store
	// Waitpoints is the store's waitpoints, whose writes carry approval
	// events; nil skips ApprovalEvents.
	Waitpoints automation.WaitpointStore
}

// RunAlerts runs the alerts store contract against the environment open
// makes; open must return empty stores each call.
func RunAlerts(t *testing.T, open func(t *testing.T) AlertsEnv) {
	t.Run("Subscriptions", func(t *testing.T) { testSubscriptions(t, open(t)) })
	t.Run("Deliveries", func(t *testing.T) { testDeliveries(t, open(t)) })
	t.Run("RunFinishWritesEvent", func(t *testing.T) { testRunFinishWritesEvent(t, open(t)) })
	t.Run("FlowAndConnectionEvents", func(t *testing.T) { testFlowAndConnectionEvents(t, open(t)) })
	t.Run("AlertsAudited", func(t *testing.T) { testAlertsAudited(t, open(t)) })
	t.Run("SubscriptionQuota", func(t *testing.T) { testSubscriptionQuota(t, open(t)) })
	t.Run("ApprovalEvents", func(t *testing.T) { testApprovalEvents(t, open(t)) })
}

// testApprovalEvents: a waitpoint write carries the approval event its
// Outbox decides, in the same write: opening an APPROVAL (and opening it
// again with a new token) is approval.requested with the link as url,
// which is never stored; its decision is approval.decided; an answer that
// does not decide, a refused change and a WAIT for a callback are none.
func testApprovalEvents(t *testing.T, env AlertsEnv) {
	if env.Waitpoints == nil {
		t.Skip("no waitpoints")
	}
	ctx := context.Background()
	at := fixedClock()
	env.Alerts.UseOutbox(alerts.NewOutbox(func() time.Time { return at }))
	project := automation.NewID(automation.PrefixProject)
	flowID := "flw_approvals"
	sub := newSubscription(project, alerts.EventApprovalRequested, alerts.EventApprovalDecided)
	decidedOnly := newSubscription(project, alerts.EventApprovalDecided)
	other := "flw_other"
	elsewhere := newSubscription(project, alerts.EventApprovalRequested)
	elsewhere.FlowID = &other
	for _, s := range []alerts.Subscription{sub, decidedOnly, elsewhere} {
		must(t, "create subscription", env.Alerts.CreateSubscription(ctx, s))
	}
	runID := automation.NewRunID(now())
	write := func(what, step string, kind automation.WaitpointKind, change func(w *automation.Waitpoint)) {
		t.Helper()
		_, err := env.Waitpoints.UpdateWaitpoint(ctx, project, runID, step, func(w *automation.Waitpoint, found bool) (bool, error) {
			if !found {
				*w = automation.Waitpoint{Project: project, RunID: runID, FlowID: flowID, FlowName: "refunds", Step: step, Kind: kind,
					Title: "Refund?", Approvals: 2, Status: automation.WaitpointPending, Decisions: []automation.Decision{},
					Created: at, ExpiresAt: at.Add(time.Hour)}
			}
			change(w)
			return w.Decided(), nil
		})
		must(t, what, err)
	}
	type data struct {
		RunID, Step, Status, Decision, URL string
		Decisions                          []automation.Decision
	}
	events := func(what string, want ...string) []data {
		t.Helper()
		got := claimEvents(t, env, at)
		var types []string
		var ds []data
		for _, p := range got {
			types = append(types, p.Event.Type+">"+p.Subscription.ID)
			var payload struct {
				Type string
				Data data
			}
			if err := json.Unmarshal(p.Event.Payload, &payload); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, payload.Data)
		}
		slices.Sort(types)
		slices.Sort(want)
		if !slices.Equal(types, want) {
			t.Fatalf("%s: deliveries %v, want %v", what, types, want)
		}
		return ds
	}
	write("open", "ok", automation.WaitApproval, func(w *automation.Waitpoint) { w.TokenHash, w.Link = "hash-1", "https://engine.test/approvals/tok1" })
	got := events("an approval opened", alerts.EventApprovalRequested+">"+sub.ID)
	if d := got[0]; d.RunID != runID || d.Step != "ok" || d.Status != automation.WaitpointPending || d.URL != "https://engine.test/approvals/tok1" {
		t.Fatalf("approval.requested data = %+v", d)
	}
	if w, err := env.Waitpoints.Waitpoint(ctx, project, runID, "ok"); err != nil || w.Link != "" {
		t.Fatalf("stored waitpoint: link %q (%v), want none stored", w.Link, err)
	}
	write("same token", "ok", automation.WaitApproval, func(w *automation.Waitpoint) { w.Link = "https://engine.test/approvals/tok1" })
	events("a write that keeps the token")
	write("asked again", "ok", automation.WaitApproval, func(w *automation.Waitpoint) { w.TokenHash, w.Link = "hash-2", "https://engine.test/approvals/tok2" })
	if got := events("a new token", alerts.EventApprovalRequested+">"+sub.ID); got[0].URL != "https://engine.test/approvals/tok2" {
		t.Fatalf("asked again: url %q", got[0].URL)
	}
	write("first of two", "ok", automation.WaitApproval, func(w *automation.Waitpoint) {
		w.Decisions = append(w.Decisions, automation.Decision{By: "a@example.com", Via: automation.ViaAPI, Decision: automation.DecisionApproved, At: at})
	})
	events("an answer that does not decide")
	_, err := env.Waitpoints.UpdateWaitpoint(ctx, project, runID, "ok", func(w *automation.Waitpoint, found bool) (bool, error) {
		w.Status, w.Decision = automation.WaitpointDecided, automation.DecisionRejected
		return true, automation.Conflict("ALREADY_ANSWERED", "refused")
	})
	wantKind(t, "a refused change", err, automation.ErrConflict, "ALREADY_ANSWERED")
	events("a refused change")
	write("second of two", "ok", automation.WaitApproval, func(w *automation.Waitpoint) {
		w.Decisions = append(w.Decisions, automation.Decision{By: "link", Via: automation.ViaLink, Decision: automation.DecisionApproved, At: at})
		w.Status, w.Decision, w.TokenHash = automation.WaitpointDecided, automation.DecisionApproved, ""
	})
	got = events("the decision", alerts.EventApprovalDecided+">"+sub.ID, alerts.EventApprovalDecided+">"+decidedOnly.ID)
	if d := got[0]; d.Status != automation.WaitpointDecided || d.Decision != automation.DecisionApproved || len(d.Decisions) != 2 || d.URL != "" {
		t.Fatalf("approval.decided data = %+v", d)
	}
	write("callback opened", "job", automation.WaitCallback, func(w *automation.Waitpoint) { w.TokenHash, w.Link = "hash-3", "https://engine.test/x" })
	write("callback answered", "job", automation.WaitCallback, func(w *automation.Waitpoint) { w.Status, w.Decision = automation.WaitpointDecided, "called" })
	events("a WAIT for a callback")
}

// testSubscriptionQuota: the subscriptions quota holds in the create's
// own write: of 30 concurrent creates exactly alerts.MaxSubscriptions are
// stored, the others refused QUOTA_EXCEEDED; a delete makes room for one.
func testSubscriptionQuota(t *testing.T, env AlertsEnv) {
	ctx := context.Background()
	a := env.Alerts
	project := automation.NewID(automation.PrefixProject)
	const creates = alerts.MaxSubscriptions + 10
	errs := make([]error, creates)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range creates {
		wg.Go(func() {
			sub := newSubscription(project, alerts.EventRunFailed)
			<-start
			errs[i] = a.CreateSubscription(ctx, sub)
		})
	}
	close(start)
	wg.Wait()
	ok, refused := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, automation.ErrForbidden):
			wantKind(t, "a create past the quota", err, automation.ErrForbidden, "QUOTA_EXCEEDED")
			refused++
		default:
			t.Errorf("a concurrent create failed otherwise: %v", err)
		}
	}
	subs, err := a.Subscriptions(ctx, project)
	must(t, "list subscriptions", err)
	if ok != alerts.MaxSubscriptions || refused != creates-alerts.MaxSubscriptions || len(subs) != alerts.MaxSubscriptions {
		t.Fatalf("%d concurrent creates against %d: %d stored, %d refused, %d listed", creates, alerts.MaxSubscriptions, ok, refused, len(subs))
	}
	wantKind(t, "one more", a.CreateSubscription(ctx, newSubscription(project, alerts.EventPing)), automation.ErrForbidden, "QUOTA_EXCEEDED")
	must(t, "delete one", a.DeleteSubscription(ctx, project, subs[0].ID))
	must(t, "a create after a delete", a.CreateSubscription(ctx, newSubscription(project, alerts.EventPing)))
	wantKind(t, "one more again", a.CreateSubscription(ctx, newSubscription(project, alerts.EventPing)), automation.ErrForbidden, "QUOTA_EXCEEDED")
}

// testAlertsAudited: a subscription's create, enable, test (its ping) and
// delete, and a delivery's retry, write the request's audit entry in the
// change's own write; a write refused (a missing subscription) writes
// none.
func testAlertsAudited(t *testing.T, env AlertsEnv) {
	ctx := context.Background()
	base := now()
	p := newProject("audited-alerts", base)
	must(t, "create project", env.Store.CreateProject(ctx, p))
	a := env.Alerts
	entry := func(action, id string, i int) (context.Context, automation.AuditEntry) {
		e := newAuditEntry(p.ID, action, base.Add(time.Duration(i)*time.Second))
		e.Resource = automation.AuditResource{Type: "subscription", ID: id}
		return automation.WithAudit(ctx, e), e
	}
	sub := newSubscription(p.ID, alerts.EventRunFailed)
	cctx, create := entry("subscription.create", sub.ID, 0)
	must(t, "create subscription", a.CreateSubscription(cctx, sub))
	sub.Status = alerts.StatusActive
	ectx, enable := entry("subscription.enable", sub.ID, 1)
	must(t, "enable subscription", a.UpdateSubscription(ectx, sub))
	e, err := alerts.NewEvent(p.ID, alerts.EventPing, "", map[string]string{"subscriptionId": sub.ID}, base)
	must(t, "new event", err)
	d := alerts.NewDelivery(e, sub.ID)
	tctx, test := entry("subscription.test", sub.ID, 2)
	must(t, "test subscription", a.AddEvent(tctx, e, []alerts.Delivery{d}))
	failed := d
	failed.Status, failed.NextAttemptAt = alerts.DeliveryFailed, nil
	must(t, "record a failure", a.RecordAttempt(ctx, failed))
	retried := d
	at := base.Add(time.Minute)
	retried.NextAttemptAt, retried.Updated = &at, at
	rctx, retry := entry("delivery.retry", sub.ID, 3)
	must(t, "retry delivery", a.RecordAttempt(rctx, retried))
	ghost := newSubscription(p.ID, alerts.EventPing)
	gctx, _ := entry("subscription.enable", ghost.ID, 4)
	wantKind(t, "enable a missing subscription", a.UpdateSubscription(gctx, ghost), automation.ErrNotFound, "SUBSCRIPTION_NOT_FOUND")
	dctx, del := entry("subscription.delete", sub.ID, 5)
	must(t, "delete subscription", a.DeleteSubscription(dctx, p.ID, sub.ID))
	gdctx, _ := entry("subscription.delete", sub.ID, 6)
	wantKind(t, "delete it again", a.DeleteSubscription(gdctx, p.ID, sub.ID), automation.ErrNotFound, "SUBSCRIPTION_NOT_FOUND")

	got := auditLog(t, env.Store, p.ID, automation.AuditQuery{Limit: 20})
	wantSame(t, "entries of the subscription changes", got, []automation.AuditEntry{del, retry, test, enable, create})
}

// testFlowAndConnectionEvents: creating, enabling, disabling, changing the
// definition of and deleting a flow, and a connection's status change,
// each write the event their Outbox decides with the change, stamped with
// its clock, to the subscriptions that want it alone; a metadata-only
// edit, a status set to itself and a refused write write none.
func testFlowAndConnectionEvents(t *testing.T, env AlertsEnv) {
	ctx := context.Background()
	at := fixedClock()
	env.Alerts.UseOutbox(alerts.NewOutbox(func() time.Time { return at }))
	p := newProject("events", now())
	must(t, "create project", env.Store.CreateProject(ctx, p))
	sub := newSubscription(p.ID, alerts.EventFlowPublished, alerts.EventFlowEnabled, alerts.EventFlowDisabled,
		alerts.EventFlowDeleted, alerts.EventConnectionStateChanged)
	must(t, "create subscription", env.Alerts.CreateSubscription(ctx, sub))
	otherFlow := "flw_other"
	elsewhere := newSubscription(p.ID, alerts.EventFlowPublished, alerts.EventFlowEnabled, alerts.EventFlowDisabled, alerts.EventFlowDeleted)
	elsewhere.FlowID = &otherFlow
	disabled := newSubscription(p.ID, alerts.EventFlowPublished, alerts.EventFlowDeleted, alerts.EventConnectionStateChanged)
	disabled.Status = alerts.StatusDisabled
	runsOnly := newSubscription(p.ID, alerts.EventRunFailed)
	for _, s := range []alerts.Subscription{elsewhere, disabled, runsOnly} {
		must(t, "create subscription", env.Alerts.CreateSubscription(ctx, s))
	}
	events := func(what string, want ...string) []alerts.Pending {
		t.Helper()
		got := claimEvents(t, env, at)
		var types []string
		for _, d := range got {
			types = append(types, d.Event.Type)
			if d.Subscription.ID != sub.ID {
				t.Fatalf("after %s: %s reached subscription %s, which does not want it", what, d.Event.Type, d.Subscription.ID)
			}
		}
		if diff := cmp.Diff(want, types); diff != "" {
			t.Fatalf("events after %s (-want +got):\n%s", what, diff)
		}
		return got
	}
	f := flowBuilderWebhook(p.ID, "hook", now())
	must(t, "create flow", env.Store.CreateFlow(ctx, f))
	events("create", alerts.EventFlowPublished)
	put := func(change func(*automation.Flow)) {
		t.Helper()
		cur, err := env.Store.Flow(ctx, p.ID, f.ID)
		must(t, "get flow", err)
		change(&cur)
		cur.Version++
		must(t, "put flow", env.Store.PutFlow(ctx, cur))
	}
	put(func(f *automation.Flow) { f.Status = automation.FlowActive })
	events("enable", alerts.EventFlowEnabled)
	put(func(f *automation.Flow) { f.Name = "renamed" })
	events("a rename")
	put(func(f *automation.Flow) {
		f.Steps = append(f.Steps, automation.Step{Name: "extra", Type: automation.StepSet, Set: json.RawMessage(`{"a":1}`)})
	})
	events("a definition change", alerts.EventFlowPublished)
	// A write refused (an old version) writes no event.
	cur, err := env.Store.Flow(ctx, p.ID, f.ID)
	must(t, "get flow", err)
	stale := cur
	stale.Status = automation.FlowInactive // would be flow.disabled
	wantKind(t, "put an old version", env.Store.PutFlow(ctx, stale), automation.ErrConflict, "FLOW_MODIFIED")
	events("a refused put")
	put(func(f *automation.Flow) { f.Status = automation.FlowInactive })
	events("disable", alerts.EventFlowDisabled)
	must(t, "delete flow", env.Store.DeleteFlow(ctx, p.ID, f.ID))
	events("delete", alerts.EventFlowDeleted)
	wantKind(t, "delete it again", env.Store.DeleteFlow(ctx, p.ID, f.ID), automation.ErrNotFound, "FLOW_NOT_FOUND")
	events("a refused delete")

	c := newConnection(p.ID, "gh", now())
	must(t, "create connection", env.Store.CreateConnection(ctx, c))
	must(t, "set status", env.Store.SetConnectionStatus(ctx, p.ID, c.ID, automation.ConnectionError, now()))
	got := events("a status change", alerts.EventConnectionStateChanged)
	if !strings.Contains(string(got[0].Event.Payload), `"from":"ACTIVE","to":"ERROR"`) {
		t.Fatalf("after a status change: %s", got[0].Event.Payload)
	}
	must(t, "same status", env.Store.SetConnectionStatus(ctx, p.ID, c.ID, automation.ConnectionError, now()))
	events("a status set to itself")
	ghost := newConnection(p.ID, "ghost", now())
	wantKind(t, "set the status of a missing connection", env.Store.SetConnectionStatus(ctx, p.ID, ghost.ID, automation.ConnectionActive, now()),
		automation.ErrNotFound, "CONNECTION_NOT_FOUND")
	events("a refused status change")
}

func newSubscription(project string, events ...string) alerts.Subscription {
	return alerts.Subscription{
		ID: automation.NewID(alerts.PrefixSubscription), Project: project, URL: "https://hooks.example.com/in",
		Events: events, Status: alerts.StatusActive, Secret: alerts.NewSecret(), Created: now(),
	}
}

func testSubscriptions(t *testing.T, env AlertsEnv) {
	ctx := context.Background()
	a := env.Alerts
	s1 := newSubscription("prj_a", alerts.EventRunFailed)
	flow := "flw_x"
	s1.FlowID, s1.Description = &flow, "on call"
	s2 := newSubscription("prj_a", alerts.EventRunSucceeded, alerts.EventFlowDeleted)
	s2.Created = s1.Created.Add(time.Millisecond) // lists are in creation order
	other := newSubscription("prj_b", alerts.EventRunFailed)
	for _, s := range []alerts.Subscription{s1, s2, other} {
		must(t, "create subscription", a.CreateSubscription(ctx, s))
	}
	got, err := a.Subscription(ctx, "prj_a", s1.ID)
	must(t, "get subscription", err)
	if diff := cmp.Diff(s1, got); diff != "" {
		t.Errorf("subscription read back (-want +got):\n%s", diff)
	}
	_, err = a.Subscription(ctx, "prj_b", s1.ID)
	wantKind(t, "another project's subscription", err, automation.ErrNotFound, "SUBSCRIPTION_NOT_FOUND")
	list, err := a.Subscriptions(ctx, "prj_a")
	must(t, "list subscriptions", err)
	if diff := cmp.Diff([]alerts.Subscription{s1, s2}, list); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	since := now().Add(time.Hour)
	s2.Status, s2.FailingSince = alerts.StatusDisabled, &since
	must(t, "update subscription", a.UpdateSubscription(ctx, s2))
	got, err = a.Subscription(ctx, "prj_a", s2.ID)
	must(t, "get updated", err)
	if diff := cmp.Diff(s2, got); diff != "" {
		t.Errorf("updated subscription (-want +got):\n%s", diff)
	}
	ghost := newSubscription("prj_a", alerts.EventPing)
	wantKind(t, "update a missing subscription", a.UpdateSubscription(ctx, ghost), automation.ErrNotFound, "SUBSCRIPTION_NOT_FOUND")
	wantKind(t, "delete from another project", a.DeleteSubscription(ctx, "prj_b", s1.ID), automation.ErrNotFound, "SUBSCRIPTION_NOT_FOUND")
	must(t, "delete subscription", a.DeleteSubscription(ctx, "prj_a", s1.ID))
	_, err = a.Subscription(ctx, "prj_a", s1.ID)
	wantKind(t, "deleted subscription", err, automation.ErrNotFound, "SUBSCRIPTION_NOT_FOUND")
	wantKind(t, "delete twice", a.DeleteSubscription(ctx, "prj_a", s1.ID), automation.ErrNotFound, "SUBSCRIPTION_NOT_FOUND")
}

func testDeliveries(t *testing.T, env AlertsEnv) {
	ctx := context.Background()
	a := env.Alerts
	s1, s2 := newSubscription("prj_a", alerts.EventPing), newSubscription("prj_a", alerts.EventPing)
	must(t, "create", a.CreateSubscription(ctx, s1))
	must(t, "create", a.CreateSubscription(ctx, s2))
	e, err := alerts.NewEvent("prj_a", alerts.EventPing, "", map[string]string{"hello": "world"}, now())
	must(t, "new event", err)
	d1, d2 := alerts.NewDelivery(e, s1.ID), alerts.NewDelivery(e, s2.ID)
	must(t, "add event", a.AddEvent(ctx, e, []alerts.Delivery{d1, d2}))

	t0 := now().Add(time.Second)
	claimed, err := a.ClaimDeliveries(ctx, t0, time.Minute, 10, nil)
	must(t, "claim", err)
	if len(claimed) != 2 {
		t.Fatalf("claimed %d deliveries, want 2", len(claimed))
	}
	for _, p := range claimed {
		sub := s1
		if p.Delivery.SubscriptionID == s2.ID {
			sub = s2
		}
		if p.Event.ID != e.ID || string(p.Event.Payload) != string(e.Payload) || p.Subscription.Secret != sub.Secret ||
			p.Subscription.URL != sub.URL || p.Delivery.Status != alerts.DeliveryPending || p.Delivery.Project != "prj_a" {
			t.Errorf("claimed %+v, want event %s with subscription %s", p, e.ID, sub.ID)
		}
	}
	again, err := a.ClaimDeliveries(ctx, t0.Add(30*time.Second), time.Minute, 10, nil)
	must(t, "claim within the lease", err)
	if len(again) != 0 {
		t.Fatalf("claimed %d deliveries within the lease, want 0", len(again))
	}
	// The lease of a sender that died runs out: the delivery is claimed again.
	again, err = a.ClaimDeliveries(ctx, t0.Add(61*time.Second), time.Minute, 1, nil)
	must(t, "claim after the lease", err)
	if len(again) != 1 {
		t.Fatalf("claimed %d deliveries after the lease (max 1), want 1", len(again))
	}
	// An attempt that failed: due again later, not before.
	t1 := t0.Add(62 * time.Second)
	d := alerts.Next(again[0].Delivery, alerts.Attempt{At: t1, StatusCode: 503}, t1)
	must(t, "record attempt", a.RecordAttempt(ctx, d))
	got, err := a.Delivery(ctx, "prj_a", d.SubscriptionID, d.ID)
	must(t, "get delivery", err)
	d.Claim = "" // the claim is the sender's, not the record's
	if diff := cmp.Diff(d, got); diff != "" {
		t.Errorf("delivery read back (-want +got):\n%s", diff)
	}
	early, err := a.ClaimDeliveries(ctx, t1.Add(4*time.Second), time.Minute, 10, nil)
	must(t, "claim before the retry is due", err)
	for _, p := range early {
		if p.Delivery.ID == d.ID {
			t.Fatalf("delivery %s claimed before its next attempt", d.ID)
		}
	}
	due, err := a.ClaimDeliveries(ctx, t1.Add(5*time.Second), time.Minute, 10, nil)
	must(t, "claim the retry", err)
	if len(due) != 1 || due[0].Delivery.ID != d.ID || due[0].Delivery.Attempts != 1 {
		t.Fatalf("claimed %+v at the retry, want %s after 1 attempt", due, d.ID)
	}
	// A retry asked for while the attempt is in flight wins over its result.
	retry := got
	retry.NextAttemptAt = &t1
	must(t, "retry while in flight", a.RecordAttempt(ctx, retry))
	stale := alerts.Next(due[0].Delivery, alerts.Attempt{At: t1, StatusCode: 204}, t1.Add(5*time.Second))
	must(t, "record the in-flight attempt", a.RecordAttempt(ctx, stale))
	if after, err := a.Delivery(ctx, "prj_a", d.SubscriptionID, d.ID); err != nil || after.Status != alerts.DeliveryPending || after.Attempts != 1 {
		t.Fatalf("after a retry during an attempt: %+v, %v; want it PENDING, the attempt's result dropped", after, err)
	}
	due, err = a.ClaimDeliveries(ctx, t1.Add(6*time.Second), time.Minute, 10, nil)
	must(t, "claim the retry", err)
	if len(due) != 1 || due[0].Delivery.ID != d.ID {
		t.Fatalf("claimed %+v after the retry, want %s", due, d.ID)
	}
	ok := alerts.Next(due[0].Delivery, alerts.Attempt{At: t1, StatusCode: 204}, t1.Add(6*time.Second))
	must(t, "record success", a.RecordAttempt(ctx, ok))
	list, err := a.Deliveries(ctx, "prj_a", d.SubscriptionID, 10)
	must(t, "list deliveries", err)
	if len(list) != 1 || list[0].Status != alerts.DeliverySucceeded || list[0].Attempts != 2 || *list[0].LastStatusCode != 204 {
		t.Fatalf("deliveries = %+v, want one SUCCEEDED after 2 attempts", list)
	}
	_, err = a.Delivery(ctx, "prj_b", d.SubscriptionID, d.ID)
	wantKind(t, "another project's delivery", err, automation.ErrNotFound, "DELIVERY_NOT_FOUND")
	// Deleting a subscription takes its pending deliveries with it.
	must(t, "delete subscription", a.DeleteSubscription(ctx, "prj_a", d.SubscriptionID))
	_, err = a.Delivery(ctx, "prj_a", d.SubscriptionID, d.ID)
	wantKind(t, "deleted subscription's delivery", err, automation.ErrNotFound, "DELIVERY_NOT_FOUND")
}

// fixedClock is the Service's clock of the events tests: an hour before
// the test runs, so that an event stamped with the wall clock (the store's
// own time) shows, and its deliveries are due when claimed at now.
func fixedClock() time.Time { return now().Add(-time.Hour) }

// claimEvents claims every due delivery, and checks that each one carries
// an event stamped with at, as its payload's timestamp and its times.
func claimEvents(t *testing.T, env AlertsEnv, at time.Time) []alerts.Pending {
	t.Helper()
	got, err := env.Alerts.ClaimDeliveries(context.Background(), now().Add(time.Minute), time.Minute, 100, nil)
	must(t, "claim deliveries", err)
	for _, p := range got {
		var payload struct{ Timestamp time.Time }
		if err := json.Unmarshal(p.Event.Payload, &payload); err != nil {
			t.Fatalf("payload of %s: %v", p.Event.Type, err)
		}
		d := p.Delivery
		if !payload.Timestamp.Equal(at) || !d.Created.Equal(at) || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(at) {
			t.Fatalf("%s event stamped %v (delivery created %v, due %v), want the Service's clock %v",
				p.Event.Type, payload.Timestamp, d.Created, d.NextAttemptAt, at)
		}
	}
	return got
}

// subscriptionIDs are the subscriptions of deliveries, sorted.
func subscriptionIDs(ps []alerts.Pending) []string {
	var ids []string
	for _, p := range ps {
		ids = append(ids, p.Subscription.ID)
	}
	slices.Sort(ids)
	return ids
}

func sortedIDs(subs ...alerts.Subscription) []string {
	var ids []string
	for _, s := range subs {
		ids = append(ids, s.ID)
	}
	slices.Sort(ids)
	return ids
}

// testRunFinishWritesEvent: a run's finish writes the event its Outbox
// decides with the finish, stamped with the Outbox's clock (the
// Service's), and one delivery to each subscription that wants it and no
// other: not another event type's, another flow's, a disabled one's or
// another project's. Without an Outbox, and for a finish that is refused,
// the store writes none.
func testRunFinishWritesEvent(t *testing.T, env AlertsEnv) {
	ctx := context.Background()
	f := runFixture(t, env.RunEnv)
	finish := func(status automation.RunStatus) automation.Run {
		t.Helper()
		r := newRun(f, now())
		must(t, "create run", env.Create(ctx, r))
		c, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, now(), time.Minute)
		must(t, "claim run", err)
		fin := finishedRun(f, r.Created, status)
		fin.ID, fin.LeaseToken = c.ID, c.LeaseToken
		if status != automation.RunSucceeded {
			fin.Steps[0].Status = automation.StepFailed
			fin.Steps[0].Error = "boom"
		}
		must(t, "finish run", env.Runs.FinishRun(ctx, fin))
		return fin
	}
	at := fixedClock()
	claimAll := func() []alerts.Pending { t.Helper(); return claimEvents(t, env, at) }

	failures := newSubscription(f.Project, alerts.EventRunFailed, alerts.EventRunTimeout)
	must(t, "create subscription", env.Alerts.CreateSubscription(ctx, failures))
	finish(automation.RunFailed)
	if got := claimAll(); len(got) != 0 {
		t.Fatalf("a store without an Outbox decided an event itself: %d deliveries", len(got))
	}
	env.Alerts.UseOutbox(alerts.NewOutbox(func() time.Time { return at }))

	thisFlow := newSubscription(f.Project, alerts.EventRunFailed)
	thisFlow.FlowID = &f.ID
	otherFlow := "flw_other"
	elsewhere := newSubscription(f.Project, alerts.EventRunFailed)
	elsewhere.FlowID = &otherFlow
	successes := newSubscription(f.Project, alerts.EventRunSucceeded)
	disabled := newSubscription(f.Project, alerts.EventRunFailed)
	disabled.Status = alerts.StatusDisabled
	otherProject := newSubscription(automation.NewID(automation.PrefixProject), alerts.EventRunFailed)
	for _, sub := range []alerts.Subscription{thisFlow, elsewhere, successes, disabled, otherProject} {
		must(t, "create subscription", env.Alerts.CreateSubscription(ctx, sub))
	}
	finish(automation.RunSucceeded)
	if got := claimAll(); !slices.Equal(subscriptionIDs(got), sortedIDs(successes)) {
		t.Fatalf("a SUCCEEDED run reached %v, want only %s", subscriptionIDs(got), successes.ID)
	}
	failed := finish(automation.RunFailed)
	got := claimAll()
	if ids := subscriptionIDs(got); !slices.Equal(ids, sortedIDs(failures, thisFlow)) {
		t.Fatalf("a FAILED run reached %v, want %v (the subscriptions that want it)", ids, sortedIDs(failures, thisFlow))
	}
	if got[0].Event.ID != got[1].Event.ID || got[0].Event.Type != alerts.EventRunFailed {
		t.Fatalf("deliveries of one finish: events %s and %s (%s), want one run.failed", got[0].Event.ID, got[1].Event.ID, got[0].Event.Type)
	}
	var payload struct {
		Type string
		Data struct {
			ID, FlowID, FlowName, Status string
			Error                        struct {
				Step    *string
				Message string
			}
		}
	}
	if err := json.Unmarshal(got[0].Event.Payload, &payload); err != nil {
		t.Fatal(err)
	}
	if payload.Type != alerts.EventRunFailed || payload.Data.ID != failed.ID ||
		payload.Data.FlowID != f.ID || payload.Data.FlowName != f.Name || payload.Data.Status != "FAILED" ||
		payload.Data.Error.Step == nil || *payload.Data.Error.Step != "shape" || payload.Data.Error.Message != failed.Error {
		t.Fatalf("payload = %s", got[0].Event.Payload)
	}

	// A refused finish writes no event: not by a stale attempt, not again
	// for a run that is final.
	r := newRun(f, now())
	must(t, "create run", env.Create(ctx, r))
	c, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, now(), time.Minute)
	must(t, "claim run", err)
	stale := finishedRun(f, r.Created, automation.RunFailed)
	stale.ID, stale.LeaseToken = c.ID, "not-the-claim"
	wantKind(t, "finish by a stale attempt", env.Runs.FinishRun(ctx, stale), automation.ErrConflict, automation.CodeRunLeaseLost)
	if got := claimAll(); len(got) != 0 {
		t.Fatalf("a refused finish wrote %d deliveries", len(got))
	}
	stale.LeaseToken = c.LeaseToken
	must(t, "finish run", env.Runs.FinishRun(ctx, stale))
	if got := claimAll(); len(got) != 2 {
		t.Fatalf("the finish wrote %d deliveries, want 2", len(got))
	}
	wantKind(t, "finish again", env.Runs.FinishRun(ctx, stale), automation.ErrConflict, automation.CodeRunFinished)
	if got := claimAll(); len(got) != 0 {
		t.Fatalf("a finish of a final run wrote %d more deliveries", len(got))
	}

	if env.InsertFinished != nil {
		// The one-commit path writes its event likewise, and none when
		// refused (the run exists already).
		fin := finishedRun(f, now(), automation.RunTimeout)
		must(t, "insert finished run", env.InsertFinished(ctx, fin))
		if ids := subscriptionIDs(claimAll()); !slices.Equal(ids, sortedIDs(failures)) {
			t.Fatalf("a TIMEOUT run inserted final reached %v, want only %s", ids, failures.ID)
		}
		wantKind(t, "insert it again", env.InsertFinished(ctx, fin), automation.ErrConflict, "RUN_EXISTS")
		if got := claimAll(); len(got) != 0 {
			t.Fatalf("a refused insert wrote %d deliveries", len(got))
		}
	}

	must(t, "delete subscription", env.Alerts.DeleteSubscription(ctx, f.Project, failures.ID))
	must(t, "delete subscription", env.Alerts.DeleteSubscription(ctx, f.Project, thisFlow.ID))
	finish(automation.RunFailed)
	if got := claimAll(); len(got) != 0 {
		t.Fatalf("deleted subscriptions still got %d deliveries", len(got))
	}
}
