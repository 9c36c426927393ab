package dashboard

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/httpapi"
)

// hookEnv is a dashboard whose Service's webhook URLs are real receivers on
// loopback: a test event is accepted by the domain without them, and
// records their test URL's path.
func hookEnv(t *testing.T) *env {
	t.Helper()
	var engine, workflow http.Handler
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/v1/webhooks/") {
			engine.ServeHTTP(w, r)
			return
		}
		workflow.ServeHTTP(w, r)
	}))
	t.Cleanup(hooks.Close)
	fe := flowtest.New(t, flowtest.Options{EngineURL: hooks.URL, WorkflowURL: hooks.URL})
	cfg := httpapi.HookConfig{}
	engine = httpapi.NewWebhook(fe.Svc, cfg)
	workflow = httpapi.NewWorkflowHook(fe.Svc, cfg)
	srv := httptest.NewServer(New(fe.Svc, Options{Key: fe.Dir.CursorKey, Log: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	e := &env{srv: srv, svc: fe.Svc}
	e.p, e.key = e.project(t, "acme", automation.PlanEnterprise)
	return e
}

var runLocationRE = regexp.MustCompile(`/runs/(run_[A-Za-z0-9_-]+)\?done=testsent$`)

// TestSendTestEvent: "Send test event" delivers the typed JSON as the
// owner's test delivery (the webhook's authentication and signature held
// by construction) and opens the run it started; bad JSON is refused with
// its line and column.
func TestSendTestEvent(t *testing.T) {
	ctx := context.Background()
	e := hookEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")

	name, eng := "Signed", automation.FlowBuilder
	steps := []automation.Step{{Name: "greet", Type: automation.StepSet, Values: json.RawMessage(`{"hi":"{{ trigger.body.name }}"}`)}}
	signed, err := e.svc.CreateFlow(ctx, e.p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps,
		Trigger: &automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{HTTPMethod: "POST",
			Signature: &automation.Signature{Preset: automation.PresetGitHub, Secret: "gh-secret"}}}})
	if err != nil {
		t.Fatal(err)
	}
	wfName, wfEng := "Orders", automation.WorkflowBuilder
	guarded, err := e.svc.CreateFlow(ctx, e.p, automation.FlowInput{Name: &wfName, Engine: &wfEng, Steps: &steps,
		Trigger: &automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{HTTPMethod: "POST", Path: "orders/new",
			Authentication: &automation.Authentication{Type: automation.AuthHeader, Name: "X-Key", Value: "k3y"},
			Signature:      &automation.Signature{Header: "X-Sig", Prefix: "sha256=", Secret: "custom-secret"}}}})
	if err != nil {
		t.Fatal(err)
	}

	// STANDARD was signed by nothing before the dashboard used the
	// domain's signer: its test events were refused with a 401.
	stdName := "Standard"
	standard, err := e.svc.CreateFlow(ctx, e.p, automation.FlowInput{Name: &stdName, Engine: &eng, Steps: &steps,
		Trigger: &automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{HTTPMethod: "POST",
			Signature: &automation.Signature{Preset: automation.PresetStandard, Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}}})
	if err != nil {
		t.Fatal(err)
	}

	for _, f := range []automation.Flow{signed, guarded, standard} {
		path := "/ui/flows/" + f.ID
		// The form is there, prefilled with {} before any sample.
		wantPage(t, b.get(path), http.StatusOK, `id="test-body"`, `>{}</textarea>`, "Send test event")
		p := b.post(path, path+"/send-test", url.Values{"body": {`{"name": "Ada"}`}})
		m := runLocationRE.FindStringSubmatch(p.header.Get("Location"))
		if p.status != http.StatusSeeOther || m == nil {
			t.Fatalf("%s: send test = %d %q: %s", f.Name, p.status, p.header.Get("Location"), p.body)
		}
		run, err := e.svc.Run(ctx, e.p, f.ID, m[1])
		if err != nil || string(run.Trigger.Body) != `{"name":"Ada"}` {
			t.Fatalf("%s: the run of the test event: %+v, %v", f.Name, run.Trigger, err)
		}
		wantPage(t, b.get(p.header.Get("Location")), http.StatusOK, "Test event sent through the test URL", `class="flow-picture"`)
		// The sample is now that event, and the form offers it again.
		wantPage(t, b.get(path), http.StatusOK, "(from the captured sample)", quoteHTML(`"name": "Ada"`))
	}

	// A GET webhook takes the object's fields as its query.
	getName, getEng := "Lookup", automation.WorkflowBuilder
	lookup, err := e.svc.CreateFlow(ctx, e.p, automation.FlowInput{Name: &getName, Engine: &getEng, Steps: &steps,
		Trigger: &automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{HTTPMethod: "GET", Path: "lookup"}}})
	if err != nil {
		t.Fatal(err)
	}
	lp := "/ui/flows/" + lookup.ID
	m := runLocationRE.FindStringSubmatch(b.post(lp, lp+"/send-test", url.Values{"body": {`{"name": "Ada", "n": 2}`}}).header.Get("Location"))
	if m == nil {
		t.Fatal("a GET flow's test event started no run")
	}
	if run, err := e.svc.Run(ctx, e.p, lookup.ID, m[1]); err != nil || run.Trigger.Method != "GET" ||
		run.Trigger.Query["name"] != "Ada" || run.Trigger.Query["n"] != "2" {
		t.Errorf("the GET test event's trigger: %+v, %v", run.Trigger, err)
	}

	// Not JSON: refused where it is, the text kept.
	path := "/ui/flows/" + signed.ID
	wantPage(t, b.post(path, path+"/send-test", url.Values{"body": {"{\n  \"name\": Ada\n}"}}), http.StatusBadRequest,
		"not valid JSON at line 2, column 11", "  &#34;name&#34;: Ada")

	// A refusal of the acceptance is shown as a receiver answers it: the
	// owner's event comes from no address an allowlist names.
	if _, err := e.svc.SetWebhookSecurity(ctx, e.p, signed.ID, []string{"203.0.113.0/24"}); err != nil {
		t.Fatal(err)
	}
	wantPage(t, b.post(path, path+"/send-test", url.Values{"body": {`{}`}}), http.StatusUnprocessableEntity, "The webhook refused the test event: 403 IP_NOT_ALLOWED")
}

