package alerts_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/engine"
	"flowservice/pkg/sqlitestore"
)

// clock is a settable time for the Service.
type clock struct{ t atomic.Pointer[time.Time] }

func (c *clock) now() time.Time      { return *c.t.Load() }
func (c *clock) set(t time.Time)     { c.t.Store(&t) }
func (c *clock) add(d time.Duration) { c.set(c.now().Add(d)) }

func newService(t *testing.T, c *clock) (*alerts.Service, *sqlitestore.Store) {
	t.Helper()
	store, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "alerts.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	svc, err := alerts.NewService(alerts.Config{Store: store, Flows: store, Client: http.DefaultClient, Clock: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return svc, store
}

// TestDisabledAfterFiveDaysOfFailures: failures for less than five days
// leave a subscription ACTIVE; the first failed attempt five days after the
// first failure disables it; a disabled subscription gets no new events
// and sends none of its due deliveries; enabling it and retrying delivers.
func TestDisabledAfterFiveDaysOfFailures(t *testing.T) {
	ctx := context.Background()
	var up atomic.Bool
	var received atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		received.Add(1)
		if !up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	c := &clock{}
	t0 := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	c.set(t0)
	svc, store := newService(t, c)
	p := automation.Project{ID: "prj_a"}
	sub, err := svc.CreateSubscription(ctx, p, alerts.Input{URL: receiver.URL, Events: []string{alerts.EventRunFailed}})
	if err != nil {
		t.Fatal(err)
	}
	emit := func() alerts.Delivery {
		t.Helper()
		subs, err := store.Subscriptions(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		e, err := alerts.NewEvent(p.ID, alerts.EventRunFailed, "flw_1", map[string]string{"id": "run_1"}, c.now())
		if err != nil {
			t.Fatal(err)
		}
		ds := alerts.Fanout(e, subs)
		if err := store.AddEvent(ctx, e, ds); err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return alerts.Delivery{}
		}
		return ds[0]
	}
	deliver := func() {
		t.Helper()
		if _, err := svc.DeliverDue(ctx, 10); err != nil {
			t.Fatal(err)
		}
	}
	status := func() alerts.Subscription {
		t.Helper()
		s, err := svc.Subscription(ctx, p, sub.ID)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	first := emit()
	deliver()
	if s := status(); s.Status != alerts.StatusActive || s.FailingSince == nil || !s.FailingSince.Equal(t0) {
		t.Fatalf("after a first failure: %+v, want ACTIVE failing since %v", s, t0)
	}
	c.add(5*24*time.Hour - time.Minute)
	emit()
	deliver() // the new event fails, and so does the first one's retry
	if s := status(); s.Status != alerts.StatusActive {
		t.Fatalf("failing for less than 5 days: %s, want ACTIVE", s.Status)
	}
	c.add(time.Minute)
	emit()
	deliver()
	if s := status(); s.Status != alerts.StatusDisabled {
		t.Fatalf("failing for 5 days: %s, want DISABLED", s.Status)
	}
	if d := emit(); d.ID != "" {
		t.Fatalf("a disabled subscription got a delivery of a new event: %+v", d)
	}
	// The first event's delivery comes due again (its retries go on): it
	// fails unsent.
	before := received.Load()
	c.add(24 * time.Hour)
	deliver()
	got, err := store.Delivery(ctx, p.ID, sub.ID, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if received.Load() != before || got.Status != alerts.DeliveryFailed || got.LastError != "subscription disabled" {
		t.Fatalf("a due delivery of a disabled subscription: %d sent, %+v", received.Load()-before, got)
	}

	up.Store(true)
	if s, err := svc.Enable(ctx, p, sub.ID); err != nil || s.Status != alerts.StatusActive || s.FailingSince != nil {
		t.Fatalf("enable = %+v, %v", s, err)
	}
	if _, err := svc.Retry(ctx, p, sub.ID, first.ID); err != nil {
		t.Fatal(err)
	}
	deliver()
	got, _ = store.Delivery(ctx, p.ID, sub.ID, first.ID)
	if got.Status != alerts.DeliverySucceeded || got.LastStatusCode == nil || *got.LastStatusCode != 204 {
		t.Fatalf("retried after enabling: %+v", got)
	}
}

// TestCreateSubscriptionValidation: each refusal names its field.
func TestCreateSubscriptionValidation(t *testing.T) {
	c := &clock{}
	c.set(time.Now())
	svc, _ := newService(t, c)
	p := automation.Project{ID: "prj_a"}
	flow := "flw_missing"
	tests := []struct {
		in   alerts.Input
		want string
	}{
		{alerts.Input{Events: []string{"run.failed"}}, "url is required"},
		{alerts.Input{URL: "/relative", Events: []string{"run.failed"}}, "url must be an absolute http or https URL"},
		{alerts.Input{URL: "https://x.example/" + strings.Repeat("a", 2100), Events: []string{"run.failed"}}, "url is longer"},
		{alerts.Input{URL: "https://x.example/#frag", Events: []string{"run.failed"}}, "url must not have a fragment"},
		{alerts.Input{URL: "https://x.example/"}, "events is required"},
		{alerts.Input{URL: "https://x.example/", Events: []string{"run.failed", "RUN.FAILED"}}, `events[1] "RUN.FAILED"`},
		{alerts.Input{URL: "https://x.example/", Events: []string{"run.failed"}, FlowID: &flow}, `flowId "flw_missing"`},
		{alerts.Input{URL: "https://x.example/", Events: []string{"run.failed"}, Description: strings.Repeat("d", 501)}, "description is longer"},
	}
	for _, tt := range tests {
		_, err := svc.CreateSubscription(context.Background(), p, tt.in)
		var e *automation.Error
		if !errors.As(err, &e) || e.Kind != automation.ErrInvalid || !strings.Contains(e.Message, tt.want) {
			t.Errorf("CreateSubscription(%+v) = %v, want a 400 naming %q", tt.in, err, tt.want)
		}
	}
	for range alerts.MaxSubscriptions {
		if _, err := svc.CreateSubscription(context.Background(), p, alerts.Input{URL: "https://x.example/", Events: []string{"ping"}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := svc.CreateSubscription(context.Background(), p, alerts.Input{URL: "https://x.example/", Events: []string{"ping"}})
	if !automation.HasCode(err, "QUOTA_EXCEEDED") {
		t.Fatalf("subscription %d = %v, want QUOTA_EXCEEDED", alerts.MaxSubscriptions+1, err)
	}
}

// TestDeliveryThroughSSRFGuard: with the HTTP step's guarded transport (as
// flowd and the runner wire it), a subscription URL on loopback is refused
// at connect time: nothing reaches the receiver, and the attempt is
// recorded as a retryable failure naming the rule.
func TestDeliveryThroughSSRFGuard(t *testing.T) {
	ctx := context.Background()
	var received atomic.Int32
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { received.Add(1) }))
	defer receiver.Close()
	store, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "alerts.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	svc, err := alerts.NewService(alerts.Config{Store: store, Flows: store,
		Client: &http.Client{Transport: engine.GuardedTransport(false)}})
	if err != nil {
		t.Fatal(err)
	}
	p := automation.Project{ID: "prj_a"}
	sub, err := svc.CreateSubscription(ctx, p, alerts.Input{URL: receiver.URL, Events: []string{alerts.EventRunFailed}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := svc.Test(ctx, p, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.DeliverDue(ctx, 10); err != nil {
		t.Fatal(err)
	}
	d, err := store.Delivery(ctx, p.ID, sub.ID, q.DeliveryID)
	if err != nil {
		t.Fatal(err)
	}
	if received.Load() != 0 || d.Status != alerts.DeliveryPending || d.Attempts != 1 || !strings.Contains(d.LastError, "private") {
		t.Fatalf("delivery to loopback: %d received, %+v; want none, PENDING after 1 attempt naming the private address", received.Load(), d)
	}
}
