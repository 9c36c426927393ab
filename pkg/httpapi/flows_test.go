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

func TestFlowLifecycle(t *testing.T) {
	srv, key := newTestServer(t)

	f := createFlow(t, srv, key, flowBuilderBody)
	if !strings.HasPrefix(f.ID, "flw_") || f.Status != "INACTIVE" || f.Engine != "FLOW_BUILDER" ||
		f.TriggerType != "WEBHOOK" || f.Description != "d" {
		t.Fatalf("created %+v", f)
	}
	path := "/api/v1/flows/" + f.ID

	steps := []struct {
		name, method, path, body string
		wantStatus               int
		check                    func(flowView) bool
	}{
		{"get", "GET", path, "", 200, func(g flowView) bool { return g.ID == f.ID && g.Name == "Deploy" }},
		{"update", "POST", path, `{"name":"Deploy v2","description":"new"}`, 200,
			func(g flowView) bool { return g.Name == "Deploy v2" && g.Description == "new" }},
		{"get after update", "GET", path, "", 200, func(g flowView) bool { return g.Name == "Deploy v2" }},
		{"enable", "POST", path + "/enable", "", 200, func(g flowView) bool { return g.Status == "ACTIVE" }},
		{"enable again", "POST", path + "/enable", "", 200, func(g flowView) bool { return g.Status == "ACTIVE" }},
		{"disable", "POST", path + "/disable", "", 200, func(g flowView) bool { return g.Status == "INACTIVE" }},
	}
	for _, st := range steps {
		var g flowView
		call(t, srv, st.method, st.path, key, st.body).into(t, st.wantStatus, &g)
		if !st.check(g) {
			t.Errorf("%s: got %+v", st.name, g)
		}
	}

	r := call(t, srv, "DELETE", path, key, "")
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Fatalf("delete = %d %q, want 204 and no body", r.status, r.body)
	}
	call(t, srv, "GET", path, key, "").wantError(t, 404, "FLOW_NOT_FOUND")
	call(t, srv, "DELETE", path, key, "").wantError(t, 404, "FLOW_NOT_FOUND")
}

