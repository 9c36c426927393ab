package alerts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/engine"
)

// FlowReader finds a project's flow: a subscription's flowId must name one.
type FlowReader interface {
	Flow(ctx context.Context, project, id string) (automation.Flow, error)
}

// Config is what a Service needs.
type Config struct {
	Store Store
	Flows FlowReader
	// Client sends deliveries. It must refuse private addresses unless the
	// operator allowed them (engine.GuardedTransport): a subscription URL
	// is a request the service makes on a tenant's behalf.
	Client *http.Client
	// UserAgent identifies the service to receivers: the HTTP step's
	// (engine.UserAgent), so that a receiver sees one sender.
	UserAgent string
	// Outbound holds each attempt to its project's outboundPerMinute
	// quota, in the bucket the HTTP steps of this process use (the
	// automation.Service the engine is given); nil: no quota.
	Outbound automation.OutboundGate
	// QuotaWait bounds an attempt's wait for the quota (default
	// QuotaWait).
	QuotaWait time.Duration
	// Clock is the Service's time: attempts, retries, and the events of
	// the store's changes (Outbox). Wire the automation.Service's clock,
	// so that an event is stamped on the clock its change was.
	Clock func() time.Time
	Log   *slog.Logger
}

// Service manages subscriptions and sends deliveries.
type Service struct {
	store     Store
	flows     FlowReader
	client    *http.Client
	userAgent string
	outbound  automation.OutboundGate
	quotaWait time.Duration
	clock     func() time.Time
	log       *slog.Logger
	senders   *senders // sender.go
}

