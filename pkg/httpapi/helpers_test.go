package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// result is one answer of the API.
type result struct {
	status int
	header http.Header
	body   []byte
}

// call sends a request through the validating client. key "" sends no
// Authorization header; a non-empty body is sent as application/json unless
// hdr says otherwise. hdr holds "Name: value" lines.
func call(t *testing.T, srv *testServer, method, path, key, body string, hdr ...string) result {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range hdr {
		name, value, _ := strings.Cut(h, ":")
		if value = strings.TrimSpace(value); value == "" {
			req.Header.Del(name)
		} else {
			req.Header.Set(name, value)
		}
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return result{status: resp.StatusCode, header: resp.Header, body: b}
}

// errorOf decodes an error envelope, failing the test if r is not one.
func (r result) errorOf(t *testing.T) errorDetail {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(r.body, &e); err != nil || e.Error.Code == "" {
		t.Fatalf("not an error envelope (%d): %s", r.status, r.body)
	}
	if e.Error.RequestID == "" || e.Error.RequestID != r.header.Get("X-Request-Id") {
		t.Errorf("requestId %q, X-Request-Id %q: want equal and set", e.Error.RequestID, r.header.Get("X-Request-Id"))
	}
	return e.Error
}

// wantError asserts status and code.
func (r result) wantError(t *testing.T, status int, code string) errorDetail {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	e := r.errorOf(t)
	if code != "" && e.Code != code {
		t.Errorf("code = %q, want %q (message %q)", e.Code, code, e.Message)
	}
	return e
}

// into decodes a success body after checking the status.
func (r result) into(t *testing.T, status int, v any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

// flowView is a flow as clients see it.
type flowView struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Status      string          `json:"status"`
	Engine      string          `json:"engine"`
	TriggerType string          `json:"triggerType"`
	Trigger     json.RawMessage `json:"trigger"`
}

type listView struct {
	Data    []flowView `json:"data"`
	Cursor  *string    `json:"cursor"`
	HasMore bool       `json:"hasMore"`
}

// createFlow makes a flow through the API and returns it.
func createFlow(t *testing.T, srv *testServer, key, body string) flowView {
	t.Helper()
	var f flowView
	call(t, srv, "POST", "/api/v1/flows", key, body).into(t, http.StatusCreated, &f)
	return f
}

const (
	flowBuilderBody = `{"name":"Deploy","engine":"FLOW_BUILDER","description":"d"}`
	scheduleBody    = `{"name":"Nightly","engine":"FLOW_BUILDER","trigger":{"type":"SCHEDULE","schedule":{"cron":"0 3 * * *"}}}`
)
