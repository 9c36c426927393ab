package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostile is one request of TestHostileRequests, written as raw HTTP so
// that nothing (client library, URL parser) normalises it on the way.
type hostile struct {
	name   string
	method string
	target string   // request-target exactly as sent
	header []string // "Name: value" lines; Host and Content-Length are added unless given
	body   string
	// raw, when set, is the whole request as sent, instead of the fields
	// above.
	raw        string
	wantStatus int
	// wantCode is the error code of the JSON envelope; "a|b" admits
	// either. "-" means the answer is not JSON: the dashboard's HTML, or
	// one of the answers net/http writes itself that cannot be changed
	// (listed in docs/reliability.md).
	wantCode string
}

func (h hostile) request(host string) string {
	if h.raw != "" {
		return h.raw
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", h.method, h.target)
	hasHost, hasLen := false, false
	for _, l := range h.header {
		name, _, _ := strings.Cut(l, ":")
		switch strings.ToLower(name) {
		case "host":
			hasHost = true
		case "content-length", "transfer-encoding":
			hasLen = true
		}
		b.WriteString(l + "\r\n")
	}
	if !hasHost {
		b.WriteString("Host: " + host + "\r\n")
	}
	if !hasLen && h.body != "" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(h.body))
	}
	b.WriteString("Connection: close\r\n\r\n")
	b.WriteString(h.body)
	return b.String()
}

