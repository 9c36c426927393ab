package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// TestAuthentication: every management route refuses requests without a
// valid bearer key with the same 401, before touching any resource.
func TestAuthentication(t *testing.T) {
	srv, key := newTestServer(t)
	f := createFlow(t, srv, key, flowBuilderBody)
	var c automation.Connection
	call(t, srv, "POST", "/api/v1/connections", key, connectionBody("c")).into(t, 201, &c)

	routes := []struct{ method, path, body string }{
		{"GET", "/api/v1/flows", ""},
		{"POST", "/api/v1/flows", flowBuilderBody},
		{"GET", "/api/v1/flows/" + f.ID, ""},
		{"POST", "/api/v1/flows/" + f.ID, `{"name":"changed"}`},
		{"POST", "/api/v1/flows/" + f.ID + "/enable", ""},
		{"POST", "/api/v1/flows/" + f.ID + "/disable", ""},
		{"GET", "/api/v1/flows/" + f.ID + "/webhook", ""},
		{"GET", "/api/v1/flows/" + f.ID + "/webhook/security", ""},
		{"POST", "/api/v1/flows/" + f.ID + "/webhook/security", `{"allowedIPs":["10.0.0.1"]}`},
		{"GET", "/api/v1/flows/" + f.ID + "/runs", ""},
		{"GET", "/api/v1/flows/" + f.ID + "/runs/run_x", ""},
		{"POST", "/api/v1/flows/" + f.ID + "/runs/run_x/retry", ""},
		{"GET", "/api/v1/connections", ""},
		{"POST", "/api/v1/connections", connectionBody("x")},
		{"GET", "/api/v1/connections/" + c.ID, ""},
		{"DELETE", "/api/v1/connections/" + c.ID, ""},
		{"DELETE", "/api/v1/flows/" + f.ID, ""},
		{"GET", "/api/v1/flows/flw_unknown", ""},
	}
	auths := []struct{ name, header string }{
		{"missing", ""},
		{"empty bearer", "Bearer "},
		{"bearer without key", "Bearer"},
		{"unknown key", "Bearer fsk_" + strings.Repeat("a", 52)},
		{"not a key", "Bearer hello"},
		{"another scheme", "Basic " + key},
		{"key without scheme", key},
	}
	for _, rt := range routes {
		for _, a := range auths {
			t.Run(rt.method+" "+rt.path+"/"+a.name, func(t *testing.T) {
				hdr := []string{"Authorization: " + a.header}
				r := call(t, srv, rt.method, rt.path, "", rt.body, hdr...)
				r.wantError(t, 401, "UNAUTHORIZED")
				if got := r.header.Get("WWW-Authenticate"); got != "Bearer" {
					t.Errorf("WWW-Authenticate = %q", got)
				}
			})
		}
	}
	// Nothing changed.
	var g flowView
	call(t, srv, "GET", "/api/v1/flows/"+f.ID, key, "").into(t, 200, &g)
	call(t, srv, "GET", "/api/v1/connections/"+c.ID, key, "").into(t, 200, &c)
	var l listView
	call(t, srv, "GET", "/api/v1/flows", key, "").into(t, 200, &l)
	if g.Name != "Deploy" || len(l.Data) != 1 {
		t.Errorf("unauthenticated requests changed data: %+v, %d flows", g, len(l.Data))
	}
	// The scheme is case-insensitive.
	call(t, srv, "GET", "/api/v1/flows", "", "", "Authorization: bearer "+key).into(t, 200, &l)
}

func TestRouting(t *testing.T) {
	srv, key := newTestServer(t)
	tests := []struct {
		name, method, path, key string
		wantStatus              int
		wantCode, wantAllow     string
	}{
		{"unknown route", "GET", "/api/v1/nothing", "", 404, "NOT_FOUND", ""},
		{"unknown route with key", "GET", "/api/v1/nothing", key, 404, "NOT_FOUND", ""},
		{"root", "GET", "/", "", 404, "NOT_FOUND", ""},
		{"unclean path", "GET", "/api/v1//flows", key, 404, "NOT_FOUND", ""},
		{"trailing slash", "GET", "/api/v1/flows/", key, 404, "NOT_FOUND", ""},
		{"runs of an unknown flow", "GET", "/api/v1/flows/flw_x/runs", key, 404, "FLOW_NOT_FOUND", ""},
		{"GET retry", "GET", "/api/v1/flows/flw_x/runs/run_x/retry", "", 405, "METHOD_NOT_ALLOWED", "POST"},
		{"PUT flows", "PUT", "/api/v1/flows", "", 405, "METHOD_NOT_ALLOWED", "GET, HEAD, POST"},
		{"DELETE flows", "DELETE", "/api/v1/flows", key, 405, "METHOD_NOT_ALLOWED", "GET, HEAD, POST"},
		{"PATCH a flow", "PATCH", "/api/v1/flows/flw_x", "", 405, "METHOD_NOT_ALLOWED", "DELETE, GET, HEAD, POST"},
		{"GET enable", "GET", "/api/v1/flows/flw_x/enable", "", 405, "METHOD_NOT_ALLOWED", "POST"},
		{"DELETE webhook", "DELETE", "/api/v1/flows/flw_x/webhook", "", 405, "METHOD_NOT_ALLOWED", "GET, HEAD"},
		{"POST a connection", "POST", "/api/v1/connections/con_x", "", 405, "METHOD_NOT_ALLOWED", "DELETE, GET, HEAD"},
		{"POST openapi", "POST", "/api/v1/openapi.json", "", 405, "METHOD_NOT_ALLOWED", "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, srv, tt.method, tt.path, tt.key, "")
			r.wantError(t, tt.wantStatus, tt.wantCode)
			if got := r.header.Get("Allow"); got != tt.wantAllow {
				t.Errorf("Allow = %q, want %q", got, tt.wantAllow)
			}
		})
	}
}

