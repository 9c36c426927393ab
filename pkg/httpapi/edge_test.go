package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/datadir"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/sqlitestore"
)

// Point 5 of issue 7: paths that clients normalise to another flow's path
// are refused at save time, naming the field.
func TestWebhookPathNormalisation(t *testing.T) {
	srv, key := newTestServer(t)
	for _, p := range []string{
		"hooks/../admin", "hooks/./admin", "..", ".", "hooks/..", "a//b", "a%2Fb", "a%2e%2e/b",
		`a\b`, "a\x00b", "a\nb", "a\tb", "caf\u00e9", strings.Repeat("a", 201),
	} {
		t.Run(p, func(t *testing.T) {
			quoted, _ := json.Marshal(p)
			body := strings.Replace(workflowFlow("PATH", "POST", "", ""), `"PATH"`, string(quoted), 1)
			e := call(t, srv, "POST", "/api/v1/flows", key, body).wantError(t, http.StatusBadRequest, "VALIDATION_ERROR")
			if !strings.Contains(e.Message, "trigger.webhook.path") {
				t.Errorf("message %q does not name trigger.webhook.path", e.Message)
			}
			if len(e.Message) > 400 {
				t.Errorf("message is %d bytes: the path is echoed whole", len(e.Message))
			}
		})
	}
	// Names with dots inside a segment stay valid.
	createFlow(t, srv, key, workflowFlow("v1.2/..hidden/x..y", "POST", "", ""))
}

// The receiver refuses the same forms without a lookup, also when they
// arrive escaped: the path is judged once decoded, so "%2E%2E" or "%2F%2F"
// reach no flow, and a double escape ("%252F") is not decoded twice.
func TestWorkflowHookRefusesUncleanPaths(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	h.activeFlow(t, h.key, workflowFlow("hooks/admin", "POST", "", ""))
	h.activeFlow(t, h.key, workflowFlow("a/b", "POST", "", ""))
	for _, p := range []string{"/webhook/hooks/../admin", "/webhook/hooks/x/../../hooks/admin", "/webhook/a%252Fb",
		"/webhook/hooks/x/%2E%2E/admin", "/webhook/hooks%2Fx%2F..%2Fadmin", "/webhook/a%2F%2Fb", "/webhook/a%5Cb",
		"/webhook/a%00b", "/webhook/./a/b", "/webhook/a//b", `/webhook/a\b`} {
		req, err := http.NewRequest("POST", h.workflow.URL, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = p // sent exactly as written
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("POST %s = %d %s, want a JSON 404", p, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	if n := h.runs.count(); n != 0 {
		t.Errorf("%d runs started, want none", n)
	}
}

// TestWorkflowHookDecodesEscapedPath: generated API clients escape the
// slashes of a path (/webhook/a%2Fb); the receiver decodes the path once
// before routing, so the flow of a/b answers both forms, on the live and
// the Test Trigger URL, and its run records the decoded path. Before, the
// escaped form was a 404.
func TestWorkflowHookDecodesEscapedPath(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	id := h.activeFlow(t, h.key, workflowFlow("a/b", "POST", "", ""))
	h.activeFlow(t, h.key, workflowFlow("users/:id/orders", "POST", "", ""))
	send := func(srv *testServer, p string) result {
		t.Helper()
		req, err := http.NewRequest("POST", srv.URL, strings.NewReader(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = p // sent exactly as written
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return result{status: resp.StatusCode, header: resp.Header, body: body}
	}
	plain := send(h.workflow, "/webhook/a/b").started(t)
	for _, p := range []string{"/webhook/a%2Fb", "/webhook/a%2fb", "/webhook/%61%2F%62"} {
		r := send(h.workflow, p)
		if r.status != http.StatusOK {
			t.Fatalf("POST %s = %d %s, want 200 from the flow of a/b", p, r.status, r.body)
		}
		run := h.run(t, id, r.started(t))
		if run.Trigger.Path != "/webhook/a/b" {
			t.Errorf("POST %s: trigger.path %q, want /webhook/a/b", p, run.Trigger.Path)
		}
	}
	if run := h.run(t, id, plain); run.Trigger.Path != "/webhook/a/b" {
		t.Errorf("trigger.path %q", run.Trigger.Path)
	}
	// A parameter path: the escaped slashes are segment separators.
	if r := send(h.workflow, "/webhook/users%2F42%2Forders"); r.status != http.StatusOK {
		t.Errorf("POST users%%2F42%%2Forders = %d %s, want 200", r.status, r.body)
	}
	// Decoded once only: a%252Fb is the path "a%2Fb", which no flow has.
	send(h.workflow, "/webhook/a%252Fb").wantError(t, http.StatusNotFound, "WEBHOOK_NOT_FOUND")
	// The Test Trigger URL decodes the same way.
	if r := call(t, h.api, "POST", "/api/v1/flows/"+id+"/webhook/test", h.key, ""); r.status != http.StatusOK {
		t.Fatalf("arm the Test Trigger: %d %s", r.status, r.body)
	}
	if r := send(h.workflow, "/webhook-test/a%2Fb"); r.status != http.StatusOK {
		t.Errorf("POST /webhook-test/a%%2Fb = %d %s, want 200", r.status, r.body)
	}
}

// A 100,000-character ID is not echoed whole.
func TestLongIDNotEchoed(t *testing.T) {
	srv, key := newTestServer(t)
	long := strings.Repeat("x", 100_000)
	for _, p := range []string{"/api/v1/flows/" + long, "/api/v1/connections/" + long, "/api/v1/flows/" + long + "/runs/" + long} {
		r := call(t, srv, "GET", p, key, "")
		e := r.wantError(t, http.StatusNotFound, "")
		if len(r.body) > 400 || !strings.Contains(e.Message, "…") {
			t.Errorf("GET %.40s…: %d-byte answer, message %q", p, len(r.body), e.Message)
		}
	}
}

// A database that refuses writes makes management writes a 503 with
// Retry-After and the JSON envelope, while reads still answer.
func TestReadOnlyStoreIs503(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := datadir.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	_, key := flowtest.New(t, flowtest.Options{Dir: d}).Project(t, "ro", automation.PlanEnterprise)
	d.Close()

	ro, err := datadir.Open(ctx, dir, sqlitestore.QueryOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	logs := &syncBuffer{}
	srv := serve(t, NewAPI(flowtest.New(t, flowtest.Options{Dir: ro}).Svc, slog.New(slog.NewJSONHandler(logs, nil))))

	r := call(t, srv, "POST", "/api/v1/flows", key, flowBuilderBody)
	r.wantError(t, http.StatusServiceUnavailable, "STORE_UNAVAILABLE")
	if r.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	if strings.Contains(string(r.body), "readonly") {
		t.Errorf("answer leaks the cause: %s", r.body)
	}
	if !strings.Contains(logs.String(), "readonly") {
		t.Errorf("the log lacks the cause: %s", logs.String())
	}
	var l listView
	call(t, srv, "GET", "/api/v1/flows", key, "").into(t, http.StatusOK, &l)
}
