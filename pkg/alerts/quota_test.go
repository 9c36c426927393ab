package alerts_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/engine"
	"flowservice/pkg/flowtest"
)

// TestAlertsCountInOutboundQuota: alerts take from the project's
// outboundPerMinute bucket, the one its HTTP steps take from (the
// automation.Service the engine is given). At 2 a minute (a burst of one,
// the next 30 s later) the first of three pings is sent; the other two are
// put off by QuotaDelay, still PENDING with no attempt counted, and due
// again then; and the project's next HTTP step request has to wait, while
// another project's does not.
func TestAlertsCountInOutboundQuota(t *testing.T) {
	ctx := context.Background()
	fe := flowtest.New(t, flowtest.Options{})
	free, _ := fe.Project(t, "free", automation.PlanFree)
	other, _ := fe.Project(t, "other", automation.PlanFree)
	if _, err := fe.Svc.SetProjectLimits(ctx, "free", map[string]int64{"outboundPerMinute": 2}, nil); err != nil {
		t.Fatal(err)
	}
	good := newGoodReceiver(t)
	c := &clock{}
	t0 := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	c.set(t0)
	svc, err := alerts.NewService(alerts.Config{Store: fe.Store, Flows: fe.Store, Clock: c.now,
		Client: alerts.NewClient(engine.GuardedTransport(true)), Outbound: fe.Svc,
		QuotaWait: 100 * time.Millisecond}) // far below the 30 s the next token takes
	if err != nil {
		t.Fatal(err)
	}
	sub, err := svc.CreateSubscription(ctx, free, alerts.Input{URL: good.srv.URL, Events: []string{alerts.EventPing}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := svc.Test(ctx, free, sub.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := svc.DeliverDue(ctx, 10); err != nil || n != 3 {
		t.Fatalf("DeliverDue = %d, %v; want the 3 pings", n, err)
	}
	if len(good.got) != 1 {
		t.Fatalf("the receiver got %d pings under a quota of 2 a minute, want 1", len(good.got))
	}
	check := func(when string) {
		t.Helper()
		ds, err := svc.Deliveries(ctx, free, sub.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		held := 0
		for _, d := range ds.Data {
			if d.Status == alerts.DeliverySucceeded {
				continue
			}
			held++
			if d.Status != alerts.DeliveryPending || d.Attempts != 0 || len(d.History) != 0 ||
				!strings.Contains(d.LastError, "outboundPerMinute") ||
				d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(c.now().Add(alerts.QuotaDelay)) {
				t.Errorf("%s: delivery %+v, want PENDING, no attempt, due %v, naming the quota", when, d, c.now().Add(alerts.QuotaDelay))
			}
		}
		if held != 2 {
			t.Errorf("%s: %d deliveries held back, want 2", when, held)
		}
	}
	check("over the quota")

	// The bucket is the HTTP steps' one: the project's next request waits.
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := fe.Svc.AdmitOutbound(wctx, free.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an HTTP step request after the alert: %v, want it to wait for the quota", err)
	}
	if err := fe.Svc.AdmitOutbound(ctx, other.ID); err != nil {
		t.Errorf("another project's request: %v, want it admitted at once", err)
	}

	// Not lost: due again after QuotaDelay, and held back again while the
	// bucket is empty.
	c.add(alerts.QuotaDelay)
	if n, err := svc.DeliverDue(ctx, 10); err != nil || n != 2 {
		t.Fatalf("DeliverDue after %v = %d, %v; want the 2 held back", alerts.QuotaDelay, n, err)
	}
	check("again over the quota")
}
