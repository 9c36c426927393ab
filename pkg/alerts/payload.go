package alerts

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

// envelope is the body of every delivery.
type envelope struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      any       `json:"data"`
}

// RunSummary is the data of a run event: the run without its trigger and
// step outputs (which may be large and hold personal data), with the
// flow's name and the error's step.
type RunSummary struct {
	ID         string     `json:"id"`
	FlowID     string     `json:"flowId"`
	FlowName   string     `json:"flowName"`
	Status     string     `json:"status"`
	Error      *RunError  `json:"error"`
	Created    time.Time  `json:"created"`
	Started    *time.Time `json:"started"`
	Finished   *time.Time `json:"finished"`
	DurationMs *int64     `json:"durationMs"`
	Attempts   int        `json:"attempts"`
}

// RunError says where and why a run failed.
type RunError struct {
	Step    *string `json:"step"`
	Message string  `json:"message"`
}

// RunEventType is the event of a run that ended with status, or "" for a
// status that is not final.
func RunEventType(status automation.RunStatus) string {
	switch status {
	case automation.RunSucceeded:
		return EventRunSucceeded
	case automation.RunFailed:
		return EventRunFailed
	case automation.RunTimeout:
		return EventRunTimeout
	}
	return ""
}

// NewRunEvent is the event of a finished run.
func NewRunEvent(r automation.Run, flowName string, now time.Time) (Event, error) {
	typ := RunEventType(r.Status)
	if typ == "" {
		return Event{}, fmt.Errorf("alerts: run %s is %s, not finished", r.ID, r.Status)
	}
	sum := RunSummary{
		ID: r.ID, FlowID: r.FlowID, FlowName: flowName, Status: string(r.Status),
		Created: r.Created, Started: r.Started, Finished: r.Finished, DurationMs: r.DurationMs,
		Attempts: r.Attempts,
	}
	if r.Status != automation.RunSucceeded {
		sum.Error = &RunError{Message: r.Error, Step: failedStep(r.Steps)}
		if sum.Error.Message == "" {
			sum.Error.Message = "run ended " + string(r.Status)
		}
	}
	return NewEvent(r.Project, typ, r.FlowID, sum, now)
}

// failedStep names the last step that did not succeed, if any.
func failedStep(steps []automation.StepResult) *string {
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].Status == automation.StepFailed {
			name := steps[i].Name
			return &name
		}
	}
	return nil
}

// FlowData is the data of a flow event.
type FlowData struct {
	FlowID string `json:"flowId"`
	Name   string `json:"name"`
	Status string `json:"status,omitempty"`
}

// ConnectionData is the data of connection.state_changed.
type ConnectionData struct {
	ConnectionID string `json:"connectionId"`
	Name         string `json:"name"`
	From         string `json:"from"`
	To           string `json:"to"`
}

// NewEvent makes an event with a fresh ID and its payload.
func NewEvent(project, typ, flowID string, data any, now time.Time) (Event, error) {
	now = now.UTC().Truncate(time.Millisecond)
	body, err := json.Marshal(envelope{Type: typ, Timestamp: now, Data: data})
	if err != nil {
		return Event{}, fmt.Errorf("alerts: encode %s event: %w", typ, err)
	}
	return Event{
		ID: automation.NewID(PrefixEvent), Project: project, Type: typ, FlowID: flowID,
		Created: now, Payload: body,
	}, nil
}

// Fanout is the deliveries of e to those of subs that want it.
func Fanout(e Event, subs []Subscription) []Delivery {
	var ds []Delivery
	for _, s := range subs {
		if s.Project == e.Project && s.Wants(e.Type, e.FlowID) {
			ds = append(ds, NewDelivery(e, s.ID))
		}
	}
	return ds
}

// NewDelivery is a PENDING delivery of e to a subscription, due at once.
func NewDelivery(e Event, subscriptionID string) Delivery {
	due := e.Created
	return Delivery{
		ID: NewDeliveryID(e.Created), Project: e.Project, SubscriptionID: subscriptionID,
		EventID: e.ID, EventType: e.Type, Status: DeliveryPending, NextAttemptAt: &due,
		Created: e.Created, Updated: e.Created, History: []Attempt{},
	}
}

// FlowEventType is the event of a flow write: old is the flow before (nil
// when created), next after (nil when deleted). A change of status is
// flow.enabled or flow.disabled; a new live version (or a change of
// definition) is flow.published; a metadata-only change, or a draft saved
// beside the live version, is no event ("").
func FlowEventType(old, next *automation.Flow) string {
	switch {
	case next == nil:
		return EventFlowDeleted
	case old == nil:
		return EventFlowPublished
	case old.Status != next.Status && next.Status == automation.FlowActive:
		return EventFlowEnabled
	case old.Status != next.Status:
		return EventFlowDisabled
	case old.LiveVersion != next.LiveVersion, !sameDefinition(*old, *next):
		return EventFlowPublished
	}
	return ""
}

func sameDefinition(a, b automation.Flow) bool {
	def := func(f automation.Flow) string {
		doc, _ := json.Marshal(automation.DefinitionOf(f))
		return string(doc)
	}
	return def(a) == def(b)
}

// NewFlowEvent is the event of a flow write (FlowEventType), or ok false
// when the write is no event.
func NewFlowEvent(old, next *automation.Flow, now time.Time) (e Event, ok bool, err error) {
	typ := FlowEventType(old, next)
	if typ == "" {
		return Event{}, false, nil
	}
	f := next
	if f == nil {
		f = old
	}
	data := FlowData{FlowID: f.ID, Name: f.Name, Status: string(f.Status)}
	if next == nil {
		data.Status = ""
	}
	e, err = NewEvent(f.Project, typ, f.ID, data, now)
	return e, err == nil, err
}

// NewConnectionEvent is connection.state_changed for a connection moving
// from one status to another, or ok false when the status stays.
func NewConnectionEvent(c automation.Connection, to automation.ConnectionStatus, now time.Time) (e Event, ok bool, err error) {
	if c.Status == to {
		return Event{}, false, nil
	}
	e, err = NewEvent(c.Project, EventConnectionStateChanged, "",
		ConnectionData{ConnectionID: c.ID, Name: c.Name, From: string(c.Status), To: string(to)}, now)
	return e, err == nil, err
}

// NewDeliveryID is PrefixDelivery and a run ID's time-ordered body: IDs
// made later sort after, so a store lists a subscription's deliveries
// newest first by key alone, and they stay unguessable.
func NewDeliveryID(t time.Time) string {
	return PrefixDelivery + strings.TrimPrefix(automation.NewRunID(t), automation.PrefixRun)
}