func TestCreateFlow(t *testing.T) {
	srv, key := newTestServer(t)
	tests := []struct {
		name, body string
		hdr        []string
		wantStatus int
		wantCode   string
		wantInBody string
		notInBody  string
	}{
		{name: "flow builder", body: flowBuilderBody, wantStatus: 201, wantInBody: `"status":"INACTIVE"`},
		{name: "charset parameter", body: flowBuilderBody, hdr: []string{"Content-Type: application/json; charset=utf-8"}, wantStatus: 201},
		{name: "workflow builder", body: `{"name":"Hook","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"PUT","path":"deploys/x"}}}`,
			wantStatus: 201, wantInBody: `"path":"deploys/x"`},
		{name: "schedule", body: scheduleBody, wantStatus: 201, wantInBody: `"triggerType":"SCHEDULE"`},
		{name: "with steps", body: `{"name":"S","engine":"FLOW_BUILDER","steps":[{"name":"check","type":"FILTER","condition":"true"},{"name":"out","type":"SET","values":{"a":"b"}}]}`,
			wantStatus: 201, wantInBody: `"name":"check"`},
		{name: "code step", body: `{"name":"C","engine":"FLOW_BUILDER","steps":[{"name":"js","type":"CODE","code":"return 1","timeout":"2s"}]}`,
			wantStatus: 201, wantInBody: `"timeout":"2s"`},
		{name: "code step without code", body: `{"name":"C","engine":"FLOW_BUILDER","steps":[{"name":"js","type":"CODE"}]}`,
			wantStatus: 400, wantCode: "VALIDATION_ERROR", wantInBody: "steps[0].code is required"},
		{name: "code step timeout over 10s", body: `{"name":"C","engine":"FLOW_BUILDER","steps":[{"name":"js","type":"CODE","code":"return 1","timeout":"1m"}]}`,
			wantStatus: 400, wantCode: "VALIDATION_ERROR", wantInBody: "at most 10s"},
		{name: "bad engine", body: `{"name":"x","engine":"ZAPIER"}`, wantStatus: 400, wantCode: "VALIDATION_ERROR", wantInBody: "WORKFLOW_BUILDER"},
		{name: "missing name", body: `{"engine":"FLOW_BUILDER"}`, wantStatus: 400, wantCode: "VALIDATION_ERROR", wantInBody: "name"},
		{name: "malformed JSON", body: `{"name": "x", "engine": FLOW_BUILDER}`, wantStatus: 400, wantCode: "INVALID_JSON", wantInBody: "byte offset 25", notInBody: "FLOW_BUILDER"},
		{name: "truncated JSON", body: `{"name": "x"`, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "unknown field", body: `{"name":"x","engine":"FLOW_BUILDER","descripton":"typo"}`, wantStatus: 400, wantCode: "UNKNOWN_FIELD", wantInBody: "descripton"},
		{name: "unknown nested field", body: `{"name":"x","engine":"FLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"methd":"POST"}}}`,
			wantStatus: 400, wantCode: "UNKNOWN_FIELD", wantInBody: "methd"},
		{name: "wrong type", body: `{"name":12345,"engine":"FLOW_BUILDER"}`, wantStatus: 400, wantCode: "INVALID_FIELD", wantInBody: "name", notInBody: "12345"},
		{name: "trailing data", body: flowBuilderBody + `{}`, wantStatus: 400, wantCode: "INVALID_JSON", wantInBody: "after the JSON value"},
		{name: "trailing garbage", body: flowBuilderBody + ` x`, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "trailing white space", body: flowBuilderBody + " \n", wantStatus: 201},
		{name: "array body", body: `[1,2]`, wantStatus: 400, wantCode: "INVALID_JSON", wantInBody: "object"},
		{name: "empty body", body: "", hdr: []string{"Content-Type: application/json"}, wantStatus: 400, wantCode: "INVALID_JSON", wantInBody: "empty"},
		{name: "text/plain", body: flowBuilderBody, hdr: []string{"Content-Type: text/plain"}, wantStatus: 415, wantCode: "UNSUPPORTED_MEDIA_TYPE"},
		{name: "no content type", body: flowBuilderBody, hdr: []string{"Content-Type:"}, wantStatus: 415, wantCode: "UNSUPPORTED_MEDIA_TYPE"},
		{name: "too large", body: `{"name":"x","engine":"FLOW_BUILDER","description":"` + strings.Repeat("a", MaxBodyBytes) + `"}`,
			wantStatus: 413, wantCode: "BODY_TOO_LARGE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, srv, "POST", "/api/v1/flows", key, tt.body, tt.hdr...)
			if r.status != tt.wantStatus {
				t.Fatalf("status = %d, want %d: %s", r.status, tt.wantStatus, r.body)
			}
			if tt.wantCode != "" {
				r.wantError(t, tt.wantStatus, tt.wantCode)
			}
			if !bytes.Contains(r.body, []byte(tt.wantInBody)) {
				t.Errorf("body %s does not contain %q", r.body, tt.wantInBody)
			}
			if tt.notInBody != "" && bytes.Contains(r.body, []byte(tt.notInBody)) {
				t.Errorf("body %s echoes the input %q", r.body, tt.notInBody)
			}
		})
	}
}

