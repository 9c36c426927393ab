package httpapi

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// externalKey is the credential the tests store; no response may hold it.
const externalKey = "ext-key-7f3a9c1d5e"

func connectionBody(name string) string {
	return `{"name":"` + name + `","app":"slack","type":"API_KEY","value":{"apiKey":"` + externalKey + `"}}`
}

func TestConnectionLifecycle(t *testing.T) {
	srv, key := newTestServer(t)
	noKey := func(t *testing.T, r result) {
		t.Helper()
		if bytes.Contains(r.body, []byte(externalKey)) {
			t.Errorf("response holds the credential: %s", r.body)
		}
	}

	r := call(t, srv, "POST", "/api/v1/connections", key, connectionBody("Slack"))
	noKey(t, r)
	var c automation.Connection
	r.into(t, http.StatusCreated, &c)
	if !strings.HasPrefix(c.ID, "con_") || c.Name != "Slack" || c.App != "slack" || c.Type != "API_KEY" || c.Status != "ACTIVE" {
		t.Fatalf("created %+v", c)
	}
	path := "/api/v1/connections/" + c.ID

	r = call(t, srv, "GET", path, key, "")
	noKey(t, r)
	var got automation.Connection
	r.into(t, 200, &got)
	if got.ID != c.ID || got.Name != "Slack" {
		t.Errorf("get = %+v", got)
	}

	r = call(t, srv, "GET", "/api/v1/connections", key, "")
	noKey(t, r)
	var l automation.List[automation.Connection]
	r.into(t, 200, &l)
	if len(l.Data) != 1 || l.Data[0].ID != c.ID || l.HasMore || l.Cursor != nil {
		t.Errorf("list = %+v", l)
	}

	if r := call(t, srv, "DELETE", path, key, ""); r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("delete = %d %s", r.status, r.body)
	}
	call(t, srv, "GET", path, key, "").wantError(t, 404, "CONNECTION_NOT_FOUND")
	call(t, srv, "DELETE", path, key, "").wantError(t, 404, "CONNECTION_NOT_FOUND")

	if logs := srv.log.String(); strings.Contains(logs, externalKey) || strings.Contains(logs, key) {
		t.Errorf("logs hold a credential: %s", logs)
	}
}

func TestCreateConnectionErrors(t *testing.T) {
	srv, key := newTestServer(t)
	tests := []struct {
		name, body string
		hdr        []string
		wantStatus int
		wantCode   string
	}{
		{"oauth2", `{"name":"G","app":"google","type":"OAUTH2","value":{"apiKey":"` + externalKey + `"}}`, nil, 400, "VALIDATION_ERROR"},
		{"bad type", `{"name":"G","app":"google","type":"PASSWORD","value":{"apiKey":"` + externalKey + `"}}`, nil, 400, "VALIDATION_ERROR"},
		{"missing value", `{"name":"G","app":"google","type":"API_KEY"}`, nil, 400, "VALIDATION_ERROR"},
		{"unknown value field", `{"name":"G","app":"g","type":"API_KEY","value":{"apiKey":"` + externalKey + `","secret":"` + externalKey + `"}}`, nil, 400, "VALIDATION_ERROR"},
		{"value not an object", `{"name":"G","app":"g","type":"API_KEY","value":"` + externalKey + `"}`, nil, 400, "VALIDATION_ERROR"},
		{"unknown field", `{"name":"G","app":"g","type":"API_KEY","apiKey":"` + externalKey + `"}`, nil, 400, "UNKNOWN_FIELD"},
		{"bad JSON", `{"name":"G","value":{"apiKey":` + externalKey + `}}`, nil, 400, "INVALID_JSON"},
		{"wrong type", `{"name":["` + externalKey + `"],"app":"g","type":"API_KEY"}`, nil, 400, "INVALID_FIELD"},
		{"blank name", `{"name":" ","app":"g","type":"API_KEY","value":{"apiKey":"k"}}`, nil, 400, "VALIDATION_ERROR"},
		{"empty body", "", []string{"Content-Type: application/json"}, 400, "INVALID_JSON"},
		{"wrong media type", connectionBody("x"), []string{"Content-Type: text/plain"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"too large", `{"name":"x","app":"g","type":"API_KEY","value":{"apiKey":"` + strings.Repeat("k", MaxBodyBytes) + `"}}`, nil, 413, "BODY_TOO_LARGE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, srv, "POST", "/api/v1/connections", key, tt.body, tt.hdr...)
			r.wantError(t, tt.wantStatus, tt.wantCode)
			if bytes.Contains(r.body, []byte(externalKey)) {
				t.Errorf("error echoes the credential: %s", r.body)
			}
		})
	}
	var l automation.List[automation.Connection]
	call(t, srv, "GET", "/api/v1/connections", key, "").into(t, 200, &l)
	if len(l.Data) != 0 {
		t.Errorf("failed creates left %d connections", len(l.Data))
	}
}

