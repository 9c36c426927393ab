// Package alerts is a project's event subscriptions: which events exist,
// the payload each carries, how a delivery is signed (Standard Webhooks),
// when a failed delivery is tried again, and when a subscription that keeps
// failing is disabled. It knows nothing of HTTP handlers or AWS: stores
// implement Store, and the Service sends through the *http.Client it is
// given (flowd and the runner pass the HTTP step's SSRF-guarded transport).
// docs/alerts.md describes the feature as users see it.
package alerts

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"flowservice/pkg/automation"
)

// Event types a subscription may ask for.
const (
	EventRunSucceeded           = "run.succeeded"
	EventRunFailed              = "run.failed"
	EventRunTimeout             = "run.timeout"
	EventFlowPublished          = "flow.published"
	EventFlowEnabled            = "flow.enabled"
	EventFlowDisabled           = "flow.disabled"
	EventFlowDeleted            = "flow.deleted"
	EventConnectionStateChanged = "connection.state_changed"
	EventApprovalRequested      = "approval.requested"
	EventApprovalDecided        = "approval.decided"
	EventPing                   = "ping"
)

// EventTypes is the fixed list, in the order the documentation gives it.
var EventTypes = []string{
	EventRunSucceeded, EventRunFailed, EventRunTimeout,
	EventFlowPublished, EventFlowEnabled, EventFlowDisabled, EventFlowDeleted,
	EventConnectionStateChanged, EventApprovalRequested, EventApprovalDecided, EventPing,
}

// ID prefixes. An event ID is the webhook-id of every delivery of the
// event: receivers deduplicate on it.
const (
	PrefixSubscription = "sub_"
	PrefixEvent        = "msg_"
	PrefixDelivery     = "dlv_"
)

// Subscription statuses.
const (
	StatusActive   = "ACTIVE"
	StatusDisabled = "DISABLED"
)

// Delivery statuses: PENDING until an attempt succeeds (SUCCEEDED) or the
// schedule is exhausted or the receiver refused for good (FAILED).
const (
	DeliveryPending   = "PENDING"
	DeliverySucceeded = "SUCCEEDED"
	DeliveryFailed    = "FAILED"
)

// Limits.
const (
	// MaxSubscriptions per project: every finished run is matched against
	// them all, in the same transaction as its finish.
	MaxSubscriptions = 20
	// MaxURLLength of a subscription's url.
	MaxURLLength = 2048
	// MaxDescription is the length of a description, in bytes.
	MaxDescription = 500
	// DisableAfter is how long a subscription may fail without a single
	// success before it is DISABLED.
	DisableAfter = 5 * 24 * time.Hour
	// AttemptTimeout bounds one delivery attempt, connection included:
	// how long a receiver that accepts the connection and never answers
	// holds a sender.
	AttemptTimeout = 15 * time.Second
	// DialTimeout bounds the connection of an attempt (NewClient): an
	// address that drops packets is given up long before AttemptTimeout.
	DialTimeout = 3 * time.Second
	// Senders is how many deliveries one process sends at once (flowd, or
	// a runner instance on Lambda).
	Senders = 16
	// PerProjectSenders is the most of them one project's deliveries hold:
	// a project whose receivers hang holds 4 senders for AttemptTimeout,
	// and the other 12 go on with the other projects' deliveries.
	PerProjectSenders = 4
	// PerSubscription is the most deliveries of one subscription in
	// flight at once: one slow receiver holds at most 2 of its project's
	// senders, so the project's other receivers still get their events.
	PerSubscription = 2
	// QuotaWait is how long an attempt waits for its project's
	// outboundPerMinute quota (OutboundGate) before it is put off by
	// QuotaDelay instead: a waiting attempt holds a sender.
	QuotaWait = 5 * time.Second
	// QuotaDelay is how much later an attempt the quota held back is due
	// again; it is not an attempt (nothing was sent), so its schedule is
	// unchanged.
	QuotaDelay = 30 * time.Second
	// ClaimLease is how long a claimed delivery is kept from other
	// senders; a sender that died holding it is retried after it.
	ClaimLease = time.Minute
	// MaxAttemptsKept is how many attempts a delivery records in full.
	MaxAttemptsKept = 10
	// Retention is how long a delivery (and its event) is kept after the
	// event: its retries end after about 28 hours, and the deliveries list
	// is for finding out why an alert did not arrive.
	Retention = 30 * 24 * time.Hour
)

// Backoff is the wait before each retry after the first attempt, made at
// once: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (eight attempts, about
// 28 hours in all), as Svix schedules them.
var Backoff = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// QuotaExceeded is a subscription refused past MaxSubscriptions: 403
// QUOTA_EXCEEDED.
func QuotaExceeded() error {
	return automation.Forbidden("QUOTA_EXCEEDED", "a project has at most %d subscriptions", MaxSubscriptions)
}

// Subscription is a URL that receives a project's events of the listed
// types, optionally of one flow only.
type Subscription struct {
	ID          string            `json:"id"`
	Project     string            `json:"-"`
	URL         string            `json:"url"`
	Events      []string          `json:"events"`
	FlowID      *string           `json:"flowId"`
	Description string            `json:"description,omitempty"`
	Status      string            `json:"status"`
	Secret      automation.Secret `json:"-"` // shown once, by Created
	Created     time.Time         `json:"created"`
	// FailingSince is the first failed attempt since the last success;
	// DisableAfter past it, the subscription is disabled.
	FailingSince *time.Time `json:"failingSince,omitempty"`
}