func quoteHTML(s string) string { return strings.ReplaceAll(s, `"`, "&#34;") }

// TestSendTestEventTooLarge: a body over the form's limit is refused as
// such, never sent as {}.
func TestSendTestEventTooLarge(t *testing.T) {
	e := hookEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	f := e.flow(t, e.p, "Big")
	path := "/ui/flows/" + f.ID
	big := `{"pad": "` + strings.Repeat("x", 70<<10) + `"}`
	wantPage(t, b.post(path, path+"/send-test", url.Values{"body": {big}}), http.StatusRequestEntityTooLarge, "more than the dashboard reads (64 KiB)")
	if l, err := e.svc.ListRuns(context.Background(), e.p, f.ID, automation.PageRequest{}); err != nil || len(l.Data) != 0 {
		t.Errorf("runs after a refused test event: %d, %v", len(l.Data), err)
	}
}

// receiveWebhook delivers td to f through the domain's acceptance, as a
// receiver would after reading the request: a run with that trigger.
func receiveWebhook(ctx context.Context, svc *automation.Service, f automation.Flow, td automation.TriggerData) (automation.Run, error) {
	adm, err := svc.Admit(ctx, automation.Delivery{Flow: f})
	if err != nil {
		return automation.Run{}, err
	}
	headers := map[string][]string{}
	for k, v := range td.Headers {
		headers[k] = []string{v}
	}
	query := map[string][]string{}
	for k, v := range td.Query {
		query[k] = []string{v}
	}
	ans, err := adm.Accept(ctx, automation.Body{Raw: td.Body, Method: td.Method, Path: td.Path, Headers: headers, Query: query,
		Decoded: automation.DecodedBody{Body: td.Body}})
	return ans.Run, err
}
