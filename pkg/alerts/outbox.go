package alerts

import (
	"slices"
	"time"

	"flowservice/pkg/automation"
)

// Outbox decides the events of the changes a store makes on its own (a
// run's finish, a flow's create, update or delete, a connection's status
// change, an approval's request or decision), which the store writes in that change's atomic write, a
// transactional outbox: whether the change is an event and which, its
// payload, its time (the Service's clock) and which of the project's
// subscriptions get a delivery of it. A store reads only what the Outbox
// asks for (the project's subscriptions, the state the change replaces)
// and persists what it is handed, so that no store holds a rule of its
// own and a new store copies none. NewService hands one to its Store
// (Store.UseOutbox); automation's ports.go says which writes carry it.
type Outbox struct{ clock func() time.Time }

// NewOutbox returns an Outbox that stamps events with clock.
func NewOutbox(clock func() time.Time) *Outbox {
	if clock == nil {
		clock = time.Now
	}
	return &Outbox{clock: clock}
}

// Outgoing is an event and its deliveries, for a store to write in the
// write of the change that caused it. Without deliveries it is nothing to
// write (no subscription wants the change, or it is no event).
type Outgoing struct {
	Event      Event
	Deliveries []Delivery
}

// None reports whether there is nothing to write.
func (o Outgoing) None() bool { return len(o.Deliveries) == 0 }

// flowEvents are the event types a flow write may be.
var flowEvents = []string{EventFlowPublished, EventFlowEnabled, EventFlowDisabled, EventFlowDeleted}

// wantsAny reports whether a subscription of subs, of project, wants an
// event of one of types about flowID: when none does, the Outbox decides
// nothing and asks the store to read nothing.
func wantsAny(subs []Subscription, project, flowID string, types ...string) bool {
	for _, s := range subs {
		if s.Project != project {
			continue
		}
		for _, typ := range types {
			if s.Wants(typ, flowID) {
				return true
			}
		}
	}
	return false
}

func (o *Outbox) out(e Event, subs []Subscription) Outgoing {
	return Outgoing{Event: e, Deliveries: Fanout(e, subs)}
}

// RunFinished is the event of r's finish (r final) for subs, the project's
// subscriptions as the store has them. flowName reads the name of r's
// flow, in the finish's write; it is called only when a subscription
// wants the event, so that a finish nobody subscribed to reads nothing.
func (o *Outbox) RunFinished(r automation.Run, subs []Subscription, flowName func() (string, error)) (Outgoing, error) {
	typ := RunEventType(r.Status)
	if o == nil || typ == "" || !wantsAny(subs, r.Project, r.FlowID, typ) {
		return Outgoing{}, nil
	}
	name, err := flowName()
	if err != nil {
		return Outgoing{}, err
	}
	e, err := NewRunEvent(r, name, o.clock())
	if err != nil {
		return Outgoing{}, err
	}
	return o.out(e, subs), nil
}

// FlowChanged is the event of a write of the project's flow id (next: the
// flow it writes, nil for a delete) for subs. before reads the flow as the
// write finds it (nil: there is none), in the write; it is called only
// when a subscription wants a flow event of this flow. A delete that
// finds no flow is no event: the write answers not found.
func (o *Outbox) FlowChanged(project, id string, next *automation.Flow, subs []Subscription, before func() (*automation.Flow, error)) (Outgoing, error) {
	if o == nil || !wantsAny(subs, project, id, flowEvents...) {
		return Outgoing{}, nil
	}
	old, err := before()
	if err != nil || (old == nil && next == nil) {
		return Outgoing{}, err
	}
	e, ok, err := NewFlowEvent(old, next, o.clock())
	if err != nil || !ok {
		return Outgoing{}, err
	}
	return o.out(e, subs), nil
}

// ConnectionChanged is the event of the project's connection moving to
// status to, for subs. before reads the connection as the write finds it,
// in the write (ok false: there is none, and the write answers not
// found); it is called only when a subscription wants the event. A status
// set to itself is no event.
func (o *Outbox) ConnectionChanged(project string, to automation.ConnectionStatus, subs []Subscription, before func() (c automation.Connection, ok bool, err error)) (Outgoing, error) {
	if o == nil || !wantsAny(subs, project, "", EventConnectionStateChanged) {
		return Outgoing{}, nil
	}
	c, found, err := before()
	if err != nil || !found {
		return Outgoing{}, err
	}
	e, ok, err := NewConnectionEvent(c, to, o.clock())
	if err != nil || !ok {
		return Outgoing{}, err
	}
	return o.out(e, subs), nil
}

// WaitpointChanged is the event of a write of an APPROVAL's waitpoint
// (automation.WaitpointStore.UpdateWaitpoint), for subs: before is the
// waitpoint as the write found it (nil: there was none), after as it
// writes it. A waitpoint that waits with a token it did not have before
// (opened, or asked again by a new attempt, whose link replaces the
// earlier ones) is approval.requested, with after.Link as the item's
// url; one that was pending and is decided (an answer, the timeout) is
// approval.decided. An answer that is not yet the decision (approvals
// above 1), and a WAIT for a callback, are no event.
func (o *Outbox) WaitpointChanged(before *automation.Waitpoint, after automation.Waitpoint, subs []Subscription) (Outgoing, error) {
	if o == nil || after.Kind != automation.WaitApproval {
		return Outgoing{}, nil
	}
	var typ string
	switch {
	case after.Decided() && before != nil && !before.Decided():
		typ = EventApprovalDecided
	case !after.Decided() && after.TokenHash != "" && after.Link != "" && (before == nil || before.TokenHash != after.TokenHash):
		typ = EventApprovalRequested
	default:
		return Outgoing{}, nil
	}
	if !wantsAny(subs, after.Project, after.FlowID, typ) {
		return Outgoing{}, nil
	}
	item := after.Item()
	if typ == EventApprovalRequested {
		item.URL = after.Link
	}
	now := o.clock()
	e, err := NewEvent(after.Project, typ, after.FlowID, item, now)
	if err == nil && len(e.Payload) > MaxApprovalEventBytes {
		// Each delivery carries the payload, and on DynamoDB all of them
		// commit in the waitpoint's own transaction (4 MB): the answers'
		// values, the only unbounded part, are left out, saying so.
		item.Decisions = slices.Clone(item.Decisions)
		for i := range item.Decisions {
			item.Decisions[i].Values = nil
		}
		item.ValuesOmitted = true
		e, err = NewEvent(after.Project, typ, after.FlowID, item, now)
	}
	if err != nil {
		return Outgoing{}, err
	}
	return o.out(e, subs), nil
}

// MaxApprovalEventBytes bounds an approval event's payload: past it the
// decisions' values are left out (valuesOmitted). The rest of the item is
// bounded by the flow language (a title of 500 bytes, a form of 16 KiB,
// at most 10 deciders), so that MaxSubscriptions deliveries of one event
// and the waitpoint's own document stay within one DynamoDB transaction.
const MaxApprovalEventBytes = 64 << 10