func TestOtherProjectsConnection(t *testing.T) {
	srv, key := newTestServer(t)
	other := newProjectKey(t, srv, automation.PlanTeam)
	var c automation.Connection
	call(t, srv, "POST", "/api/v1/connections", key, connectionBody("Mine")).into(t, 201, &c)

	call(t, srv, "GET", "/api/v1/connections/"+c.ID, other, "").wantError(t, 404, "CONNECTION_NOT_FOUND")
	call(t, srv, "DELETE", "/api/v1/connections/"+c.ID, other, "").wantError(t, 404, "CONNECTION_NOT_FOUND")
	call(t, srv, "GET", "/api/v1/connections/con_unknown", other, "").wantError(t, 404, "CONNECTION_NOT_FOUND")
	var l automation.List[automation.Connection]
	call(t, srv, "GET", "/api/v1/connections", other, "").into(t, 200, &l)
	if len(l.Data) != 0 {
		t.Errorf("another project lists %+v", l.Data)
	}
	call(t, srv, "GET", "/api/v1/connections/"+c.ID, key, "").into(t, 200, &c) // still there
}

func TestListConnectionsPagination(t *testing.T) {
	srv, key := newTestServer(t)
	var ids []string
	for i := range 7 {
		var c automation.Connection
		call(t, srv, "POST", "/api/v1/connections", key, connectionBody(fmt.Sprint("c", i))).into(t, 201, &c)
		ids = append(ids, c.ID)
	}
	var got []string
	cursor := ""
	for range 10 {
		q := "?limit=3"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := call(t, srv, "GET", "/api/v1/connections"+q, key, "")
		if bytes.Contains(r.body, []byte(externalKey)) {
			t.Errorf("list holds the credential")
		}
		var l automation.List[automation.Connection]
		r.into(t, 200, &l)
		for _, c := range l.Data {
			got = append(got, c.ID)
		}
		if !l.HasMore {
			if l.Cursor != nil {
				t.Errorf("last page has a cursor")
			}
			break
		}
		cursor = *l.Cursor
	}
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Errorf("walk = %v, want %v", got, ids)
	}

	other := newProjectKey(t, srv, automation.PlanEnterprise)
	for i := range 2 {
		call(t, srv, "POST", "/api/v1/connections", other, connectionBody(fmt.Sprint("o", i))).into(t, 201, &automation.Connection{})
	}
	var op automation.List[automation.Connection]
	call(t, srv, "GET", "/api/v1/connections?limit=1", other, "").into(t, 200, &op)
	var fp listView
	createFlow(t, srv, key, flowBuilderBody)
	createFlow(t, srv, key, flowBuilderBody)
	call(t, srv, "GET", "/api/v1/flows?limit=1", key, "").into(t, 200, &fp)

	bad := []struct{ name, query, code string }{
		{"limit 0", "limit=0", "INVALID_PARAMETER"},
		{"limit 101", "limit=101", "INVALID_PARAMETER"},
		{"limit abc", "limit=abc", "INVALID_PARAMETER"},
		{"status", "status=ACTIVE", "INVALID_PARAMETER"},
		{"forged cursor", "cursor=x" + url.QueryEscape(*op.Cursor), "INVALID_CURSOR"},
		{"another project's cursor", "cursor=" + url.QueryEscape(*op.Cursor), "INVALID_CURSOR"},
		{"a flow list's cursor", "cursor=" + url.QueryEscape(*fp.Cursor), "INVALID_CURSOR"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			call(t, srv, "GET", "/api/v1/connections?"+tt.query, key, "").wantError(t, 400, tt.code)
		})
	}
}
