package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A flow with every flow-language construct saves, reads back and runs
// through the API, and the run with its nested results, skipped steps and
// onError results matches the OpenAPI document (the test client validates
// every exchange).
func TestFlowLanguageThroughTheAPI(t *testing.T) {
	h := newHookEnv(t, HookConfig{MaxBody: 1 << 20})
	srv, key := h.api, h.key
	crm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "bad") {
			w.WriteHeader(http.StatusBadRequest)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer crm.Close()
	def := fmt.Sprintf(`{"name": "everything", "engine": "FLOW_BUILDER", "steps": [
		{"name": "skipped", "type": "SET", "when": "false", "values": {}},
		{"name": "route", "type": "SWITCH", "cases": [{"when": "trigger.body.kind == 'order'", "steps": [
			{"name": "each", "type": "FOR_EACH", "items": "trigger.body.items", "concurrency": 2, "steps": [
				{"name": "line", "type": "HTTP", "method": "POST", "url": "%s/{{ item }}", "body": {"i": "{{ index }}"}}]}]}],
		 "default": [{"name": "other", "type": "SET", "values": {"k": "{{ trigger.body.kind }}"}}]},
		{"name": "remember", "type": "STORE", "set": {"last": "{{ trigger.body.kind }}"}, "delete": ["old"]},
		{"name": "pause", "type": "WAIT", "duration": "1h", "when": "trigger.body.kind == 'later'"}],
		"onError": [{"name": "alert", "type": "SET", "values": {"failed": "{{ error.step }}"}}]}`, crm.URL)
	var f struct {
		ID      string
		Steps   []map[string]any
		OnError []map[string]any
	}
	call(t, srv, "POST", "/api/v1/flows", key, def).into(t, 201, &f)
	if len(f.Steps) != 4 || len(f.OnError) != 1 || f.Steps[1]["cases"] == nil {
		t.Fatalf("created %+v", f)
	}
	var enabled map[string]any
	call(t, srv, "POST", "/api/v1/flows/"+f.ID+"/enable", key, "").into(t, 200, &enabled)
	fire := func(body string) map[string]any {
		runID := call(t, h.engine, "POST", "/api/v1/webhooks/"+f.ID, "", body).started(t)
		drain(t, h.svc, h.runs)
		var r map[string]any
		call(t, srv, "GET", "/api/v1/flows/"+f.ID+"/runs/"+runID, key, "").into(t, 200, &r)
		return r
	}
	r := fire(`{"kind": "order", "items": ["a", "b"]}`)
	raw, _ := json.Marshal(r)
	if r["status"] != "SUCCEEDED" || !strings.Contains(string(raw), `"iterations":[{"index":0`) || !strings.Contains(string(raw), `"name":"skipped","status":"SKIPPED"`) {
		t.Errorf("run %s", raw)
	}
	r = fire(`{"kind": "order", "items": ["ok", "bad"]}`)
	raw, _ = json.Marshal(r)
	if r["status"] != "FAILED" || !strings.Contains(string(raw), `"name":"alert","output":{"failed":"route"}`) || !strings.Contains(string(raw), `"failed":"route"`) {
		t.Errorf("failed run %s", raw)
	}
	r = fire(`{"kind": "later"}`)
	if r["status"] != "RUNNING" || r["nextAttemptAt"] == nil {
		t.Errorf("waiting run %v", r)
	}
	// Save-time errors point into the nesting.
	bad := `{"name": "bad", "engine": "FLOW_BUILDER", "steps": [{"name": "route", "type": "SWITCH", "cases": [
		{"when": "true", "steps": [{"name": "a", "type": "SET", "values": {}}]},
		{"when": "true", "steps": [{"name": "notify", "type": "HTTP", "method": "POST"}]}]}]}`
	e := call(t, srv, "POST", "/api/v1/flows", key, bad).wantError(t, 400, "VALIDATION_ERROR")
	if !strings.Contains(e.Message, `steps[0].cases[1].steps[0].url is required for HTTP (step "notify")`) {
		t.Errorf("message %q", e.Message)
	}
}