func TestCommonHeaders(t *testing.T) {
	srv, key := newTestServer(t)
	hexID := regexp.MustCompile(`^[0-9a-f]{16}$`)
	tests := []struct {
		name, method, path, key string
		hdr                     []string
		wantID                  string // "" for a generated one
	}{
		{"success", "GET", "/api/v1/flows", key, nil, ""},
		{"error", "GET", "/api/v1/flows", "", nil, ""},
		{"not found", "GET", "/nope", "", nil, ""},
		{"client's ID kept", "GET", "/api/v1/flows", key, []string{"X-Request-Id: trace-42.a_B"}, "trace-42.a_B"},
		{"unsafe ID replaced", "GET", "/api/v1/flows", key, []string{"X-Request-Id: a\"b{c}"}, ""},
		{"long ID replaced", "GET", "/api/v1/flows", key, []string{"X-Request-Id: " + strings.Repeat("a", 65)}, ""},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, srv, tt.method, tt.path, tt.key, "", tt.hdr...)
			id := r.header.Get("X-Request-Id")
			if tt.wantID != "" && id != tt.wantID || tt.wantID == "" && !hexID.MatchString(id) {
				t.Errorf("X-Request-Id = %q, want %q or 16 hex characters", id, tt.wantID)
			}
			if tt.wantID == "" && seen[id] {
				t.Errorf("request ID %s repeats", id)
			}
			seen[id] = true
			if r.header.Get("Cache-Control") != "no-store" || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("Cache-Control %q, Content-Type %q", r.header.Get("Cache-Control"), r.header.Get("Content-Type"))
			}
			if r.status >= 400 && r.errorOf(t).RequestID != id {
				t.Errorf("error body's requestId is not %s", id)
			}
		})
	}
}

// TestAccessLog: one JSON line per request with the route, status, size,
// duration, request ID and project, and never the key.
func TestAccessLog(t *testing.T) {
	srv, key := newTestServer(t)
	f := createFlow(t, srv, key, flowBuilderBody)
	logs := srv.log
	before := len(strings.Split(strings.TrimSpace(logs.String()), "\n"))

	r := call(t, srv, "GET", "/api/v1/flows/"+f.ID+"?limit=1", key, "", "X-Request-Id: log-test-1")
	call(t, srv, "GET", "/api/v1/nope", "", "")
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")[before:]
	if len(lines) != 2 {
		t.Fatalf("%d log lines for 2 requests: %q", len(lines), lines)
	}
	var line struct {
		Msg, Method, Route, RequestID, ProjectID string
		Status                                   int
		Bytes                                    int
		DurationMs                               *float64
	}
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line.Msg != "request" || line.Method != "GET" || line.Route != "GET /api/v1/flows/{flowId}" ||
		line.Status != 200 || line.Bytes != len(r.body) || line.DurationMs == nil ||
		line.RequestID != "log-test-1" || !strings.HasPrefix(line.ProjectID, "prj_") {
		t.Errorf("access line %s", lines[0])
	}
	if err := json.Unmarshal([]byte(lines[1]), &line); err != nil {
		t.Fatal(err)
	}
	if line.Route != "/api/v1/nope" || line.Status != 404 {
		t.Errorf("access line %s", lines[1])
	}
	if strings.Contains(logs.String(), key) || strings.Contains(logs.String(), "Authorization") {
		t.Errorf("logs hold the key or headers")
	}
}

// faultStore injects failures into a real store.
type faultStore struct {
	automation.Store
	flow func() error
}

func (s faultStore) Flow(ctx context.Context, project, id string) (automation.Flow, error) {
	if err := s.flow(); err != nil {
		return automation.Flow{}, err
	}
	return s.Store.Flow(ctx, project, id)
}

// TestInternalErrors: a failing or panicking backend is a bare 500 that
// reveals nothing, logged with the request ID.
func TestInternalErrors(t *testing.T) {
	tests := []struct {
		name       string
		fault      func() error
		wantStatus int
		wantCode   string
		wantLog    string
	}{
		{"store error", func() error { return errors.New("disk on fire at /var/db") }, 500, "INTERNAL", "disk on fire"},
		{"panic", func() error { panic("boom in store") }, 500, "INTERNAL", "boom in store"},
		{"unavailable", func() error {
			return &automation.Error{Kind: automation.ErrUnavailable, Code: "UNAVAILABLE", Message: "try again"}
		}, 503, "UNAVAILABLE", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := flowtest.New(t, flowtest.Options{Store: func(s automation.Store) automation.Store { return faultStore{s, tt.fault} }})
			_, key := env.Project(t, "p", automation.PlanFree)
			logs := &syncBuffer{}
			srv := serve(t, NewAPI(env.Svc, slog.New(slog.NewJSONHandler(logs, nil))))

			r := call(t, srv, "GET", "/api/v1/flows/flw_x", key, "")
			e := r.wantError(t, tt.wantStatus, tt.wantCode)
			if tt.wantStatus == 500 && (e.Message != "internal error" || strings.Contains(string(r.body), tt.wantLog)) {
				t.Errorf("500 body %s reveals internals", r.body)
			}
			if tt.wantLog != "" && !(strings.Contains(logs.String(), tt.wantLog) && strings.Contains(logs.String(), `"requestId":"`+e.RequestID+`"`)) {
				t.Errorf("log %s lacks the cause or the request ID", logs)
			}
			if !strings.Contains(logs.String(), fmt.Sprintf(`"status":%d`, tt.wantStatus)) {
				t.Errorf("access log lacks status %d: %s", tt.wantStatus, logs)
			}
		})
	}
}