// Wants reports whether the subscription takes an event of that type about
// that flow ("" for none). Pings go to one subscription by ID instead.
func (s Subscription) Wants(eventType, flowID string) bool {
	return s.Status == StatusActive && slices.Contains(s.Events, eventType) &&
		(s.FlowID == nil || *s.FlowID == flowID)
}

// Event is one thing that happened, with the payload every delivery of it
// sends byte for byte.
type Event struct {
	ID      string
	Project string
	Type    string
	FlowID  string // "" when the event is not about a flow
	Created time.Time
	Payload json.RawMessage // {"type", "timestamp", "data"}
}

// Delivery is the sending of one event to one subscription, over one or
// more attempts.
type Delivery struct {
	ID             string     `json:"id"`
	Project        string     `json:"-"`
	SubscriptionID string     `json:"subscriptionId"`
	EventID        string     `json:"eventId"`
	EventType      string     `json:"eventType"`
	Status         string     `json:"status"`
	Attempts       int        `json:"attempts"`
	LastStatusCode *int       `json:"lastStatusCode"`
	LastError      string     `json:"lastError,omitempty"`
	NextAttemptAt  *time.Time `json:"nextAttemptAt"`
	Created        time.Time  `json:"created"`
	Updated        time.Time  `json:"updated"`
	// History holds the latest MaxAttemptsKept attempts, oldest first.
	History []Attempt `json:"history"`
	// Claim names the claim a sender holds on the delivery (set by
	// Store.ClaimDeliveries; "" otherwise). A RecordAttempt with a claim
	// writes only while that claim still holds, so that a retry asked for
	// meanwhile, or a sender that took over after the lease, is not
	// overwritten by a slow attempt's result.
	Claim string `json:"-"`
}

// Attempt is one try of a delivery.
type Attempt struct {
	At         time.Time `json:"at"`
	StatusCode int       `json:"statusCode,omitempty"`
	Error      string    `json:"error,omitempty"`
	DurationMs int64     `json:"durationMs"`
}

// Pending is a claimed delivery with what sending it needs.
type Pending struct {
	Delivery     Delivery
	Event        Event
	Subscription Subscription
}

// Store persists subscriptions, events and deliveries. The events of a
// store change (a run's finish, a flow write, a connection's status
// change) are decided by the Outbox the store is given (UseOutbox) and
// written by the store in that change's atomic write; the events the
// Service makes (ping, a retry) go through AddEvent. CreateSubscription, UpdateSubscription,
// DeleteSubscription, AddEvent and RecordAttempt write the audit entry of
// their context's request (automation.AuditFrom) in their own atomic
// write, so that a subscription's change, its test and a delivery's retry
// are in the audit log exactly when they happened.
type Store interface {
	// UseOutbox makes the store write the events o decides for its
	// changes, each in the atomic write of the change that caused it, as
	// automation's ports.go says for FinishRun, InsertFinishedRun,
	// CreateFlow, PutFlow, DeleteFlow, SetConnectionStatus and
	// UpdateWaitpoint: the store
	// hands o the project's subscriptions (it may cache them; a write
	// through the store drops its copy) and what o asks it to read in the
	// write, and writes the Outgoing it gets back, and nothing when it is
	// None. It decides no event itself and stamps none. A change that
	// fails writes no delivery; an Outbox that fails fails the change.
	// Without an Outbox (nil, the default) the store writes no events and
	// reads no subscriptions for its changes. Called once, before the
	// store serves (NewService does).
	UseOutbox(o *Outbox)
	// CreateSubscription stores a new subscription. The same atomic write
	// counts the project's subscriptions and refuses one past
	// MaxSubscriptions (QuotaExceeded): of concurrent creates, exactly as
	// many as the quota leaves succeed.
	CreateSubscription(ctx context.Context, s Subscription) error
	// Subscription returns an error wrapping ErrNotFound (code
	// SUBSCRIPTION_NOT_FOUND) if the project has no such subscription.
	Subscription(ctx context.Context, project, id string) (Subscription, error)
	// Subscriptions lists a project's subscriptions in creation order.
	Subscriptions(ctx context.Context, project string) ([]Subscription, error)
	// UpdateSubscription writes s's Status and FailingSince; a missing
	// subscription is ErrNotFound.
	UpdateSubscription(ctx context.Context, s Subscription) error
	// DeleteSubscription removes a subscription and its deliveries; a
	// missing one is ErrNotFound.
	DeleteSubscription(ctx context.Context, project, id string) error
	// AddEvent stores an event and its deliveries (PENDING, due at once)
	// in one atomic write.
	AddEvent(ctx context.Context, e Event, ds []Delivery) error
	// ClaimDeliveries claims up to max PENDING deliveries due at now that
	// no live claim holds, for lease, with their events and
	// subscriptions, earliest due first. A non-nil admit is asked about
	// each delivery the claim would take, in due order, with its project
	// ("" where the store cannot tell before the claim) and subscription:
	// the claim passes over those it refuses and looks further, through a
	// bounded number of due deliveries, so that the deliveries of a
	// project or subscription at its share (the sender's Admit) do not
	// hide the others' behind them.
	ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, max int, admit func(project, subscription string) bool) ([]Pending, error)
	// RecordAttempt writes a delivery after an attempt (status, attempts,
	// history, next attempt) and releases its claim.
	RecordAttempt(ctx context.Context, d Delivery) error
	// Deliveries lists up to limit of a subscription's deliveries, newest
	// first.
	Deliveries(ctx context.Context, project, subscriptionID string, limit int) ([]Delivery, error)
	// Delivery returns one delivery of the subscription, or ErrNotFound
	// (DELIVERY_NOT_FOUND).
	Delivery(ctx context.Context, project, subscriptionID, id string) (Delivery, error)
}
