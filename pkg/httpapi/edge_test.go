package httpapi

import (
	"context"
	"encoding/json"
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
