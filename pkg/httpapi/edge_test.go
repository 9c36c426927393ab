package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/datadir"
	"flowservice/pkg/engine"
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

// The receiver refuses the same forms, and any percent-escape, without a
// lookup: "%2F" must not decode into another flow's path.
func TestWorkflowHookRefusesUncleanPaths(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	h.activeFlow(t, h.key, workflowFlow("hooks/admin", "POST", "", ""))
	h.activeFlow(t, h.key, workflowFlow("a/b", "POST", "", ""))
	for _, p := range []string{"/webhook/hooks/../admin", "/webhook/hooks/x/../../hooks/admin", "/webhook/a%2Fb",
		"/webhook/hooks/%61dmin", "/webhook/./a/b", "/webhook/a//b", `/webhook/a\b`} {
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
	svc := newServiceOver(t, d)
	p, err := svc.CreateProject(ctx, "ro", automation.PlanEnterprise)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := svc.CreateAPIKey(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()

	ro, err := datadir.Open(ctx, dir, sqlitestore.QueryOnly())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ro.Close() })
	logs := &syncBuffer{}
	srv := httptest.NewServer(NewAPI(newServiceOver(t, ro), slog.New(slog.NewJSONHandler(logs, nil))))
	t.Cleanup(srv.Close)
	srv.Client().Transport = newValidatingTransport(t, srv.Client().Transport)

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

// newServiceOver builds a Service over a data directory, as flowd does.
func newServiceOver(t *testing.T, d *datadir.Dir) *automation.Service {
	t.Helper()
	runs := &testQueue{store: d.Store}
	rt := &automation.RunRuntime{Runs: d.Store, Queue: runs, NewExecutor: flowtest.NewExecutor}
	svc, err := automation.NewService(automation.Config{
		Store: d.Store, Secrets: d.Secrets, Checker: engine.Checker{}, Runtime: rt,
		CursorKey: bytes.Repeat([]byte("k"), 32), EngineURL: "http://engine.test", WorkflowURL: "http://workflow.test",
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}
