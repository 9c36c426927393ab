package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"flowservice/pkg/automation"
)

// The editor's field help covers paginate and POLL triggers, from the API
// document.
func TestEditorHelpForFlowLanguage3(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	p := b.get("/ui/flows/new")
	wantPage(t, p, http.StatusOK, "<dt>steps[].paginate.next</dt>", "<dt>steps[].paginate.param</dt>",
		"<dt>steps[].paginate.items</dt>", "<dt>steps[].paginate.maxPages</dt>", "Over 100 is a 400",
		"<dt>trigger.poll.every</dt>", "<dt>trigger.poll.request.url</dt>", "<dt>trigger.poll.items</dt>", "<dt>trigger.poll.key</dt>",
		"<code>POLL</code>")
}

// A POLL flow's page shows its interval and how polling goes, a failed
// poll's error included.
func TestFlowPageShowsPolling(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	name, eng, steps := "Orders", automation.FlowBuilder, []automation.Step{}
	f, err := e.svc.CreateFlow(ctx, e.p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps,
		Trigger: &automation.Trigger{Type: automation.TriggerPoll, Poll: &automation.Poll{Every: "5m",
			Request: automation.PollRequest{URL: down.URL + "/orders"}, Items: "response.body.orders", Key: "item.id"}}})
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	wantPage(t, b.get("/ui/flows/"+f.ID), http.StatusOK, "every <code>5m</code>", "no poll yet", "Poll every 5m")
	if _, err := e.svc.EnableFlow(ctx, e.p, f.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.PollFlow(ctx, e.p.ID, f.ID); err != nil {
		t.Fatal(err)
	}
	wantPage(t, b.get("/ui/flows/"+f.ID), http.StatusOK, "Polling failed", "answered 503 Service Unavailable")
}
