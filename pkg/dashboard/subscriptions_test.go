package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// TestSubscriptionsPage: the Alerts page lists the project's subscriptions
// with their latest deliveries, never a secret, and none of another
// project's.
func TestSubscriptionsPage(t *testing.T) {
	ctx := context.Background()
	fe := flowtest.New(t, flowtest.Options{})
	svc, err := alerts.NewService(alerts.Config{Store: fe.Store, Flows: fe.Store, Client: http.DefaultClient})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(fe.Svc, Options{Key: fe.Dir.CursorKey, Alerts: svc}))
	t.Cleanup(srv.Close)
	e := &env{srv: srv, svc: fe.Svc}
	e.p, e.key = e.project(t, "acme", automation.PlanEnterprise)
	other, _ := e.project(t, "other", automation.PlanTeam)

	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(receiver.Close)
	sub, err := svc.CreateSubscription(ctx, e.p, alerts.Input{URL: receiver.URL + "/acme", Events: []string{alerts.EventRunFailed}, Description: "on-call pager"})
	if err != nil {
		t.Fatal(err)
	}
	hidden, err := svc.CreateSubscription(ctx, other, alerts.Input{URL: receiver.URL + "/other", Events: []string{alerts.EventRunFailed}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := svc.Test(ctx, e.p, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := svc.DeliverDue(ctx, 10); err != nil || n != 1 {
		t.Fatalf("DeliverDue = %d, %v; want the ping", n, err)
	}

	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	p := b.get("/ui/subscriptions")
	wantPage(t, p, http.StatusOK, sub.ID, receiver.URL+"/acme", "on-call pager", "run.failed", q.EventID, "ping", "SUCCEEDED", "204")
	for _, leak := range []string{sub.Secret, "whsec_", hidden.ID} {
		if strings.Contains(p.body, leak) {
			t.Errorf("the page shows %q", leak)
		}
	}
}