func TestUpdateFlowErrors(t *testing.T) {
	srv, key := newTestServer(t)
	f := createFlow(t, srv, key, flowBuilderBody)
	path := "/api/v1/flows/" + f.ID
	tests := []struct {
		name, body string
		hdr        []string
		wantStatus int
		wantCode   string
	}{
		{"unknown field", `{"nme":"x"}`, nil, 400, "UNKNOWN_FIELD"},
		{"bad JSON", `{"name":`, nil, 400, "INVALID_JSON"},
		{"empty body", "", []string{"Content-Type: application/json"}, 400, "INVALID_JSON"},
		{"engine change", `{"engine":"WORKFLOW_BUILDER"}`, nil, 400, "VALIDATION_ERROR"},
		{"blank name", `{"name":"  "}`, nil, 400, "VALIDATION_ERROR"},
		{"wrong media type", `{"name":"x"}`, []string{"Content-Type: application/x-www-form-urlencoded"}, 415, "UNSUPPORTED_MEDIA_TYPE"},
		{"too large", `{"description":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, nil, 413, "BODY_TOO_LARGE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call(t, srv, "POST", path, key, tt.body, tt.hdr...).wantError(t, tt.wantStatus, tt.wantCode)
		})
	}
	var g flowView
	call(t, srv, "GET", path, key, "").into(t, 200, &g)
	if g.Name != "Deploy" || g.Description != "d" {
		t.Errorf("failed updates changed the flow: %+v", g)
	}
}

// TestBodilessRoutesIgnoreBody: enable, disable, delete and GETs take no
// body, so whatever is sent is not read.
func TestBodilessRoutesIgnoreBody(t *testing.T) {
	srv, key := newTestServer(t)
	f := createFlow(t, srv, key, flowBuilderBody)
	path := "/api/v1/flows/" + f.ID
	for _, rt := range []struct{ method, path string }{
		{"POST", path + "/enable"}, {"POST", path + "/disable"}, {"GET", path}, {"GET", path + "/webhook"},
	} {
		r := call(t, srv, rt.method, rt.path, key, "not json {", "Content-Type: text/plain")
		if r.status != http.StatusOK {
			t.Errorf("%s %s with a stray body = %d %s, want 200", rt.method, rt.path, r.status, r.body)
		}
	}
	if r := call(t, srv, "DELETE", path, key, "{{{", "Content-Type: text/plain"); r.status != http.StatusNoContent {
		t.Errorf("DELETE with a stray body = %d %s", r.status, r.body)
	}
}

// TestOtherProjectsFlow: every flow route answers 404 for a flow of another
// project, exactly as for an unknown ID, and changes nothing.
func TestOtherProjectsFlow(t *testing.T) {
	srv, key := newTestServer(t)
	other := newProjectKey(t, srv, automation.PlanEnterprise)
	f := createFlow(t, srv, key, flowBuilderBody)
	call(t, srv, "POST", "/api/v1/flows/"+f.ID+"/webhook/security", key, `{"allowedIPs":["203.0.113.7"]}`).into(t, 200, &struct{}{})

	tests := []struct{ name, method, suffix, body string }{
		{"get", "GET", "", ""},
		{"update", "POST", "", `{"name":"hijacked"}`},
		{"enable", "POST", "/enable", ""},
		{"disable", "POST", "/disable", ""},
		{"webhook", "GET", "/webhook", ""},
		{"get security", "GET", "/webhook/security", ""},
		{"set security", "POST", "/webhook/security", `{"allowedIPs":[]}`},
		{"delete", "DELETE", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			foreign := call(t, srv, tt.method, "/api/v1/flows/"+f.ID+tt.suffix, other, tt.body).wantError(t, 404, "FLOW_NOT_FOUND")
			unknown := call(t, srv, tt.method, "/api/v1/flows/flw_doesnotexist"+tt.suffix, other, tt.body).wantError(t, 404, "FLOW_NOT_FOUND")
			if strings.ReplaceAll(foreign.Message, f.ID, "ID") != strings.ReplaceAll(unknown.Message, "flw_doesnotexist", "ID") {
				t.Errorf("foreign flow %q and unknown flow %q answer differently", foreign.Message, unknown.Message)
			}
		})
	}
	var g flowView
	call(t, srv, "GET", "/api/v1/flows/"+f.ID, key, "").into(t, 200, &g)
	if g.Name != "Deploy" || g.Status != "INACTIVE" {
		t.Errorf("another project changed the flow: %+v", g)
	}
	var sec automation.WebhookSecurity
	call(t, srv, "GET", "/api/v1/flows/"+f.ID+"/webhook/security", key, "").into(t, 200, &sec)
	if len(sec.AllowedIPs) != 1 {
		t.Errorf("another project changed the allowlist: %+v", sec)
	}
	var l listView
	call(t, srv, "GET", "/api/v1/flows", other, "").into(t, 200, &l)
	if len(l.Data) != 0 {
		t.Errorf("another project lists %d flows", len(l.Data))
	}
}

func TestListFlowsPagination(t *testing.T) {
	t.Parallel() // its own server and database
	srv, key := newTestServer(t)
	var ids []string
	for i := range 23 {
		f := createFlow(t, srv, key, fmt.Sprintf(`{"name":"flow %02d","engine":"FLOW_BUILDER"}`, i))
		ids = append(ids, f.ID)
		if i%3 == 0 { // 8 ACTIVE flows: 0, 3, ..., 21
			call(t, srv, "POST", "/api/v1/flows/"+f.ID+"/enable", key, "").into(t, 200, &flowView{})
		}
	}

	walk := func(t *testing.T, query string, limit int) (got []flowView, pages []int) {
		t.Helper()
		cursor := ""
		for range 100 {
			q := url.Values{"limit": {fmt.Sprint(limit)}}
			if query != "" {
				q.Set("status", query)
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			var l listView
			call(t, srv, "GET", "/api/v1/flows?"+q.Encode(), key, "").into(t, 200, &l)
			got = append(got, l.Data...)
			pages = append(pages, len(l.Data))
			if !l.HasMore {
				if l.Cursor != nil {
					t.Errorf("last page has cursor %q", *l.Cursor)
				}
				return got, pages
			}
			if l.Cursor == nil {
				t.Fatal("hasMore with a null cursor")
			}
			cursor = *l.Cursor
		}
		t.Fatal("pagination does not end")
		return nil, nil
	}

	got, pages := walk(t, "", 5)
	if fmt.Sprint(pages) != "[5 5 5 5 3]" {
		t.Errorf("page sizes %v, want [5 5 5 5 3]", pages)
	}
	for i, f := range got {
		if i >= len(ids) || f.ID != ids[i] {
			t.Fatalf("item %d = %s, want the flows once each in creation order", i, f.ID)
		}
	}
	if len(got) != len(ids) {
		t.Errorf("walked %d flows, want %d", len(got), len(ids))
	}

	active, pages := walk(t, "ACTIVE", 3)
	if fmt.Sprint(pages) != "[3 3 2]" {
		t.Errorf("ACTIVE page sizes %v, want [3 3 2]", pages)
	}
	for i, f := range active {
		if f.Status != "ACTIVE" || f.ID != ids[i*3] {
			t.Errorf("ACTIVE item %d = %s %s, want %s", i, f.ID, f.Status, ids[i*3])
		}
	}
	inactive, _ := walk(t, "INACTIVE", 4)
	if len(inactive) != 15 {
		t.Errorf("INACTIVE walk found %d flows, want 15", len(inactive))
	}

	var def listView
	call(t, srv, "GET", "/api/v1/flows", key, "").into(t, 200, &def)
	if len(def.Data) != automation.DefaultPageSize || !def.HasMore {
		t.Errorf("default page: %d items, hasMore %v", len(def.Data), def.HasMore)
	}
	var max listView
	call(t, srv, "GET", "/api/v1/flows?limit=100", key, "").into(t, 200, &max)
	if len(max.Data) != 23 || max.HasMore || max.Cursor != nil {
		t.Errorf("limit=100: %d items, hasMore %v, cursor %v", len(max.Data), max.HasMore, max.Cursor)
	}

	other := newProjectKey(t, srv, automation.PlanEnterprise)
	for i := range 3 {
		createFlow(t, srv, other, fmt.Sprintf(`{"name":"o%d","engine":"FLOW_BUILDER"}`, i))
	}
	var otherPage listView
	call(t, srv, "GET", "/api/v1/flows?limit=1", other, "").into(t, 200, &otherPage)
	var activePage listView
	call(t, srv, "GET", "/api/v1/flows?limit=1&status=ACTIVE", key, "").into(t, 200, &activePage)

	bad := []struct{ name, query, code string }{
		{"limit 0", "limit=0", "INVALID_PARAMETER"},
		{"limit 101", "limit=101", "INVALID_PARAMETER"},
		{"limit abc", "limit=abc", "INVALID_PARAMETER"},
		{"limit negative", "limit=-1", "INVALID_PARAMETER"},
		{"bad status", "status=RUNNING", "INVALID_PARAMETER"},
		{"lower-case status", "status=active", "INVALID_PARAMETER"},
		{"forged cursor", "cursor=" + url.QueryEscape(*def.Cursor+"x"), "INVALID_CURSOR"},
		{"garbage cursor", "cursor=abc", "INVALID_CURSOR"},
		{"another project's cursor", "cursor=" + url.QueryEscape(*otherPage.Cursor), "INVALID_CURSOR"},
		{"cursor of a status filter", "cursor=" + url.QueryEscape(*activePage.Cursor), "INVALID_CURSOR"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			call(t, srv, "GET", "/api/v1/flows?"+tt.query, key, "").wantError(t, 400, tt.code)
		})
	}
}

func TestWebhookLookup(t *testing.T) {
	srv, key := newTestServer(t)
	fb := createFlow(t, srv, key, flowBuilderBody)
	wb := createFlow(t, srv, key, `{"name":"W","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"ANY","path":"gh/push"}}}`)
	sched := createFlow(t, srv, key, scheduleBody)

	tests := []struct {
		name string
		id   string
		want automation.WebhookDescriptor
	}{
		{"flow builder", fb.ID, automation.WebhookDescriptor{FlowID: fb.ID, WebhookURL: "http://engine.test/api/v1/webhooks/" + fb.ID, Method: "POST"}},
		{"workflow builder", wb.ID, automation.WebhookDescriptor{FlowID: wb.ID, WebhookURL: "http://workflow.test/webhook/gh/push", Method: "ANY"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d automation.WebhookDescriptor
			call(t, srv, "GET", "/api/v1/flows/"+tt.id+"/webhook", key, "").into(t, 200, &d)
			if d != tt.want {
				t.Errorf("got %+v, want %+v", d, tt.want)
			}
			call(t, srv, "POST", "/api/v1/flows/"+tt.id+"/enable", key, "").into(t, 200, &flowView{})
			call(t, srv, "GET", "/api/v1/flows/"+tt.id+"/webhook", key, "").into(t, 200, &d)
			if !d.Enabled {
				t.Errorf("enabled flow's webhook: %+v", d)
			}
		})
	}
	call(t, srv, "GET", "/api/v1/flows/"+sched.ID+"/webhook", key, "").wantError(t, 409, "NOT_A_WEBHOOK_FLOW")
	call(t, srv, "GET", "/api/v1/flows/flw_nope/webhook", key, "").wantError(t, 404, "FLOW_NOT_FOUND")
}

func TestWebhookSecurity(t *testing.T) {
	srv, key := newTestServer(t)
	f := createFlow(t, srv, key, flowBuilderBody)
	sched := createFlow(t, srv, key, scheduleBody)
	path := "/api/v1/flows/" + f.ID + "/webhook/security"

	tests := []struct {
		name, body string
		hdr        []string
		wantStatus int
		wantCode   string
		wantIPs    string
	}{
		{"set", `{"allowedIPs":["203.0.113.7","198.51.100.9/24","203.0.113.7"]}`, nil, 200, "", "[203.0.113.7 198.51.100.0/24]"},
		{"bad entry", `{"allowedIPs":["not-an-ip"]}`, nil, 400, "VALIDATION_ERROR", ""},
		{"missing field", `{}`, nil, 400, "VALIDATION_ERROR", ""},
		{"null list", `{"allowedIPs":null}`, nil, 400, "VALIDATION_ERROR", ""},
		{"unknown field", `{"allowedIps":[]}`, nil, 400, "UNKNOWN_FIELD", ""},
		{"not an array", `{"allowedIPs":"10.0.0.1"}`, nil, 400, "INVALID_FIELD", ""},
		{"bad JSON", `{"allowedIPs":[`, nil, 400, "INVALID_JSON", ""},
		{"wrong media type", `{"allowedIPs":[]}`, []string{"Content-Type: text/json"}, 415, "UNSUPPORTED_MEDIA_TYPE", ""},
		{"too large", `{"allowedIPs":["` + strings.Repeat("1", MaxBodyBytes) + `"]}`, nil, 413, "BODY_TOO_LARGE", ""},
		{"lift", `{"allowedIPs":[]}`, nil, 200, "", "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, srv, "POST", path, key, tt.body, tt.hdr...)
			if tt.wantCode != "" {
				r.wantError(t, tt.wantStatus, tt.wantCode)
				return
			}
			var sec automation.WebhookSecurity
			r.into(t, tt.wantStatus, &sec)
			if sec.FlowID != f.ID || fmt.Sprint(sec.AllowedIPs) != tt.wantIPs {
				t.Errorf("got %+v, want %s", sec, tt.wantIPs)
			}
			var got automation.WebhookSecurity
			call(t, srv, "GET", path, key, "").into(t, 200, &got)
			if fmt.Sprint(got.AllowedIPs) != tt.wantIPs {
				t.Errorf("GET after set: %+v, want %s", got, tt.wantIPs)
			}
		})
	}

	call(t, srv, "POST", "/api/v1/flows/"+sched.ID+"/webhook/security", key, `{"allowedIPs":["10.0.0.1"]}`).wantError(t, 409, "NOT_A_WEBHOOK_FLOW")
	call(t, srv, "POST", "/api/v1/flows/flw_nope/webhook/security", key, `{"allowedIPs":[]}`).wantError(t, 404, "FLOW_NOT_FOUND")
	call(t, srv, "GET", "/api/v1/flows/flw_nope/webhook/security", key, "").wantError(t, 404, "FLOW_NOT_FOUND")

	for _, plan := range []automation.Plan{automation.PlanFree, automation.PlanTeam} {
		t.Run(string(plan), func(t *testing.T) {
			k := newProjectKey(t, srv, plan)
			pf := createFlow(t, srv, k, flowBuilderBody)
			p := "/api/v1/flows/" + pf.ID + "/webhook/security"
			call(t, srv, "POST", p, k, `{"allowedIPs":["10.0.0.0/8"]}`).wantError(t, 403, "PLAN_RESTRICTED")
			var got automation.WebhookSecurity
			call(t, srv, "GET", p, k, "").into(t, 200, &got)
			if len(got.AllowedIPs) != 0 {
				t.Errorf("refused allowlist was stored: %+v", got)
			}
		})
	}
}

// TestFlowSecretsMasked: write-only values come back as "********", never
// as themselves, and sending the mask back keeps them.
func TestFlowSecretsMasked(t *testing.T) {
	srv, key := newTestServer(t)
	const headerValue, signingSecret = "hdr-secret-4c7e1f", "sign-secret-9a2b3d"
	body := `{"name":"Sec","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST","path":"sec",
		"authentication":{"type":"HEADER","name":"X-Webhook-Secret","value":"` + headerValue + `"},
		"signature":{"header":"x-hub-signature-256","prefix":"sha256=","secret":"` + signingSecret + `"}}}}`
	r := call(t, srv, "POST", "/api/v1/flows", key, body)
	var f flowView
	r.into(t, 201, &f)
	id := f.ID
	update := `{"trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST","path":"sec2",
		"authentication":{"type":"HEADER","name":"X-Webhook-Secret","value":"********"},
		"signature":{"header":"x-hub-signature-256","prefix":"sha256=","secret":"********"}}}}`
	for _, r := range []result{
		r,
		call(t, srv, "GET", "/api/v1/flows/"+id, key, ""),
		call(t, srv, "POST", "/api/v1/flows/"+id, key, update),
		call(t, srv, "POST", "/api/v1/flows/"+id+"/enable", key, ""),
		call(t, srv, "GET", "/api/v1/flows", key, ""),
	} {
		if r.status >= 300 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		if bytes.Contains(r.body, []byte(headerValue)) || bytes.Contains(r.body, []byte(signingSecret)) {
			t.Errorf("response leaks a secret: %s", r.body)
		}
	}
	call(t, srv, "GET", "/api/v1/flows/"+id, key, "").into(t, 200, &f)
	want := `"authentication":{"type":"HEADER","name":"X-Webhook-Secret","value":"********"}`
	if !strings.Contains(string(f.Trigger), want) || !strings.Contains(string(f.Trigger), `"secret":"********"`) ||
		!strings.Contains(string(f.Trigger), `"path":"sec2"`) {
		t.Errorf("trigger %s, want masked secrets and the new path", f.Trigger)
	}
	if logs := srv.log.String(); strings.Contains(logs, headerValue) || strings.Contains(logs, signingSecret) {
		t.Errorf("logs leak a secret: %s", logs)
	}
}

func TestFieldNamesAreCaseSensitive(t *testing.T) {
	srv, key := newTestServer(t)
	tests := []struct{ name, body, field string }{
		{"top level", `{"Name":"x","engine":"FLOW_BUILDER"}`, "Name"},
		{"nested", `{"name":"x","engine":"FLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"HTTPMethod":"POST"}}}`, "HTTPMethod"},
		{"in a step", `{"name":"x","engine":"FLOW_BUILDER","steps":[{"name":"a","type":"FILTER","Condition":"true"}]}`, "Condition"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := call(t, srv, "POST", "/api/v1/flows", key, tt.body).wantError(t, 400, "UNKNOWN_FIELD")
			if !strings.Contains(e.Message, `"`+tt.field+`"`) {
				t.Errorf("message %q does not name %s", e.Message, tt.field)
			}
		})
	}
	// A free-form JSON value (a SET step's values) keeps any key.
	createFlow(t, srv, key, `{"name":"x","engine":"FLOW_BUILDER","steps":[{"name":"a","type":"SET","values":{"Any":"1","KEY":"2"}}]}`)
}