// NewService returns a Service; Clock defaults to time.Now, Log to discard,
// UserAgent to engine.UserAgent(""). It hands the Store an Outbox on
// Clock (Store.UseOutbox): the events of the store's changes are the
// Service's, decided and stamped by it.
func NewService(c Config) (*Service, error) {
	if c.Store == nil || c.Flows == nil || c.Client == nil {
		return nil, errors.New("alerts: a Store, a FlowReader and a Client are required")
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.UserAgent == "" {
		c.UserAgent = engine.UserAgent("")
	}
	if c.QuotaWait <= 0 {
		c.QuotaWait = QuotaWait
	}
	// From here on the store writes the events of its changes, stamped
	// with the Service's clock.
	c.Store.UseOutbox(NewOutbox(c.Clock))
	return &Service{store: c.Store, flows: c.Flows, client: c.Client, userAgent: c.UserAgent, outbound: c.Outbound,
		quotaWait: c.QuotaWait, clock: c.Clock, log: c.Log, senders: newSenders()}, nil
}

// Input is the body of POST /api/v1/subscriptions.
type Input struct {
	URL         string   `json:"url"`
	Events      []string `json:"events"`
	FlowID      *string  `json:"flowId"`
	Description string   `json:"description"`
}

// Created is a new subscription with its secret, shown this once.
type Created struct {
	Subscription
	Secret string `json:"secret"`
}

// CheckURL refuses what can never be delivered to: the SSRF guard checks
// the address itself at every connection, since DNS may change.
func CheckURL(raw string) error {
	if raw == "" {
		return automation.Invalid("url is required")
	}
	if len(raw) > MaxURLLength {
		return automation.Invalid("url is longer than %d bytes", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Hostname() == "" {
		return automation.Invalid("url must be an absolute http or https URL")
	}
	if u.User != nil {
		return automation.Invalid("url must not carry credentials: the signature authenticates deliveries")
	}
	if u.Fragment != "" {
		return automation.Invalid("url must not have a fragment")
	}
	return nil
}

// CreateSubscription validates in and stores a new ACTIVE subscription
// with a fresh secret.
func (s *Service) CreateSubscription(ctx context.Context, p automation.Project, in Input) (Created, error) {
	if err := CheckURL(in.URL); err != nil {
		return Created{}, err
	}
	if len(in.Events) == 0 {
		return Created{}, automation.Invalid("events is required: one or more of %s", strings.Join(EventTypes, ", "))
	}
	events := make([]string, 0, len(in.Events))
	for i, e := range in.Events {
		if !slices.Contains(EventTypes, e) {
			return Created{}, automation.Invalid("events[%d] %q: allowed values are %s", i, e, strings.Join(EventTypes, ", "))
		}
		if !slices.Contains(events, e) {
			events = append(events, e)
		}
	}
	if len(in.Description) > MaxDescription {
		return Created{}, automation.Invalid("description is longer than %d bytes", MaxDescription)
	}
	if in.FlowID != nil {
		if _, err := s.flows.Flow(ctx, p.ID, *in.FlowID); errors.Is(err, automation.ErrNotFound) {
			return Created{}, automation.Invalid("flowId %q: no such flow in this project", *in.FlowID)
		} else if err != nil {
			return Created{}, fmt.Errorf("create subscription: %w", err)
		}
	}
	subs, err := s.store.Subscriptions(ctx, p.ID)
	if err != nil {
		return Created{}, fmt.Errorf("create subscription: %w", err)
	}
	if len(subs) >= MaxSubscriptions {
		return Created{}, QuotaExceeded() // early; the store checks again in its write
	}
	sub := Subscription{
		ID: automation.NewID(PrefixSubscription), Project: p.ID, URL: in.URL, Events: events,
		FlowID: in.FlowID, Description: in.Description, Status: StatusActive, Secret: NewSecret(),
		Created: s.clock().UTC().Truncate(time.Millisecond),
	}
	if err := s.store.CreateSubscription(ctx, sub); err != nil {
		return Created{}, fmt.Errorf("create subscription: %w", err)
	}
	return Created{Subscription: sub, Secret: sub.Secret.Reveal()}, nil
}

// Subscriptions lists the project's subscriptions (at most
// MaxSubscriptions, so one page).
func (s *Service) Subscriptions(ctx context.Context, p automation.Project) (automation.List[Subscription], error) {
	subs, err := s.store.Subscriptions(ctx, p.ID)
	if err != nil {
		return automation.List[Subscription]{}, fmt.Errorf("list subscriptions: %w", err)
	}
	if subs == nil {
		subs = []Subscription{}
	}
	return automation.List[Subscription]{Data: subs}, nil
}

// Subscription returns one subscription, without its secret.
func (s *Service) Subscription(ctx context.Context, p automation.Project, id string) (Subscription, error) {
	return s.store.Subscription(ctx, p.ID, id)
}

// DeleteSubscription removes a subscription and its deliveries.
func (s *Service) DeleteSubscription(ctx context.Context, p automation.Project, id string) error {
	return s.store.DeleteSubscription(ctx, p.ID, id)
}

// Enable makes a subscription ACTIVE again and forgets its failures.
func (s *Service) Enable(ctx context.Context, p automation.Project, id string) (Subscription, error) {
	sub, err := s.store.Subscription(ctx, p.ID, id)
	if err != nil {
		return Subscription{}, err
	}
	sub.Status, sub.FailingSince = StatusActive, nil
	if err := s.store.UpdateSubscription(ctx, sub); err != nil {
		return Subscription{}, fmt.Errorf("enable subscription: %w", err)
	}
	return sub, nil
}

// maxErrorLength bounds an attempt's error as recorded (ten are kept).
const maxErrorLength = 500

// Queued says which delivery carries a ping or a retry.
type Queued struct {
	EventID    string `json:"eventId"`
	DeliveryID string `json:"deliveryId"`
}

// Test queues a ping to the subscription, whatever its events and status
// (a disabled subscription is tested before it is enabled again).
func (s *Service) Test(ctx context.Context, p automation.Project, id string) (Queued, error) {
	sub, err := s.store.Subscription(ctx, p.ID, id)
	if err != nil {
		return Queued{}, err
	}
	e, err := NewEvent(p.ID, EventPing, "", map[string]string{"subscriptionId": sub.ID}, s.clock())
	if err != nil {
		return Queued{}, err
	}
	d := NewDelivery(e, sub.ID)
	if err := s.store.AddEvent(ctx, e, []Delivery{d}); err != nil {
		return Queued{}, fmt.Errorf("test subscription: %w", err)
	}
	return Queued{EventID: e.ID, DeliveryID: d.ID}, nil
}

// Deliveries lists the subscription's latest deliveries, newest first.
func (s *Service) Deliveries(ctx context.Context, p automation.Project, id, limit string) (automation.List[Delivery], error) {
	n := 10
	if limit != "" {
		var err error
		if n, err = strconv.Atoi(limit); err != nil || n < 1 || n > automation.MaxPageSize {
			return automation.List[Delivery]{}, automation.InvalidCode("INVALID_PARAMETER", "limit must be an integer from 1 to %d", automation.MaxPageSize)
		}
	}
	if _, err := s.store.Subscription(ctx, p.ID, id); err != nil {
		return automation.List[Delivery]{}, err
	}
	ds, err := s.store.Deliveries(ctx, p.ID, id, n)
	if err != nil {
		return automation.List[Delivery]{}, fmt.Errorf("list deliveries: %w", err)
	}
	if ds == nil {
		ds = []Delivery{}
	}
	return automation.List[Delivery]{Data: ds}, nil
}

// Retry queues the event of a delivery again, at once, as a new delivery
// with the same event (so the same webhook-id).
func (s *Service) Retry(ctx context.Context, p automation.Project, subID, deliveryID string) (Delivery, error) {
	d, err := s.store.Delivery(ctx, p.ID, subID, deliveryID)
	if err != nil {
		return Delivery{}, err
	}
	now := s.clock().UTC().Truncate(time.Millisecond)
	d.Status, d.NextAttemptAt, d.Updated = DeliveryPending, &now, now
	if err := s.store.RecordAttempt(ctx, d); err != nil {
		return Delivery{}, fmt.Errorf("retry delivery: %w", err)
	}
	return d, nil
}

// DeliverDue claims up to max due deliveries, whatever the shares, sends
// them at once, one goroutine each, and returns when they are recorded,
// with how many it claimed: for tests and tools. The senders (Run, Drain)
// use Dispatch.
func (s *Service) DeliverDue(ctx context.Context, max int) (int, error) {
	due, err := s.store.ClaimDeliveries(ctx, s.clock(), ClaimLease, max, nil)
	if err != nil {
		return 0, fmt.Errorf("alerts: claim deliveries: %w", err)
	}
	var wg sync.WaitGroup
	for _, p := range due {
		wg.Go(func() { s.attempt(ctx, p) })
	}
	wg.Wait()
	return len(due), nil
}

// deliver makes one attempt of p and records it.
func (s *Service) deliver(ctx context.Context, p Pending) error {
	d, sub := p.Delivery, p.Subscription
	if sub.Status != StatusActive && p.Event.Type != EventPing {
		// Not sent: a disabled subscription receives nothing until it is
		// enabled, and then its failed deliveries can be retried.
		now := s.clock().UTC().Truncate(time.Millisecond)
		d.Status, d.NextAttemptAt, d.LastError, d.Updated = DeliveryFailed, nil, "subscription disabled", now
		return s.store.RecordAttempt(ctx, d)
	}
	start := s.clock()
	a := Attempt{At: start.UTC().Truncate(time.Millisecond)}
	code, sendErr := s.send(ctx, sub, p.Event, start)
	a.DurationMs = s.clock().Sub(start).Milliseconds()
	a.StatusCode = code
	if sendErr != nil {
		a.Error = sendErr.Error()
		if len(a.Error) > maxErrorLength {
			a.Error = strings.ToValidUTF8(a.Error[:maxErrorLength], "") + "…"
		}
	}
	now := s.clock().UTC().Truncate(time.Millisecond)
	d = Next(d, a, now)
	if err := s.store.RecordAttempt(ctx, d); err != nil {
		return err
	}
	return s.trackHealth(ctx, sub, d.Status == DeliverySucceeded, now)
}

// Next is a delivery after attempt a: SUCCEEDED on 2xx; on a network
// error, 408, 429 or 5xx, PENDING until Backoff is spent and then FAILED;
// on any other answer FAILED (the receiver refused it, and will again).
func Next(d Delivery, a Attempt, now time.Time) Delivery {
	d.Attempts++
	d.Updated = now
	d.History = append(d.History, a)
	if len(d.History) > MaxAttemptsKept {
		d.History = slices.Clone(d.History[len(d.History)-MaxAttemptsKept:])
	}
	d.LastError = a.Error
	d.LastStatusCode = nil
	if a.StatusCode != 0 {
		c := a.StatusCode
		d.LastStatusCode = &c
	}
	d.NextAttemptAt = nil
	switch {
	case a.Error == "" && a.StatusCode >= 200 && a.StatusCode < 300:
		d.Status = DeliverySucceeded
	case Retryable(a.StatusCode) && d.Attempts <= len(Backoff):
		d.Status = DeliveryPending
		next := now.Add(Backoff[d.Attempts-1])
		d.NextAttemptAt = &next
	default:
		d.Status = DeliveryFailed
	}
	return d
}

// Retryable reports whether an answer (0: none, a network error) is worth
// trying again.
func Retryable(code int) bool {
	return code == 0 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// trackHealth records a subscription's first failure since its last
// success, and disables it DisableAfter later.
func (s *Service) trackHealth(ctx context.Context, sub Subscription, ok bool, now time.Time) error {
	switch {
	case ok && sub.FailingSince == nil, !ok && sub.FailingSince != nil && now.Sub(*sub.FailingSince) < DisableAfter:
		return nil
	}
	// Read it again: several deliveries of one subscription finish together.
	cur, err := s.store.Subscription(ctx, sub.Project, sub.ID)
	if errors.Is(err, automation.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	switch {
	case ok:
		cur.FailingSince = nil
	case cur.FailingSince == nil:
		cur.FailingSince = &now
	case now.Sub(*cur.FailingSince) >= DisableAfter && cur.Status == StatusActive:
		cur.Status = StatusDisabled
		s.log.WarnContext(ctx, "subscription disabled after failing for 5 days", "subscription", cur.ID)
	default:
		return nil
	}
	return s.store.UpdateSubscription(ctx, cur)
}

// send makes one signed POST of the event; it answers the status code, or
// 0 and the error when no answer came.
func (s *Service) send(ctx context.Context, sub Subscription, e Event, at time.Time) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.URL, bytes.NewReader(e.Payload))
	if err != nil {
		return 0, fmt.Errorf("bad subscription url: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", s.userAgent)
	if err := Sign(req.Header, sub.Secret, e.ID, at, e.Payload); err != nil {
		return 0, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// Without url.Error's method and URL: the delivery names its subscription.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, err
	}
	defer resp.Body.Close()
	// Read a little, so the connection can be reused; the body is ignored.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}
