package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// An HTTP step with paginate saves (maxPages defaulted), runs over a paged
// API through the receiver, and its output matches the OpenAPI document;
// bad paginate fields are 400s naming the field.
func TestPaginateThroughTheAPI(t *testing.T) {
	h := newHookEnv(t, HookConfig{MaxBody: 1 << 20})
	srv, key := h.api, h.key
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from, _ := strconv.Atoi(r.URL.Query().Get("after"))
		var items []int
		for i := from; i < min(from+2, 5); i++ {
			items = append(items, i)
		}
		var next any
		if from+2 < 5 {
			next = from + 2
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"data": items, "next": next})
	}))
	defer api.Close()
	def := fmt.Sprintf(`{"name": "paged", "engine": "FLOW_BUILDER", "steps": [
		{"name": "list", "type": "HTTP", "url": "%s/items", "paginate": {"next": "response.body.next", "param": "after", "items": "response.body.data"}}]}`, api.URL)
	var f struct {
		ID    string
		Steps []map[string]any
	}
	call(t, srv, "POST", "/api/v1/flows", key, def).into(t, 201, &f)
	if p, _ := f.Steps[0]["paginate"].(map[string]any); p["maxPages"] != float64(10) {
		t.Errorf("saved paginate %v, want maxPages 10 by default", f.Steps[0]["paginate"])
	}
	var enabled map[string]any
	call(t, srv, "POST", "/api/v1/flows/"+f.ID+"/enable", key, "").into(t, 200, &enabled)
	runID := call(t, h.engine, "POST", "/api/v1/webhooks/"+f.ID, "", `{}`).started(t)
	drain(t, h.svc, h.runs)
	var r struct {
		Status string
		Steps  []struct{ Output json.RawMessage }
	}
	call(t, srv, "GET", "/api/v1/flows/"+f.ID+"/runs/"+runID, key, "").into(t, 200, &r)
	if r.Status != "SUCCEEDED" || len(r.Steps) != 1 || string(r.Steps[0].Output) != `{"items":[0,1,2,3,4],"pages":3}` {
		t.Fatalf("run %s %+v", r.Status, r.Steps)
	}

	tests := []struct{ name, paginate, want string }{
		{"maxPages over 100", `{"next": "response.body.next", "items": "response.body.data", "maxPages": 101}`, "steps[0].paginate.maxPages 101: use 1 to 100"},
		{"maxPages negative", `{"next": "response.body.next", "items": "response.body.data", "maxPages": -1}`, "steps[0].paginate.maxPages -1"},
		{"no next", `{"items": "response.body.data"}`, "steps[0].paginate.next is required"},
		{"no items", `{"next": "response.body.next"}`, "steps[0].paginate.items is required"},
		{"bad next", `{"next": "response.body.(", "items": "response.body.data"}`, "steps[0].paginate.next: expression"},
		{"unknown name", `{"next": "reply.next", "items": "response.body.data"}`, "steps[0].paginate.next: expression"},
		{"blank param", `{"next": "response.body.next", "param": " ", "items": "response.body.data"}`, "steps[0].paginate.param is required and must not be blank"},
		{"unknown field", `{"next": "response.body.next", "items": "response.body.data", "limit": 3}`, "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"name": "bad", "engine": "FLOW_BUILDER", "steps": [{"name": "list", "type": "HTTP", "url": "https://api.example.com/items", "paginate": %s}]}`, tt.paginate)
			e := call(t, srv, "POST", "/api/v1/flows", key, body).wantError(t, 400, "")
			if !strings.Contains(e.Message, tt.want) {
				t.Errorf("message %q, want %q", e.Message, tt.want)
			}
		})
	}
	e := call(t, srv, "POST", "/api/v1/flows", key, `{"name": "bad", "engine": "FLOW_BUILDER", "steps": [
		{"name": "s", "type": "SET", "values": {}, "paginate": {"next": "response.body.next", "items": "response.body.data"}}]}`).wantError(t, 400, "VALIDATION_ERROR")
	if !strings.Contains(e.Message, "paginate does not apply to SET steps") {
		t.Errorf("paginate on SET: %q", e.Message)
	}
	// `response` is only for paginate: elsewhere it is an unknown name.
	e = call(t, srv, "POST", "/api/v1/flows", key, `{"name": "bad", "engine": "FLOW_BUILDER", "steps": [
		{"name": "f", "type": "FILTER", "condition": "response.status == 200"}]}`).wantError(t, 400, "VALIDATION_ERROR")
	if !strings.Contains(e.Message, "unknown name response") {
		t.Errorf("response in a FILTER: %q", e.Message)
	}
}