// exchange sends one raw request on its own connection and reads the answer.
func exchange(t *testing.T, addr, req string) (*http.Response, []byte, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	go func() { _, _ = io.WriteString(c, req) }() // the server may answer before reading it all
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

func nest(open, close string, n int) string {
	return strings.Repeat(open, n) + strings.Repeat(close, n)
}

// TestHostileRequests sends well over 150 hostile requests across every
// surface of a real flowd (management API, both receivers, the Test
// Trigger URL, the dashboard, the OpenAPI document, /healthz, /metrics)
// and checks each one's documented status and JSON error code; then that
// the server is healthy and still runs a normal webhook.
func TestHostileRequests(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	// A small body limit keeps the oversized cases cheap; no rate limit, so
	// that every case meets the check it is about.
	p := startFlowd(t, dir, "FLOWD_MAX_BODY_BYTES=65536", "FLOWD_RATE_LIMIT=0")
	key := initialKey(t, dir)
	addr := strings.TrimPrefix(p.base, "http://")

	if _, err := flowctl(t, dir, "projects", "create", "tenant-c", "--plan", "FREE"); err != nil {
		t.Fatal(err)
	}
	keyC, err := flowctl(t, dir, "keys", "create", "--project", "tenant-c")
	if err != nil {
		t.Fatal(err)
	}
	keyC = strings.TrimSpace(keyC)

	mk := func(k, body string, enable bool) string {
		var f struct{ ID string }
		api(t, p, k, "POST", "/api/v1/flows", body, 201, &f)
		if enable {
			api(t, p, k, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
		}
		return f.ID
	}
	fb := mk(key, `{"name":"fb","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"a":"{{ trigger.body }}"}}]}`, true)
	fbOff := mk(key, `{"name":"off","engine":"FLOW_BUILDER"}`, false)
	fbSig := mk(key, `{"name":"sig","engine":"FLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"signature":{"header":"X-Sig","secret":"s3cret","prefix":"sha256="}}}}`, true)
	fbIP := mk(key, `{"name":"ip","engine":"FLOW_BUILDER"}`, true)
	api(t, p, key, "POST", "/api/v1/flows/"+fbIP+"/webhook/security", `{"allowedIPs":["203.0.113.7"]}`, 200, nil)
	wfHeader := mk(key, `{"name":"wh","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST","path":"hook/a","authentication":{"type":"HEADER","name":"X-Key","value":"k3y"}}}}`, true)
	mk(key, `{"name":"wb","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST","path":"hook/basic","authentication":{"type":"BASIC","username":"u","password":"pw"}}}}`, true)
	mk(key, `{"name":"wo","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"ANY","path":"open"}}}`, true)
	foreign := mk(keyC, `{"name":"c","engine":"FLOW_BUILDER"}`, false)

	auth := "Authorization: Bearer " + key
	authC := "Authorization: Bearer " + keyC
	js := "Content-Type: application/json"
	long := strings.Repeat("x", 100_000)
	big := `{"a":"` + strings.Repeat("b", 70_000) + `"}`
	bigAPI := `{"name":"` + strings.Repeat("n", (1<<20)+10) + `"}`
	flowBody := func(path string) string {
		q, _ := json.Marshal(path)
		return `{"name":"w","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"path":` + string(q) + `}}}`
	}

	cases := []hostile{
		// Authentication forms.
		{name: "no Authorization", method: "GET", target: "/api/v1/flows", wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "Basic scheme", method: "GET", target: "/api/v1/flows", header: []string{"Authorization: Basic " + key}, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "Bearer without key", method: "GET", target: "/api/v1/flows", header: []string{"Authorization: Bearer"}, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "Bearer and spaces", method: "GET", target: "/api/v1/flows", header: []string{"Authorization: Bearer    "}, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "unknown key", method: "GET", target: "/api/v1/flows", header: []string{"Authorization: Bearer fsk_nope"}, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "key with a suffix", method: "GET", target: "/api/v1/flows", header: []string{auth + "x"}, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "key cut short", method: "GET", target: "/api/v1/flows", header: []string{auth[:len(auth)-1]}, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "10 KB key", method: "GET", target: "/api/v1/flows", header: []string{"Authorization: Bearer " + strings.Repeat("k", 10_000)}, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "key as query", method: "GET", target: "/api/v1/flows?api_key=" + key, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "key in cookie", method: "GET", target: "/api/v1/flows", header: []string{"Cookie: key=" + key}, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "Bearer tab key", method: "GET", target: "/api/v1/flows", header: []string{"Authorization: Bearer\t" + key}, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "1000 headers, no key", method: "GET", target: "/api/v1/flows", header: manyHeaders(1000), wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "long X-Request-Id", method: "GET", target: "/api/v1/flows", header: []string{"X-Request-Id: " + strings.Repeat("r", 5000)}, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "X-Request-Id with quotes", method: "GET", target: "/api/v1/flows", header: []string{`X-Request-Id: "}{"`}, wantStatus: 401, wantCode: "UNAUTHORIZED"},

		// Management bodies: media type, syntax, size, depth, strictness.
		{name: "no Content-Type", method: "POST", target: "/api/v1/flows", header: []string{auth}, body: `{"name":"x","engine":"FLOW_BUILDER"}`, wantStatus: 415, wantCode: "UNSUPPORTED_MEDIA_TYPE"},
		{name: "text/plain", method: "POST", target: "/api/v1/flows", header: []string{auth, "Content-Type: text/plain"}, body: `{}`, wantStatus: 415, wantCode: "UNSUPPORTED_MEDIA_TYPE"},
		{name: "form", method: "POST", target: "/api/v1/flows", header: []string{auth, "Content-Type: application/x-www-form-urlencoded"}, body: `name=x`, wantStatus: 415, wantCode: "UNSUPPORTED_MEDIA_TYPE"},
		{name: "multipart", method: "POST", target: "/api/v1/flows", header: []string{auth, "Content-Type: multipart/form-data; boundary=x"}, body: "--x--", wantStatus: 415, wantCode: "UNSUPPORTED_MEDIA_TYPE"},
		{name: "json-ish type", method: "POST", target: "/api/v1/flows", header: []string{auth, "Content-Type: application/jsonx"}, body: `{}`, wantStatus: 415, wantCode: "UNSUPPORTED_MEDIA_TYPE"},
		{name: "broken Content-Type", method: "POST", target: "/api/v1/flows", header: []string{auth, "Content-Type: ;;;"}, body: `{}`, wantStatus: 415, wantCode: "UNSUPPORTED_MEDIA_TYPE"},
		{name: "empty body", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "truncated JSON", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":`, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "array body", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `[1,2]`, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "string body", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `"flow"`, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "two values", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{}{}`, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "trailing garbage", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER"} x`, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "NUL byte", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: "{\"name\":\"a\x00\"}", wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "nested 100", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":` + nest("[", "]", 100) + `}`, wantStatus: 400, wantCode: "BODY_TOO_DEEP"},
		{name: "nested 9999", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: nest("[", "]", 9999), wantStatus: 400, wantCode: "BODY_TOO_DEEP"},
		{name: "nested objects in steps", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":` + nest(`{"a":`, "}", 70) + `}]}`, wantStatus: 400, wantCode: "BODY_TOO_DEEP"},
		{name: "over 1 MiB", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: bigAPI, wantStatus: 413, wantCode: "BODY_TOO_LARGE"},
		{name: "unknown field", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER","admin":true}`, wantStatus: 400, wantCode: "UNKNOWN_FIELD"},
		{name: "field case", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"Name":"x","engine":"FLOW_BUILDER"}`, wantStatus: 400, wantCode: "UNKNOWN_FIELD"},
		{name: "project smuggled", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER","project":"prj_other"}`, wantStatus: 400, wantCode: "UNKNOWN_FIELD"},
		{name: "name as number", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":5,"engine":"FLOW_BUILDER"}`, wantStatus: 400, wantCode: "INVALID_FIELD"},
		{name: "steps as object", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER","steps":{}}`, wantStatus: 400, wantCode: "INVALID_FIELD"},
		{name: "bad engine", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"ZAPIER"}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "no name", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"engine":"FLOW_BUILDER"}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "bad trigger type", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER","trigger":{"type":"EMAIL"}}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "bad cron", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER","trigger":{"type":"SCHEDULE","schedule":{"cron":"61 * * * *"}}}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "bad time zone", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER","trigger":{"type":"SCHEDULE","schedule":{"cron":"* * * * *","timezone":"../../etc/passwd"}}}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "unknown step type", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"EXEC"}]}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "duplicate step", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{}},{"name":"s","type":"SET","values":{}}]}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "bad expression", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"FILTER","condition":"trigger.body.(("}]}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "unknown connection", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"HTTP","connectionId":"con_nope","method":"GET","url":"https://api.example.com"}]}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "flow builder path", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"FLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"path":"a"}}}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "bad method", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"TRACE"}}}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "bad auth type", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"x","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"authentication":{"type":"JWT"}}}}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},

		// Workflow paths: traversal, escapes, control characters, size,
		// another project's path.
		{name: "path dot-dot", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: flowBody("hooks/../admin"), wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "path dot", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: flowBody("hooks/./admin"), wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "path only dots", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: flowBody(".."), wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "path double slash", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: flowBody("a//b"), wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "path escaped slash", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: flowBody("a%2Fb"), wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "path escaped dots", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: flowBody("%2e%2e/admin"), wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "path backslash", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: flowBody(`hooks\..\admin`), wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "path NUL", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: flowBody("a\x00b"), wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "path CR LF", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: flowBody("a\r\nb"), wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "path unicode", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: flowBody("h\u202eooks"), wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "path 100k", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: flowBody(long), wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "another project's path", method: "POST", target: "/api/v1/flows", header: []string{authC, js}, body: `{"name":"evil","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"GET","path":"hook/a","allowedOrigins":["https://evil.example"]}}}`, wantStatus: 409, wantCode: "ROUTE_CONFLICT"},
		{name: "own path and method", method: "POST", target: "/api/v1/flows", header: []string{auth, js}, body: `{"name":"dup","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST","path":"hook/a"}}}`, wantStatus: 409, wantCode: "ROUTE_CONFLICT"},

		// Query parameters: limits, cursors, filters.
		{name: "limit 0", method: "GET", target: "/api/v1/flows?limit=0", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "limit 101", method: "GET", target: "/api/v1/flows?limit=101", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "limit negative", method: "GET", target: "/api/v1/flows?limit=-1", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "limit word", method: "GET", target: "/api/v1/flows?limit=ten", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "limit float", method: "GET", target: "/api/v1/flows?limit=1.5", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "limit exponent", method: "GET", target: "/api/v1/flows?limit=1e2", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "limit overflow", method: "GET", target: "/api/v1/flows?limit=99999999999999999999999", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "cursor garbage", method: "GET", target: "/api/v1/flows?cursor=garbage", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_CURSOR"},
		{name: "cursor base64 JSON", method: "GET", target: "/api/v1/flows?cursor=eyJhZnRlciI6IjAifQ", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_CURSOR"},
		{name: "cursor 50 KB", method: "GET", target: "/api/v1/flows?cursor=" + strings.Repeat("A", 50_000), header: []string{auth}, wantStatus: 400, wantCode: "INVALID_CURSOR"},
		{name: "cursor escapes", method: "GET", target: "/api/v1/flows?cursor=%00%FF%0A", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_CURSOR"},
		{name: "status bogus", method: "GET", target: "/api/v1/flows?status=BOGUS", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "status lower case", method: "GET", target: "/api/v1/flows?status=active", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "runs limit 0", method: "GET", target: "/api/v1/flows/" + fb + "/runs?limit=0", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "runs cursor", method: "GET", target: "/api/v1/flows/" + fb + "/runs?cursor=x", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_CURSOR"},
		{name: "runs status", method: "GET", target: "/api/v1/flows/" + fb + "/runs?status=DONE", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "connections limit", method: "GET", target: "/api/v1/connections?limit=1000", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "connections status", method: "GET", target: "/api/v1/connections?status=ACTIVE", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_PARAMETER"},
		{name: "connections cursor", method: "GET", target: "/api/v1/connections?cursor=%2F%2F", header: []string{auth}, wantStatus: 400, wantCode: "INVALID_CURSOR"},

		// Other management endpoints.
		{name: "security on FREE plan", method: "POST", target: "/api/v1/flows/" + foreign + "/webhook/security", header: []string{authC, js}, body: `{"allowedIPs":["10.0.0.1"]}`, wantStatus: 403, wantCode: "PLAN_RESTRICTED"},
		{name: "security bad IP", method: "POST", target: "/api/v1/flows/" + fb + "/webhook/security", header: []string{auth, js}, body: `{"allowedIPs":["999.1.1.1"]}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "security not a list", method: "POST", target: "/api/v1/flows/" + fb + "/webhook/security", header: []string{auth, js}, body: `{"allowedIPs":"10.0.0.1"}`, wantStatus: 400, wantCode: "INVALID_FIELD"},
		{name: "security deep", method: "POST", target: "/api/v1/flows/" + fb + "/webhook/security", header: []string{auth, js}, body: `{"allowedIPs":` + nest("[", "]", 500) + `}`, wantStatus: 400, wantCode: "BODY_TOO_DEEP"},
		{name: "connection bad type", method: "POST", target: "/api/v1/connections", header: []string{auth, js}, body: `{"name":"c","app":"a","type":"PASSWORD","value":"v"}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "connection OAUTH2 via API", method: "POST", target: "/api/v1/connections", header: []string{auth, js}, body: `{"name":"c","app":"a","type":"OAUTH2","value":"v"}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "connection no value", method: "POST", target: "/api/v1/connections", header: []string{auth, js}, body: `{"name":"c","app":"a","type":"API_KEY"}`, wantStatus: 400, wantCode: "VALIDATION_ERROR"},
		{name: "connection deep", method: "POST", target: "/api/v1/connections", header: []string{auth, js}, body: nest(`{"a":`, "}", 200), wantStatus: 400, wantCode: "BODY_TOO_DEEP"},
		{name: "retry of unknown run", method: "POST", target: "/api/v1/flows/" + fb + "/runs/run_nope/retry", header: []string{auth}, wantStatus: 404, wantCode: "RUN_NOT_FOUND"},

		// Methods and routes.
		{name: "PUT flows", method: "PUT", target: "/api/v1/flows", header: []string{auth}, wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "DELETE flows", method: "DELETE", target: "/api/v1/flows", header: []string{auth}, wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "PATCH flow", method: "PATCH", target: "/api/v1/flows/" + fb, header: []string{auth}, wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "TRACE", method: "TRACE", target: "/api/v1/flows", wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "lower-case method", method: "get", target: "/api/v1/flows", header: []string{auth}, wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "invented method", method: "FLOWD", target: "/api/v1/flows", wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "long method", method: strings.Repeat("M", 5000), target: "/api/v1/flows", wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "CONNECT", method: "CONNECT", target: "127.0.0.1:22", wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "unknown route", method: "GET", target: "/api/v1/flowz", header: []string{auth}, wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "v2", method: "GET", target: "/api/v2/flows", header: []string{auth}, wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "double slash", method: "GET", target: "//api/v1/flows", header: []string{auth}, wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "trailing slash", method: "GET", target: "/api/v1/flows/", header: []string{auth}, wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "dot segment", method: "GET", target: "/api/v1/./flows", header: []string{auth}, wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "dot-dot segment", method: "GET", target: "/api/v1/flows/../connections", header: []string{auth}, wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "escaped dot-dot", method: "GET", target: "/api/v1/flows/%2e%2e/connections", header: []string{auth}, wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "escaped slash", method: "GET", target: "/api/v1/flows%2F" + fb, header: []string{auth}, wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "backslash", method: "GET", target: `/api/v1\flows`, header: []string{auth}, wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "absolute-form target", method: "GET", target: "http://evil.example/api/v1/flows", wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "asterisk", method: "OPTIONS", target: "*", wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "root", method: "GET", target: "/", wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "etc passwd", method: "GET", target: "/../../etc/passwd", wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "openapi POST", method: "POST", target: "/api/v1/openapi.json", wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "openapi subpath", method: "GET", target: "/api/v1/openapi.json/x", wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "openapi traversal", method: "GET", target: "/api/v1/openapi.json/../../flows", wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "healthz POST", method: "POST", target: "/healthz", wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "healthz subpath", method: "GET", target: "/healthz/deep", wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "metrics DELETE", method: "DELETE", target: "/metrics", wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "metrics subpath", method: "GET", target: "/metrics/../healthz", wantStatus: 404, wantCode: "NOT_FOUND"},

		// Flow builder receiver.
		{name: "webhook GET", method: "GET", target: "/api/v1/webhooks/" + fb, wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "webhook PUT", method: "PUT", target: "/api/v1/webhooks/" + fb, header: []string{js}, body: `{}`, wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "webhook no ID", method: "POST", target: "/api/v1/webhooks/", header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "FLOW_NOT_FOUND|NOT_FOUND"},
		{name: "webhook nested ID", method: "POST", target: "/api/v1/webhooks/" + fb + "/x", header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "webhook inactive flow", method: "POST", target: "/api/v1/webhooks/" + fbOff, header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "FLOW_INACTIVE"},
		{name: "webhook workflow flow's ID", method: "POST", target: "/api/v1/webhooks/" + wfHeader, header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "FLOW_NOT_FOUND"},
		{name: "webhook empty body", method: "POST", target: "/api/v1/webhooks/" + fb, header: []string{js}, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "webhook declared JSON, not JSON", method: "POST", target: "/api/v1/webhooks/" + fb, header: []string{"Content-Type: application/json"}, body: `hello`, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "webhook not JSON, no type", method: "POST", target: "/api/v1/webhooks/" + fb, body: `hello`, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "webhook truncated", method: "POST", target: "/api/v1/webhooks/" + fb, header: []string{js}, body: `{"a":[1,2`, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "webhook nested 9999 (issue repro)", method: "POST", target: "/api/v1/webhooks/" + fb, header: []string{js}, body: nest("[", "]", 9999), wantStatus: 400, wantCode: "BODY_TOO_DEEP"},
		{name: "webhook nested 65 objects", method: "POST", target: "/api/v1/webhooks/" + fb, header: []string{js}, body: nest(`{"a":`, "}", 65), wantStatus: 400, wantCode: "BODY_TOO_DEEP"},
		{name: "webhook over the limit", method: "POST", target: "/api/v1/webhooks/" + fb, header: []string{js}, body: big, wantStatus: 413, wantCode: "BODY_TOO_LARGE"},
		{name: "webhook chunked over the limit", method: "POST", target: "/api/v1/webhooks/" + fb, header: []string{js, "Transfer-Encoding: chunked"}, body: chunked(big), wantStatus: 413, wantCode: "BODY_TOO_LARGE"},
		{name: "webhook declares 1 GB", method: "POST", target: "/api/v1/webhooks/" + fb, header: []string{js, "Content-Length: 1000000000"}, body: `{}`, wantStatus: 413, wantCode: "BODY_TOO_LARGE"},
		{name: "webhook bad chunking", method: "POST", target: "/api/v1/webhooks/" + fb, header: []string{js, "Transfer-Encoding: chunked"}, body: "zz\r\n{}\r\n0\r\n\r\n", wantStatus: 400, wantCode: "INVALID_BODY"},
		{name: "webhook 100-continue over the limit", method: "POST", target: "/api/v1/webhooks/" + fb, header: []string{js, "Expect: 100-continue", "Content-Length: 70000"}, wantStatus: 413, wantCode: "BODY_TOO_LARGE"},
		{name: "webhook no signature", method: "POST", target: "/api/v1/webhooks/" + fbSig, header: []string{js}, body: `{}`, wantStatus: 401, wantCode: "INVALID_SIGNATURE"},
		{name: "webhook wrong signature", method: "POST", target: "/api/v1/webhooks/" + fbSig, header: []string{js, "X-Sig: sha256=" + strings.Repeat("0", 64)}, body: `{}`, wantStatus: 401, wantCode: "INVALID_SIGNATURE"},
		{name: "webhook signature not hex", method: "POST", target: "/api/v1/webhooks/" + fbSig, header: []string{js, "X-Sig: sha256=zz"}, body: `{}`, wantStatus: 401, wantCode: "INVALID_SIGNATURE"},
		{name: "webhook signature huge", method: "POST", target: "/api/v1/webhooks/" + fbSig, header: []string{js, "X-Sig: sha256=" + strings.Repeat("a", 60_000)}, body: `{}`, wantStatus: 401, wantCode: "INVALID_SIGNATURE"},
		{name: "webhook signature repeated", method: "POST", target: "/api/v1/webhooks/" + fbSig, header: []string{js, "X-Sig: sha256=00", "X-Sig: sha256=11"}, body: `{}`, wantStatus: 401, wantCode: "INVALID_SIGNATURE"},
		{name: "webhook spoofed X-Forwarded-For", method: "POST", target: "/api/v1/webhooks/" + fbIP, header: []string{js, "X-Forwarded-For: 203.0.113.7"}, body: `{}`, wantStatus: 403, wantCode: "IP_NOT_ALLOWED"},
		{name: "webhook spoofed X-Real-IP", method: "POST", target: "/api/v1/webhooks/" + fbIP, header: []string{js, "X-Real-IP: 203.0.113.7", "Forwarded: for=203.0.113.7"}, body: `{}`, wantStatus: 403, wantCode: "IP_NOT_ALLOWED"},

		// Workflow builder receiver and its Test Trigger URL.
		{name: "hook unknown path", method: "POST", target: "/webhook/nothing/here", header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "WEBHOOK_NOT_FOUND"},
		{name: "hook wrong method", method: "GET", target: "/webhook/hook/a", wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "hook PROPFIND", method: "PROPFIND", target: "/webhook/open", wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "hook long method", method: strings.Repeat("X", 5000), target: "/webhook/open", wantStatus: 405, wantCode: "METHOD_NOT_ALLOWED"},
		{name: "hook traversal", method: "POST", target: "/webhook/hook/x/../a", header: []string{"X-Key: k3y", js}, body: `{}`, wantStatus: 404, wantCode: "NOT_FOUND|WEBHOOK_NOT_FOUND"},
		// An escaped path is decoded once before routing: hook%2Fa is the
		// flow of hook/a (its authentication answers), hook%252Fa is the
		// path "hook%2Fa", which is none, and escaped dots or slashes
		// decode into a path no flow can have.
		{name: "hook escaped slash", method: "POST", target: "/webhook/hook%2Fa", header: []string{js}, body: `{}`, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "hook escaped letter", method: "POST", target: "/webhook/hook/%61", header: []string{js}, body: `{}`, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "hook double-escaped slash", method: "POST", target: "/webhook/hook%252Fa", header: []string{"X-Key: k3y", js}, body: `{}`, wantStatus: 404, wantCode: "WEBHOOK_NOT_FOUND"},
		{name: "hook escaped dot-dot", method: "POST", target: "/webhook/x%2F..%2Fhook%2Fa", header: []string{"X-Key: k3y", js}, body: `{}`, wantStatus: 404, wantCode: "NOT_FOUND|WEBHOOK_NOT_FOUND"},
		{name: "hook escaped double slash", method: "POST", target: "/webhook/hook%2F%2Fa", header: []string{"X-Key: k3y", js}, body: `{}`, wantStatus: 404, wantCode: "NOT_FOUND|WEBHOOK_NOT_FOUND"},
		{name: "hook double slash", method: "POST", target: "/webhook//hook/a", header: []string{"X-Key: k3y", js}, body: `{}`, wantStatus: 404, wantCode: "NOT_FOUND|WEBHOOK_NOT_FOUND"},
		{name: "hook backslash", method: "POST", target: `/webhook/hook\a`, header: []string{"X-Key: k3y", js}, body: `{}`, wantStatus: 404, wantCode: "WEBHOOK_NOT_FOUND"},
		{name: "hook NUL", method: "POST", target: "/webhook/hook%00a", header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "WEBHOOK_NOT_FOUND"},
		{name: "hook 300-character path", method: "POST", target: "/webhook/" + strings.Repeat("p", 300), header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "WEBHOOK_NOT_FOUND"},
		{name: "hook 100k path", method: "POST", target: "/webhook/" + long, header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "WEBHOOK_NOT_FOUND"},
		{name: "hook script path", method: "POST", target: "/webhook/%3Cscript%3E", header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "WEBHOOK_NOT_FOUND"},
		{name: "hook empty path", method: "POST", target: "/webhook/", header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "WEBHOOK_NOT_FOUND|NOT_FOUND"},
		{name: "hook no credentials", method: "POST", target: "/webhook/hook/a", header: []string{js}, body: `{}`, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "hook wrong header", method: "POST", target: "/webhook/hook/a", header: []string{"X-Key: nope", js}, body: `{}`, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "hook header twice", method: "POST", target: "/webhook/hook/a", header: []string{"X-Key: k3y", "X-Key: k3y", js}, body: `{}`, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "hook key prefix", method: "POST", target: "/webhook/hook/a", header: []string{"X-Key: k3", js}, body: `{}`, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "basic missing", method: "POST", target: "/webhook/hook/basic", header: []string{js}, body: `{}`, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "basic not base64", method: "POST", target: "/webhook/hook/basic", header: []string{"Authorization: Basic ???", js}, body: `{}`, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "basic wrong password", method: "POST", target: "/webhook/hook/basic", header: []string{"Authorization: Basic dTp3cm9uZw==", js}, body: `{}`, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "basic without colon", method: "POST", target: "/webhook/hook/basic", header: []string{"Authorization: Basic dXB3", js}, body: `{}`, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "basic as bearer", method: "POST", target: "/webhook/hook/basic", header: []string{"Authorization: Bearer pw", js}, body: `{}`, wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "hook invalid JSON", method: "POST", target: "/webhook/open", header: []string{js}, body: `{"a":`, wantStatus: 400, wantCode: "INVALID_JSON"},
		{name: "hook nested 9999", method: "POST", target: "/webhook/open", header: []string{js}, body: nest("[", "]", 9999), wantStatus: 400, wantCode: "BODY_TOO_DEEP"},
		{name: "hook +json nested", method: "POST", target: "/webhook/open", header: []string{"Content-Type: application/vnd.api+json"}, body: nest(`{"a":`, "}", 100), wantStatus: 400, wantCode: "BODY_TOO_DEEP"},
		{name: "hook bad form", method: "POST", target: "/webhook/open", header: []string{"Content-Type: application/x-www-form-urlencoded"}, body: "a=%zz", wantStatus: 400, wantCode: "INVALID_FORM"},
		{name: "hook over the limit", method: "PUT", target: "/webhook/open", header: []string{"Content-Type: text/plain"}, body: big, wantStatus: 413, wantCode: "BODY_TOO_LARGE"},
		{name: "hook declares 1 GB", method: "POST", target: "/webhook/open", header: []string{js, "Content-Length: 1000000000"}, wantStatus: 413, wantCode: "BODY_TOO_LARGE"},
		{name: "hook OPTIONS unknown path", method: "OPTIONS", target: "/webhook/nothing", header: []string{"Origin: https://evil.example", "Access-Control-Request-Method: POST"}, wantStatus: 404, wantCode: "WEBHOOK_NOT_FOUND"},
		{name: "test URL not armed", method: "POST", target: "/webhook-test/open", header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "WEBHOOK_NOT_FOUND"},
		{name: "test URL traversal", method: "POST", target: "/webhook-test/../webhook/open", header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "test URL escaped", method: "POST", target: "/webhook-test/%2e%2e/open", header: []string{js}, body: `{}`, wantStatus: 404, wantCode: "NOT_FOUND|WEBHOOK_NOT_FOUND"},
		{name: "test URL empty", method: "GET", target: "/webhook-test/", wantStatus: 404, wantCode: "WEBHOOK_NOT_FOUND|NOT_FOUND"},
		{name: "test URL nested 9999", method: "POST", target: "/webhook-test/open", header: []string{js}, body: nest("[", "]", 9999), wantStatus: 404, wantCode: "WEBHOOK_NOT_FOUND"},

		// Dashboard: HTML answers, never a 5xx.
		{name: "dashboard flows signed out", method: "GET", target: "/ui/flows", wantStatus: 303, wantCode: "-"},
		{name: "dashboard sign-in bad key", method: "POST", target: "/ui/signin", header: []string{"Content-Type: application/x-www-form-urlencoded"}, body: "key=fsk_nope", wantStatus: 403, wantCode: "-"},
		{name: "dashboard forged session", method: "GET", target: "/ui/flows", header: []string{"Cookie: flowd_session=forged.value"}, wantStatus: 303, wantCode: "-"},
		{name: "dashboard unknown page", method: "GET", target: "/ui/nothing", wantStatus: 404, wantCode: "-"},
		{name: "dashboard traversal", method: "GET", target: "/ui/../api/v1/flows", wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "dashboard static traversal", method: "GET", target: "/ui/static/%2e%2e/templates/layout.html", wantStatus: 404, wantCode: "NOT_FOUND"},
		{name: "dashboard double slash", method: "GET", target: "/ui//flows", wantStatus: 404, wantCode: "NOT_FOUND"},

		// The HTTP layer itself.
		{name: "headers over the limit", method: "GET", target: "/api/v1/flows", header: []string{"X-Big: " + strings.Repeat("h", 140_000)}, wantStatus: 431, wantCode: "HEADERS_TOO_LARGE"},
		{name: "URL over the limit", method: "GET", target: "/api/v1/flows/" + strings.Repeat("u", 140_000), wantStatus: 431, wantCode: "HEADERS_TOO_LARGE"},
		{name: "no Host", raw: "GET /api/v1/flows HTTP/1.1\r\n\r\n", wantStatus: 400, wantCode: "BAD_REQUEST"},
		{name: "two Hosts", raw: "GET /api/v1/flows HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", wantStatus: 400, wantCode: "BAD_REQUEST"},
		{name: "bad Host", raw: "GET /api/v1/flows HTTP/1.1\r\nHost: a b\r\n\r\n", wantStatus: 400, wantCode: "BAD_REQUEST"},
		{name: "garbage line", raw: "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", wantStatus: 400, wantCode: "BAD_REQUEST"},
		{name: "HTTP/0.9 style", raw: "GET /api/v1/flows\r\n\r\n", wantStatus: 400, wantCode: "BAD_REQUEST"},
		{name: "HTTP/2 in HTTP/1 syntax", raw: "GET /api/v1/flows HTTP/2.0\r\nHost: x\r\n\r\n", wantStatus: 400, wantCode: "UNSUPPORTED_HTTP_VERSION"},
		{name: "HTTP/9", raw: "GET /api/v1/flows HTTP/9.9\r\nHost: x\r\n\r\n", wantStatus: 400, wantCode: "UNSUPPORTED_HTTP_VERSION"},
		{name: "header name with space", raw: "GET /api/v1/flows HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", wantStatus: 400, wantCode: "BAD_REQUEST"},
		{name: "header without colon", raw: "GET /api/v1/flows HTTP/1.1\r\nHost: x\r\nnocolon\r\n\r\n", wantStatus: 400, wantCode: "BAD_REQUEST"},
		{name: "obsolete line folding", raw: "GET /api/v1/flows HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n", wantStatus: 401, wantCode: "UNAUTHORIZED"},
		{name: "NUL in a header", raw: "GET /api/v1/flows HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", wantStatus: 400, wantCode: "BAD_REQUEST"},
		{name: "Content-Length word", raw: "POST /api/v1/flows HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n", wantStatus: 400, wantCode: "BAD_REQUEST"},
		{name: "two Content-Lengths", raw: "POST /api/v1/flows HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", wantStatus: 400, wantCode: "BAD_REQUEST"},
		{name: "negative Content-Length", raw: "POST /api/v1/flows HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", wantStatus: 400, wantCode: "BAD_REQUEST"},
		{name: "gzip transfer coding", raw: "POST /api/v1/webhooks/" + fb + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", wantStatus: 400, wantCode: "UNSUPPORTED_TRANSFER_ENCODING"},
		{name: "identity transfer coding", raw: "POST /api/v1/webhooks/" + fb + " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n", wantStatus: 400, wantCode: "UNSUPPORTED_TRANSFER_ENCODING"},
		{name: "space before colon", raw: "GET /api/v1/flows HTTP/1.1\r\nHost: x\r\nAuthorization : Bearer " + key + "\r\n\r\n", wantStatus: 400, wantCode: "BAD_REQUEST"},
		{name: "request line spaces", raw: "GET  /api/v1/flows  HTTP/1.1\r\nHost: x\r\n\r\n", wantStatus: 400, wantCode: "BAD_REQUEST"},
		// The one answer net/http writes itself with no way to change it:
		// an Expect other than 100-continue is 417 with an empty body.
		{name: "unknown Expect", method: "POST", target: "/api/v1/webhooks/" + fb, header: []string{js, "Expect: teapot"}, body: `{}`, wantStatus: 417, wantCode: "-"},
	}
	// Odd and foreign IDs on every endpoint that takes one.
	ids := []struct{ name, id, code string }{
		{"100k ID", long, ""},
		{"NUL ID", "flw_%00", ""},
		{"RTL override", "flw_%E2%80%AE", ""},
		{"invalid UTF-8", "flw_%FF%FE", ""},
		{"quote", "flw_'%22--", ""},
		// The escaped slash makes it two segments: no such route.
		{"script", "%3Cscript%3Ealert(1)%3C%2Fscript%3E", "|NOT_FOUND"},
		{"another project's", foreign, ""},
		{"run-shaped", "run_0000000000000000", ""},
	}
	for _, id := range ids {
		for _, ep := range []struct {
			method, path, code string
			withKey            bool
		}{
			{"GET", "/api/v1/flows/%s", "FLOW_NOT_FOUND", true},
			{"DELETE", "/api/v1/flows/%s", "FLOW_NOT_FOUND", true},
			{"POST", "/api/v1/flows/%s/enable", "FLOW_NOT_FOUND", true},
			{"GET", "/api/v1/flows/%s/runs", "FLOW_NOT_FOUND", true},
			{"GET", "/api/v1/flows/" + fb + "/runs/%s", "RUN_NOT_FOUND", true},
			{"GET", "/api/v1/flows/%s/webhook/sample", "FLOW_NOT_FOUND", true},
			{"GET", "/api/v1/connections/%s", "CONNECTION_NOT_FOUND", true},
			{"POST", "/api/v1/webhooks/%s", "FLOW_NOT_FOUND", false},
		} {
			h := hostile{name: ep.method + " " + ep.path + " with " + id.name, method: ep.method,
				target: fmt.Sprintf(ep.path, id.id), wantStatus: 404, wantCode: ep.code + id.code}
			if id.id == foreign && !ep.withKey {
				// A webhook URL belongs to no project: the foreign flow is
				// there, and INACTIVE.
				h.wantCode = "FLOW_INACTIVE"
			}
			if ep.withKey {
				h.header = []string{auth}
			} else {
				h.header, h.body = []string{js}, `{}`
			}
			cases = append(cases, h)
		}
	}
	// Shapes of the bounded-memory round (docs/reliability.md, "Memory").
	respondWith := func(header string) string {
		return `{"name":"r","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"path":"resp/h","responseMode":"ON_COMPLETION"}},` +
			`"steps":[{"name":"reply","type":"RESPOND","headers":{"` + header + `":"x"},"body":"ok"}]}`
	}
	cases = append(cases,
		hostile{name: "webhook number out of range", method: "POST", target: "/api/v1/webhooks/" + fb, header: []string{js}, body: `{"n": 1e999999}`, wantStatus: 400, wantCode: "INVALID_JSON"},
		hostile{name: "hook number out of range", method: "POST", target: "/webhook/open", header: []string{js}, body: `[1, -1E400]`, wantStatus: 400, wantCode: "INVALID_JSON"},
		hostile{name: "metrics for a rebound name", method: "GET", target: "/metrics", header: []string{"Host: rebind.attacker.example"}, wantStatus: 403, wantCode: "METRICS_TOKEN_REQUIRED"},
	)
	for _, h := range []string{"NEL", "Report-To", "Clear-Site-Data", "Strict-Transport-Security", "Refresh", "Location"} {
		cases = append(cases, hostile{name: "RESPOND sets " + h, method: "POST", target: "/api/v1/flows", header: []string{auth, js},
			body: respondWith(h), wantStatus: 400, wantCode: "VALIDATION_ERROR"})
	}
	if len(cases) < 150 {
		t.Fatalf("only %d hostile cases", len(cases))
	}
	t.Logf("%d hostile requests", len(cases))

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body, err := exchange(t, addr, tc.request("127.0.0.1"))
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("status %d, want %d; body %.300s", resp.StatusCode, tc.wantStatus, body)
			}
			if len(body) > 4096 && tc.wantCode != "-" {
				t.Errorf("%d-byte error answer: input echoed?", len(body))
			}
			if tc.wantCode == "-" {
				return
			}
			var e struct {
				Error struct{ Code, Message, RequestID string }
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json; body %.200s", ct, body)
			}
			if err := json.Unmarshal(body, &e); err != nil || e.Error.Code == "" || e.Error.RequestID == "" {
				t.Fatalf("not the error envelope: %.300s", body)
			}
			if !contains(strings.Split(tc.wantCode, "|"), e.Error.Code) {
				t.Errorf("code %s, want %s (message %q)", e.Error.Code, tc.wantCode, e.Error.Message)
			}
		})
	}

	// Healthy after: the process lives, /healthz answers, a normal webhook
	// runs to the end, and nothing hostile left a run behind.
	select {
	case <-p.exited:
		t.Fatalf("flowd exited:\n%s", p.stderr)
	default:
	}
	if status, body := get(t, p.base+"/healthz", ""); status != 200 {
		t.Fatalf("healthz after the table = %d %s", status, body)
	}
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+fb, "application/json", strings.NewReader(`{"ok":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("normal webhook after the table = %d", resp.StatusCode)
	}
	if st := waitRun(t, p, key, fb, resp.Header.Get("X-Run-Id")); st != "SUCCEEDED" {
		t.Errorf("normal run after the table: %s", st)
	}
	var runs struct{ Data []struct{ ID string } }
	api(t, p, key, "GET", "/api/v1/flows/"+fb+"/runs?limit=100", "", 200, &runs)
	if len(runs.Data) != 1 {
		t.Errorf("%d runs of the flow builder flow, want 1 (the normal one)", len(runs.Data))
	}
	if strings.Contains(p.stderr.String(), "panic") {
		t.Errorf("a handler panicked:\n%s", p.stderr)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func manyHeaders(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("X-H%d: %d", i, i)
	}
	return out
}

// chunked encodes body in 4 KiB chunks.
func chunked(body string) string {
	var b strings.Builder
	for len(body) > 0 {
		n := min(4096, len(body))
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
		body = body[n:]
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}
