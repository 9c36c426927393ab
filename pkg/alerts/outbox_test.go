package alerts_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
)

func sub(project string, status string, flowID *string, events ...string) alerts.Subscription {
	return alerts.Subscription{ID: automation.NewID(alerts.PrefixSubscription), Project: project, Events: events,
		FlowID: flowID, Status: status}
}

// TestOutboxDecides: the Outbox, not the store, decides a change's event:
// stamped with its clock, delivered to the subscriptions that want it and
// no other, and it asks the store to read nothing when none does.
func TestOutboxDecides(t *testing.T) {
	at := time.Date(2026, 11, 26, 9, 0, 0, 123_000_000, time.UTC)
	o := alerts.NewOutbox(func() time.Time { return at })
	flow, other := "flw_1", "flw_2"
	run := automation.Run{ID: "run_1", Project: "prj_a", FlowID: flow, Status: automation.RunFailed, Error: "boom"}
	failures := sub("prj_a", alerts.StatusActive, nil, alerts.EventRunFailed)
	scoped := sub("prj_a", alerts.StatusActive, &flow, alerts.EventRunFailed)
	subs := []alerts.Subscription{
		failures, scoped,
		sub("prj_a", alerts.StatusActive, &other, alerts.EventRunFailed),  // another flow's
		sub("prj_a", alerts.StatusDisabled, nil, alerts.EventRunFailed),   // disabled
		sub("prj_b", alerts.StatusActive, nil, alerts.EventRunFailed),     // another project's
		sub("prj_a", alerts.StatusActive, nil, alerts.EventRunSucceeded),  // another type
		sub("prj_a", alerts.StatusActive, nil, alerts.EventFlowPublished), // another kind
	}
	reads := 0
	name := func() (string, error) { reads++; return "charge", nil }

	out, err := o.RunFinished(run, subs, name)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range out.Deliveries {
		got = append(got, d.SubscriptionID)
		if d.EventID != out.Event.ID || !d.Created.Equal(at) || !d.NextAttemptAt.Equal(at) {
			t.Errorf("delivery %+v of event %s, want it due at the clock's %v", d, out.Event.ID, at)
		}
	}
	if want := []string{failures.ID, scoped.ID}; !slices.Equal(got, want) {
		t.Fatalf("delivered to %v, want %v", got, want)
	}
	if !out.Event.Created.Equal(at) || !strings.Contains(string(out.Event.Payload), `"timestamp":"2026-11-26T09:00:00.123Z"`) ||
		!strings.Contains(string(out.Event.Payload), `"flowName":"charge"`) || reads != 1 {
		t.Fatalf("event %s at %v after %d name reads, want it stamped %v with the flow's name read once", out.Event.Payload, out.Event.Created, reads, at)
	}

	// Nobody wants it: nothing, and nothing read.
	reads = 0
	for _, none := range [][]alerts.Subscription{nil, subs[2:]} {
		if out, err := o.RunFinished(run, none, name); err != nil || !out.None() || reads != 0 {
			t.Fatalf("unwanted run event: %+v, %v, %d reads; want none and no read", out, err, reads)
		}
	}
	var nilOutbox *alerts.Outbox
	if out, err := nilOutbox.RunFinished(run, subs, name); err != nil || !out.None() || reads != 0 {
		t.Fatalf("no Outbox: %+v, %v, %d reads; want nothing", out, err, reads)
	}
	// A read that fails fails the change.
	boom := errors.New("boom")
	if _, err := o.RunFinished(run, subs, func() (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Fatalf("failed read: err = %v, want it returned", err)
	}

	// Flows: a rename is no event; a delete of nothing is none.
	published := sub("prj_a", alerts.StatusActive, nil, alerts.EventFlowPublished, alerts.EventFlowDeleted)
	f := automation.Flow{ID: flow, Project: "prj_a", Name: "charge", Status: automation.FlowActive}
	renamed := f
	renamed.Name = "charged"
	if out, err := o.FlowChanged("prj_a", flow, &renamed, []alerts.Subscription{published}, func() (*automation.Flow, error) { return &f, nil }); err != nil || !out.None() {
		t.Fatalf("rename: %+v, %v; want no event", out, err)
	}
	if out, err := o.FlowChanged("prj_a", flow, nil, []alerts.Subscription{published}, func() (*automation.Flow, error) { return nil, nil }); err != nil || !out.None() {
		t.Fatalf("delete of a missing flow: %+v, %v; want no event", out, err)
	}
	out, err = o.FlowChanged("prj_a", flow, nil, []alerts.Subscription{published}, func() (*automation.Flow, error) { return &f, nil })
	if err != nil || out.Event.Type != alerts.EventFlowDeleted || len(out.Deliveries) != 1 || !out.Event.Created.Equal(at) {
		t.Fatalf("delete: %+v, %v; want flow.deleted at %v", out, err, at)
	}

	// Connections: a status set to itself is none; a change is one.
	conn := sub("prj_a", alerts.StatusActive, nil, alerts.EventConnectionStateChanged)
	c := automation.Connection{ID: "con_1", Project: "prj_a", Name: "gh", Status: automation.ConnectionActive}
	before := func() (automation.Connection, bool, error) { return c, true, nil }
	if out, err := o.ConnectionChanged("prj_a", automation.ConnectionActive, []alerts.Subscription{conn}, before); err != nil || !out.None() {
		t.Fatalf("same status: %+v, %v; want no event", out, err)
	}
	out, err = o.ConnectionChanged("prj_a", automation.ConnectionError, []alerts.Subscription{conn}, before)
	if err != nil || len(out.Deliveries) != 1 || !strings.Contains(string(out.Event.Payload), `"from":"ACTIVE","to":"ERROR"`) {
		t.Fatalf("status change: %+v, %v", out, err)
	}
}
