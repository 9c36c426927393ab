package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestErrorsSayWhere: a JSON syntax error names its line and column, an
// unknown field its step, a route conflict the flow of the same project
// that holds the path (and no flow of another project), and GET / says
// where the API and the dashboard are.
func TestErrorsSayWhere(t *testing.T) {
	t.Parallel() // its own server and database
	srv, key := newTestServer(t)
	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantCode, wantInMessage  string
	}{
		{"syntax error", "POST", "/api/v1/flows", "{\n  \"name\": \"x\",\n  \"engine\": FLOW_BUILDER\n}",
			400, "INVALID_JSON", "syntax error at line 3, column 13"},
		{"unknown step field", "POST", "/api/v1/flows", `{"name":"x","engine":"FLOW_BUILDER","steps":[
			{"name":"a","type":"SET","values":{}},
			{"name":"notify","type":"HTTP","ulr":"https://example.com"}]}`,
			400, "UNKNOWN_FIELD", `steps[1] (notify): unknown field "ulr"`},
		{"unknown field in a case", "POST", "/api/v1/flows", `{"name":"x","engine":"FLOW_BUILDER","steps":[
			{"name":"route","type":"SWITCH","cases":[{"when":"true","steps":[{"name":"in","type":"SET","valeus":{}}]}]}]}`,
			400, "UNKNOWN_FIELD", `steps[0] (route).cases[0].steps[0] (in): unknown field "valeus"`},
		{"inexact case", "POST", "/api/v1/flows", `{"name":"x","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","Values":{}}]}`,
			400, "UNKNOWN_FIELD", `steps[0] (s): unknown field "Values"`},
		{"root", "GET", "/", "", 404, "NOT_FOUND", "routes are under /api/v1/ (document: GET /api/v1/openapi.json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := call(t, srv, tt.method, tt.path, key, tt.body).wantError(t, tt.wantStatus, tt.wantCode)
			if !strings.Contains(e.Message, tt.wantInMessage) {
				t.Errorf("message %q lacks %q", e.Message, tt.wantInMessage)
			}
		})
	}

	hook := func(name string) string {
		return `{"name":"` + name + `","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST","path":"orders/new"}}}`
	}
	holder := createFlow(t, srv, key, hook("Orders"))
	e := call(t, srv, "POST", "/api/v1/flows", key, hook("Orders copy")).wantError(t, http.StatusConflict, "ROUTE_CONFLICT")
	if !strings.Contains(e.Message, `the flow "Orders" (`+holder.ID+`) of this project`) {
		t.Errorf("a route conflict in the same project does not name the holder: %q", e.Message)
	}
	other := newProjectKey(t, srv, "FREE")
	e = call(t, srv, "POST", "/api/v1/flows", other, hook("Intruder")).wantError(t, http.StatusConflict, "ROUTE_CONFLICT")
	if strings.Contains(e.Message, holder.ID) || strings.Contains(e.Message, "Orders") {
		t.Errorf("a route conflict across projects names the holder: %q", e.Message)
	}
}
