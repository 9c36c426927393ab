package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
)

// hookEnv is the management API and both receivers over one Service.
type hookEnv struct {
	api, engine, workflow *testServer
	key                   string
	svc                   *automation.Service
	runs                  *testQueue
	log                   *syncBuffer // the receivers' log lines
}

// newHookEnv starts the API and both receivers on 127.0.0.1. The receivers'
// clients validate every exchange against the OpenAPI document.
func newHookEnv(t *testing.T, cfg HookConfig) *hookEnv {
	t.Helper()
	return newHookEnvClock(t, cfg, nil)
}

// newHookEnvClock is newHookEnv with the Service's clock injected.
func newHookEnvClock(t *testing.T, cfg HookConfig, clock func() time.Time) *hookEnv {
	t.Helper()
	api, key := newTestServerClock(t, clock)
	logs := &syncBuffer{}
	cfg.Log = slog.New(slog.NewJSONHandler(logs, nil))
	return &hookEnv{api: api, key: key, svc: api.svc, runs: api.runs, log: logs,
		engine:   serve(t, NewWebhook(api.svc, cfg)),
		workflow: serve(t, NewWorkflowHook(api.svc, cfg)),
	}
}

// activeFlow creates a flow through the API, enables it and returns its ID.
func (h *hookEnv) activeFlow(t *testing.T, key, body string) string {
	t.Helper()
	f := createFlow(t, h.api, key, body)
	var g flowView
	call(t, h.api, "POST", "/api/v1/flows/"+f.ID+"/enable", key, "").into(t, 200, &g)
	return f.ID
}

// run reads a run through the API.
func (h *hookEnv) run(t *testing.T, flowID, runID string) automation.Run {
	t.Helper()
	var r automation.Run
	call(t, h.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, h.key, "").into(t, 200, &r)
	return r
}

// runJSON reads a run through the API as its raw JSON.
func (h *hookEnv) runJSON(t *testing.T, flowID, runID string) string {
	t.Helper()
	r := call(t, h.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, h.key, "")
	if r.status != 200 {
		t.Fatalf("get run: %d %s", r.status, r.body)
	}
	return string(r.body)
}

// started decodes a {"runId", "status"} answer and checks X-Run-Id.
func (r result) started(t *testing.T) string {
	t.Helper()
	var s struct{ RunID, Status string }
	r.into(t, 200, &s)
	if s.RunID == "" || s.Status != "RUNNING" || r.header.Get("X-Run-Id") != s.RunID {
		t.Fatalf("answer %s with X-Run-Id %q: want a RUNNING run named in X-Run-Id", r.body, r.header.Get("X-Run-Id"))
	}
	return s.RunID
}

// fakeService is an external service on loopback that records requests.
type fakeService struct {
	*httptest.Server
	mu   sync.Mutex
	auth []string // Authorization headers received
	// release ends the requests to /slow, which wait for it: a run held
	// there is slower than any wait until the test says otherwise.
	release chan struct{}
}

func newFakeService(t *testing.T) *fakeService {
	t.Helper()
	f := &fakeService{release: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.auth = append(f.auth, r.Header.Get("Authorization"))
		f.mu.Unlock()
		switch r.URL.Path {
		case "/slow":
			select {
			case <-f.release:
			case <-r.Context().Done():
				return
			}
		case "/bad":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"rejected"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true,"id":"msg_1"}`)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeService) authHeaders() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.auth...)
}

func hmacHex(secret, payload string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(payload))
	return hex.EncodeToString(m.Sum(nil))
}

// workflowFlow is a workflow builder flow definition on path.
func workflowFlow(path, method, extraWebhook, steps string) string {
	if steps == "" {
		steps = `[{"name":"echo","type":"SET","values":{"got":"{{ trigger.body }}"}}]`
	}
	return fmt.Sprintf(`{"name":"wf","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":%q,"path":%q%s}},"steps":%s}`,
		method, path, extraWebhook, steps)
}

func TestFlowBuilderWebhook(t *testing.T) {
	h := newHookEnv(t, HookConfig{MaxBody: 1024})
	id := h.activeFlow(t, h.key, `{"name":"fb","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"got":"{{ trigger.body }}"}}]}`)
	inactive := createFlow(t, h.api, h.key, flowBuilderBody).ID
	wf := h.activeFlow(t, h.key, workflowFlow("fb-other", "POST", "", ""))
	url := "/api/v1/webhooks/" + id

	tests := []struct {
		name, method, path, body string
		hdr                      []string
		wantStatus               int
		wantCode                 string
	}{
		{"unknown flow", "POST", "/api/v1/webhooks/flw_unknown", `{}`, nil, 404, "FLOW_NOT_FOUND"},
		{"inactive flow", "POST", "/api/v1/webhooks/" + inactive, `{}`, nil, 404, "FLOW_INACTIVE"},
		{"workflow builder flow", "POST", "/api/v1/webhooks/" + wf, `{}`, nil, 404, "FLOW_NOT_FOUND"},
		{"GET", "GET", url, "", nil, 405, "METHOD_NOT_ALLOWED"},
		{"PUT", "PUT", url, `{}`, nil, 405, "METHOD_NOT_ALLOWED"},
		{"not JSON", "POST", url, `{"event": secret-value`, nil, 400, "INVALID_JSON"},
		{"empty", "POST", url, "", []string{"Content-Type: application/json"}, 400, "INVALID_JSON"},
		{"too large", "POST", url, `{"a":"` + strings.Repeat("x", 1100) + `"}`, nil, 413, "BODY_TOO_LARGE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := h.runs.count()
			r := call(t, h.engine, tt.method, tt.path, "", tt.body, tt.hdr...)
			e := r.wantError(t, tt.wantStatus, tt.wantCode)
			if strings.Contains(e.Message, "secret-value") {
				t.Errorf("message quotes the body: %q", e.Message)
			}
			if tt.wantStatus == 405 && r.header.Get("Allow") != "POST" {
				t.Errorf("Allow = %q, want POST", r.header.Get("Allow"))
			}
			if h.runs.count() != before || r.header.Get("X-Run-Id") != "" {
				t.Errorf("a refused delivery made a run")
			}
		})
	}

	// Any JSON value is accepted, and the run sees it.
	for _, body := range []string{`{"event":"push","data":{"ref":"main"}}`, `[1,2]`, `"text"`, `42`, `null`} {
		runID := call(t, h.engine, "POST", url+"?x=1&x=2", "", body, "X-Custom: a", "Authorization: Bearer sender-token", "Cookie: c=1").started(t)
		drain(t, h.svc, h.runs)
		run := h.run(t, id, runID)
		if run.Status != automation.RunSucceeded || string(run.Trigger.Body) != body {
			t.Errorf("run %s: status %s, body %s; want SUCCEEDED with %s", runID, run.Status, run.Trigger.Body, body)
		}
		if run.Trigger.Method != "POST" || run.Trigger.Query["x"] != "1" || run.Trigger.Headers["x-custom"] != "a" {
			t.Errorf("trigger = %+v", run.Trigger)
		}
		for _, k := range []string{"authorization", "cookie"} {
			if _, ok := run.Trigger.Headers[k]; ok {
				t.Errorf("trigger kept the %s header", k)
			}
		}
		if raw := h.runJSON(t, id, runID); strings.Contains(raw, "sender-token") {
			t.Errorf("run record holds the Authorization value: %s", raw)
		}
	}
	// The output of the step saw trigger.body.event.
	// (Lists hold summaries: the output is in the single-run GET.)
	var l struct{ Data []automation.Run }
	call(t, h.api, "GET", "/api/v1/flows/"+id+"/runs?limit=100", h.key, "").into(t, 200, &l)
	var last automation.Run
	call(t, h.api, "GET", "/api/v1/flows/"+id+"/runs/"+l.Data[len(l.Data)-1].ID, h.key, "").into(t, 200, &last)
	if len(l.Data) != 5 || string(last.Steps[0].Output) != `{"got":{"data":{"ref":"main"},"event":"push"}}` {
		t.Errorf("runs %d, first run's output %s", len(l.Data), last.Steps[0].Output)
	}

	// Unknown routes on the receiver.
	for _, p := range []string{"/api/v1/webhooks/", "/api/v1/webhooks/a/b", "/", "/api/v1/flows"} {
		resp, err := http.Post(h.engine.URL+p, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		result{status: resp.StatusCode, header: resp.Header, body: b}.wantError(t, 404, "")
	}
}

// TestWebhookQueueOutage: a run that could not be made durable is a 503 the
// sender may retry, with nothing promised.
func TestWebhookQueueOutage(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	fb := h.activeFlow(t, h.key, flowBuilderBody)
	h.activeFlow(t, h.key, workflowFlow("outage", "POST", "", ""))
	h.runs.fail.Store(true)
	for _, tc := range []struct {
		srv  *testServer
		path string
	}{{h.engine, "/api/v1/webhooks/" + fb}, {h.workflow, "/webhook/outage"}} {
		r := call(t, tc.srv, "POST", tc.path, "", `{}`)
		r.wantError(t, 503, "UNAVAILABLE")
		if r.header.Get("Retry-After") == "" || r.header.Get("X-Run-Id") != "" {
			t.Errorf("%s: Retry-After %q, X-Run-Id %q", tc.path, r.header.Get("Retry-After"), r.header.Get("X-Run-Id"))
		}
	}
	if !strings.Contains(h.log.String(), "queue unavailable") {
		t.Errorf("the outage was not logged: %s", h.log)
	}
}

// TestSignature: GitHub's published example is accepted; a wrong signature
// is 401 "Invalid webhook signature" with no run.
func TestSignature(t *testing.T) {
	const (
		secret  = "It's a Secret to Everybody"
		payload = "Hello, World!"
		good    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	)
	if got := "sha256=" + hmacHex(secret, payload); got != good {
		t.Fatalf("test vector: %s", got)
	}
	stripeNow := time.Unix(1_700_000_000, 0)
	h := newHookEnv(t, HookConfig{Clock: func() time.Time { return stripeNow }})
	sig := `,"signature":{"preset":"GITHUB","secret":"It's a Secret to Everybody"}`
	wf := h.activeFlow(t, h.key, workflowFlow("gh", "POST", sig,
		`[{"name":"v","type":"VERIFY_SIGNATURE","signature":{"preset":"GITHUB","secret":"It's a Secret to Everybody"}},{"name":"s","type":"SET","values":{"b":"{{ trigger.body }}"}}]`))
	fb := h.activeFlow(t, h.key, `{"name":"fb","engine":"FLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST"`+sig+`}}}`)
	stripe := h.activeFlow(t, h.key, workflowFlow("stripe", "POST", `,"signature":{"preset":"STRIPE","secret":"whsec"}`, ""))

	// Accepted, and the VERIFY_SIGNATURE step passes on the kept raw body.
	r := call(t, h.workflow, "POST", "/webhook/gh", "", payload, "Content-Type: text/plain", "X-Hub-Signature-256: "+good)
	runID := r.started(t)
	drain(t, h.svc, h.runs)
	run := h.run(t, wf, runID)
	if run.Status != automation.RunSucceeded || run.Trigger.RawBody != payload || string(run.Trigger.Body) != `"Hello, World!"` {
		t.Errorf("run: %s %q raw %q body %s", run.Status, run.Error, run.Trigger.RawBody, run.Trigger.Body)
	}

	jsonBody := `{"zen":"Keep it logically awesome."}`
	call(t, h.engine, "POST", "/api/v1/webhooks/"+fb, "", jsonBody, "X-Hub-Signature-256: sha256="+hmacHex(secret, jsonBody)).started(t)
	drain(t, h.svc, h.runs)

	bad := []struct {
		name, path, body string
		hdr              []string
	}{
		{"wrong digest", "/webhook/gh", payload, []string{"Content-Type: text/plain", "X-Hub-Signature-256: sha256=" + strings.Repeat("0", 64)}},
		{"other body", "/webhook/gh", payload + " ", []string{"Content-Type: text/plain", "X-Hub-Signature-256: " + good}},
		{"missing", "/webhook/gh", payload, []string{"Content-Type: text/plain"}},
		{"no prefix", "/webhook/gh", payload, []string{"Content-Type: text/plain", "X-Hub-Signature-256: " + good[len("sha256="):]}},
		{"flow builder wrong", "/api/v1/webhooks/" + fb, jsonBody, []string{"X-Hub-Signature-256: " + good}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			before := h.runs.count()
			srv := h.workflow
			if strings.HasPrefix(tt.path, "/api/") {
				srv = h.engine
			}
			r := call(t, srv, "POST", tt.path, "", tt.body, tt.hdr...)
			if e := r.wantError(t, 401, "INVALID_SIGNATURE"); e.Message != "Invalid webhook signature" {
				t.Errorf("message = %q", e.Message)
			}
			if h.runs.count() != before || r.header.Get("X-Run-Id") != "" {
				t.Error("a bad signature made a run")
			}
		})
	}

	// A Stripe value split into two header lines, as an API Gateway adapter
	// may deliver it, is joined with "," and verified.
	ts := fmt.Sprint(stripeNow.Unix())
	body := `{"id":"evt_1"}`
	req, _ := http.NewRequest("POST", h.workflow.URL+"/webhook/stripe", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("Stripe-Signature", "t="+ts)
	req.Header.Add("Stripe-Signature", "v1="+hmacHex("whsec", ts+"."+body))
	resp, err := h.workflow.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("split Stripe-Signature: %d", resp.StatusCode)
	}
	_ = stripe
}

func TestWorkflowHookRouting(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	post := h.activeFlow(t, h.key, workflowFlow("orders", "POST", "", ""))
	anyID := h.activeFlow(t, h.key, workflowFlow("any/deep/path", "ANY", `,"allowedOrigins":["https://app.example.com"]`, ""))
	createFlow(t, h.api, h.key, workflowFlow("sleeping", "POST", "", "")) // inactive

	tests := []struct {
		name, method, path string
		wantStatus         int
		wantCode           string
		wantAllow          string
	}{
		{"unknown path", "POST", "/webhook/nothing", 404, "WEBHOOK_NOT_FOUND", ""},
		{"inactive flow", "POST", "/webhook/sleeping", 404, "FLOW_INACTIVE", ""},
		{"other method", "GET", "/webhook/orders", 405, "METHOD_NOT_ALLOWED", "POST"},
		{"DELETE", "DELETE", "/webhook/orders", 405, "METHOD_NOT_ALLOWED", "POST"},
		{"bad path", "POST", "/webhook/a..b%20c", 404, "WEBHOOK_NOT_FOUND", ""},
		{"empty path", "POST", "/webhook/", 404, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, h.workflow, tt.method, tt.path, "", "")
			r.wantError(t, tt.wantStatus, tt.wantCode)
			if got := r.header.Get("Allow"); got != tt.wantAllow {
				t.Errorf("Allow = %q, want %q", got, tt.wantAllow)
			}
		})
	}
	// Multi-segment paths cannot be expressed in the document: plain client.
	for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
		req, _ := http.NewRequest(m, h.workflow.URL+"/webhook/any/deep/path?q=1", nil)
		req.Header.Set("Origin", "https://app.example.com")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		runID := result{status: resp.StatusCode, header: resp.Header, body: b}.started(t)
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "https://app.example.com" {
			t.Errorf("%s: Access-Control-Allow-Origin = %q", m, got)
		}
		drain(t, h.svc, h.runs)
		if run := h.run(t, anyID, runID); run.Trigger.Method != m || run.Trigger.Path != "/webhook/any/deep/path" || string(run.Trigger.Body) != "null" {
			t.Errorf("%s: trigger %+v", m, run.Trigger)
		}
	}
	// OPTIONS: 204 with the methods and CORS headers.
	r := call(t, h.workflow, "OPTIONS", "/webhook/orders", "", "", "Origin: https://x.example", "Access-Control-Request-Method: POST", "Access-Control-Request-Headers: content-type")
	if r.status != 204 || r.header.Get("Allow") != "POST, OPTIONS" || r.header.Get("Access-Control-Allow-Origin") != "*" ||
		r.header.Get("Access-Control-Allow-Methods") != "POST, OPTIONS" || r.header.Get("Access-Control-Allow-Headers") != "content-type" {
		t.Errorf("OPTIONS = %d %v", r.status, r.header)
	}
	call(t, h.workflow, "OPTIONS", "/webhook/nothing", "", "").wantError(t, 404, "WEBHOOK_NOT_FOUND")
	req, _ := http.NewRequest("OPTIONS", h.workflow.URL+"/webhook/any/deep/path", nil)
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Access-Control-Request-Method", "PUT")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Allow") != "GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS" || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("OPTIONS from another origin = %d %v", resp.StatusCode, resp.Header)
	}
	_ = post
}

func TestWorkflowHookAuthentication(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	basic := h.activeFlow(t, h.key, workflowFlow("basic", "POST", `,"authentication":{"type":"BASIC","username":"ada","password":"pa55-word"}`, ""))
	header := h.activeFlow(t, h.key, workflowFlow("header", "POST", `,"authentication":{"type":"HEADER","name":"X-Webhook-Secret","value":"hdr-s3cret"}`, ""))
	basicOK := "Basic " + b64("ada:pa55-word")

	tests := []struct {
		name, path string
		hdr        []string
		wantStatus int
		wantBasic  bool
	}{
		{"basic ok", "/webhook/basic", []string{"Authorization: " + basicOK}, 200, false},
		{"basic missing", "/webhook/basic", nil, 401, true},
		{"basic wrong password", "/webhook/basic", []string{"Authorization: Basic " + b64("ada:pa55-wore")}, 401, true},
		{"basic wrong user", "/webhook/basic", []string{"Authorization: Basic " + b64("bob:pa55-word")}, 401, true},
		{"basic garbage", "/webhook/basic", []string{"Authorization: Basic %%%"}, 401, true},
		{"bearer instead", "/webhook/basic", []string{"Authorization: Bearer pa55-word"}, 401, true},
		{"header ok", "/webhook/header", []string{"X-Webhook-Secret: hdr-s3cret"}, 200, false},
		{"header wrong", "/webhook/header", []string{"X-Webhook-Secret: hdr-s3creT"}, 401, false},
		{"header prefix", "/webhook/header", []string{"X-Webhook-Secret: hdr-s3cret-and-more"}, 401, false},
		{"header missing", "/webhook/header", nil, 401, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := h.runs.count()
			r := call(t, h.workflow, "POST", tt.path, "", `{"n":1}`, tt.hdr...)
			if tt.wantStatus == 200 {
				runID := r.started(t)
				drain(t, h.svc, h.runs)
				flowID := basic
				if tt.path == "/webhook/header" {
					flowID = header
				}
				raw := h.runJSON(t, flowID, runID)
				for _, s := range []string{"pa55-word", b64("ada:pa55-word"), "hdr-s3cret", "x-webhook-secret"} {
					if strings.Contains(raw, s) {
						t.Errorf("run record holds %q: %s", s, raw)
					}
				}
				return
			}
			r.wantError(t, 401, "UNAUTHORIZED")
			if got := r.header.Get("WWW-Authenticate"); (got == `Basic realm="webhook"`) != tt.wantBasic {
				t.Errorf("WWW-Authenticate = %q", got)
			}
			if h.runs.count() != before {
				t.Error("a refused delivery made a run")
			}
		})
	}
}

func TestWorkflowHookBodies(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	id := h.activeFlow(t, h.key, workflowFlow("bodies", "ANY", "", ""))
	tests := []struct {
		name, method, contentType, body string
		wantBody                        string
	}{
		{"json", "POST", "application/json", `{"a": [1, 2]}`, `{"a":[1,2]}`},
		{"json suffix", "PUT", "application/vnd.api+json; charset=utf-8", `[true]`, `[true]`},
		{"form", "POST", "application/x-www-form-urlencoded", "a=1&b=x+y&b=%26", `{"a":"1","b":["x y","&"]}`},
		{"text", "POST", "text/plain", "hello\nworld", `"hello\nworld"`},
		{"no type", "DELETE", "", "<xml/>", `null`}, // kept in bodyBase64
		{"empty", "POST", "application/json", "", `null`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runID := call(t, h.workflow, tt.method, "/webhook/bodies", "", tt.body, "Content-Type: "+tt.contentType).started(t)
			drain(t, h.svc, h.runs)
			got := h.run(t, id, runID).Trigger.Body
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatalf("body %s: %v", got, err)
			}
			_ = json.Unmarshal([]byte(tt.wantBody), &w)
			if !reflect.DeepEqual(g, w) {
				t.Errorf("body = %s, want %s", got, tt.wantBody)
			}
		})
	}
	for _, tt := range []struct{ contentType, body, code string }{
		{"application/json", `{"a":`, "INVALID_JSON"},
		{"application/json", `{} {}`, "INVALID_JSON"},
		{"application/x-www-form-urlencoded", "a=%zz", "INVALID_FORM"},
	} {
		before := h.runs.count()
		call(t, h.workflow, "POST", "/webhook/bodies", "", tt.body, "Content-Type: "+tt.contentType).wantError(t, 400, tt.code)
		if h.runs.count() != before {
			t.Errorf("%s %q made a run", tt.contentType, tt.body)
		}
	}
}

// TestOnCompletion covers the synchronous answers: RESPOND, the last
// output, a failure, and a run slower than the wait.
func TestOnCompletion(t *testing.T) {
	ext := newFakeService(t)
	h := newHookEnv(t, HookConfig{SyncTimeout: 500 * time.Millisecond})
	var c automation.Connection
	call(t, h.api, "POST", "/api/v1/connections", h.key,
		`{"name":"ext","app":"ext","type":"API_KEY","value":{"apiKey":"ext-api-key-123"}}`).into(t, 201, &c)
	sync := `,"responseMode":"ON_COMPLETION","authentication":{"type":"HEADER","name":"X-Webhook-Secret","value":"whs-abc"}`
	respond := h.activeFlow(t, h.key, workflowFlow("respond", "POST", sync, fmt.Sprintf(`[
		{"name":"notify","type":"HTTP","connectionId":%q,"method":"POST","url":%q,"body":{"text":"{{ trigger.body.msg }}"}},
		{"name":"reply","type":"RESPOND","statusCode":201,"body":{"status":"ok","message":"sent {{ steps.notify.status }}"}}]`, c.ID, ext.URL+"/messages")))
	last := h.activeFlow(t, h.key, workflowFlow("last", "POST", sync, `[{"name":"s","type":"SET","values":{"echo":"{{ trigger.body.msg }}"}}]`))
	failing := h.activeFlow(t, h.key, workflowFlow("failing", "POST", sync, fmt.Sprintf(`[{"name":"call","type":"HTTP","method":"GET","url":%q}]`, ext.URL+"/bad")))
	slow := h.activeFlow(t, h.key, workflowFlow("slow", "POST", sync, fmt.Sprintf(`[{"name":"call","type":"HTTP","method":"GET","url":%q}]`, ext.URL+"/slow")))
	auth := "X-Webhook-Secret: whs-abc"

	r := call(t, h.workflow, "POST", "/webhook/respond", "", `{"msg":"hi"}`, auth)
	var got map[string]string
	r.into(t, 201, &got)
	if got["status"] != "ok" || got["message"] != "sent 200" || r.header.Get("X-Run-Id") == "" {
		t.Errorf("RESPOND answer %s, X-Run-Id %q", r.body, r.header.Get("X-Run-Id"))
	}
	if a := ext.authHeaders(); len(a) != 1 || a[0] != "Bearer ext-api-key-123" {
		t.Errorf("the external service got Authorization %q", a)
	}
	raw := h.runJSON(t, respond, r.header.Get("X-Run-Id"))
	for _, s := range []string{"ext-api-key-123", "whs-abc"} {
		if strings.Contains(raw, s) {
			t.Errorf("run record holds %q: %s", s, raw)
		}
	}
	if run := h.run(t, respond, r.header.Get("X-Run-Id")); run.Status != automation.RunSucceeded {
		t.Errorf("run status %s", run.Status)
	}

	r = call(t, h.workflow, "POST", "/webhook/last", "", `{"msg":"hi"}`, auth)
	r.into(t, 200, &got)
	if got["echo"] != "hi" || r.header.Get("X-Run-Id") == "" {
		t.Errorf("last output answer %s", r.body)
	}

	r = call(t, h.workflow, "POST", "/webhook/failing", "", `{}`, auth)
	e := r.wantError(t, 500, "RUN_FAILED")
	run := h.run(t, failing, r.header.Get("X-Run-Id"))
	if run.Status != automation.RunFailed || e.Message != run.Error || !strings.Contains(e.Message, "400") {
		t.Errorf("failed answer %q, run %s %q", e.Message, run.Status, run.Error)
	}

	// The run's call is held until the test releases it: the answer can
	// only be the 504 of the wait, never the run's result.
	r = call(t, h.workflow, "POST", "/webhook/slow", "", `{}`, auth)
	r.wantError(t, 504, "RUN_TIMEOUT")
	slowRun := r.header.Get("X-Run-Id")
	if run := h.run(t, slow, slowRun); run.Status != automation.RunRunning {
		t.Errorf("slow run at 504: %s", run.Status)
	}
	// Released, the run goes on and is recorded.
	close(ext.release)
	testwait.For(t, testwait.Hang, "the slow run to finish after its 504", func() bool {
		return h.run(t, slow, slowRun).Status != automation.RunRunning
	})
	if run := h.run(t, slow, slowRun); run.Status != automation.RunSucceeded {
		t.Errorf("slow run ended %s %q, want SUCCEEDED", run.Status, run.Error)
	}
	_ = last
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestAllowlist: the allowlist judges the real client address.
func TestAllowlist(t *testing.T) {
	t.Parallel() // its own servers and databases
	tests := []struct {
		name    string
		trusted []string
		allowed string
		xff     []string
		want    int
	}{
		{"open", nil, "[]", nil, 200},
		{"loopback allowed", nil, `["127.0.0.1"]`, nil, 200},
		{"loopback in range", nil, `["127.0.0.0/8"]`, nil, 200},
		{"not allowed", nil, `["10.1.2.3"]`, nil, 403},
		{"spoofed XFF from an untrusted peer", nil, `["10.1.2.3"]`, []string{"10.1.2.3"}, 403},
		{"XFF from a trusted proxy", []string{"127.0.0.0/8"}, `["10.1.2.3"]`, []string{"10.1.2.3"}, 200},
		{"XFF chain: right-most untrusted", []string{"127.0.0.0/8", "10.0.0.0/8"}, `["203.0.113.7"]`, []string{"10.1.2.3, 203.0.113.7, 10.0.0.5"}, 200},
		{"XFF chain: spoofed left entry ignored", []string{"127.0.0.0/8", "10.0.0.0/8"}, `["10.1.2.3"]`, []string{"10.1.2.3, 203.0.113.7, 10.0.0.5"}, 403},
		{"XFF over two header lines", []string{"127.0.0.0/8"}, `["2001:db8::1"]`, []string{"198.51.100.1", "2001:db8::1"}, 200},
		{"XFF garbage from a trusted proxy", []string{"127.0.0.0/8"}, `["10.1.2.3"]`, []string{"not-an-ip"}, 403},
		{"trusted proxy without XFF is the client", []string{"127.0.0.0/8"}, `["127.0.0.1"]`, nil, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cfg HookConfig
			for _, p := range tt.trusted {
				cfg.TrustedProxies = append(cfg.TrustedProxies, netip.MustParsePrefix(p))
			}
			h := newHookEnv(t, cfg)
			fb := h.activeFlow(t, h.key, flowBuilderBody)
			h.activeFlow(t, h.key, workflowFlow("ips", "POST", "", ""))
			var sec automation.WebhookSecurity
			call(t, h.api, "POST", "/api/v1/flows/"+fb+"/webhook/security", h.key, `{"allowedIPs":`+tt.allowed+`}`).into(t, 200, &sec)
			wfID := ""
			var l listView
			call(t, h.api, "GET", "/api/v1/flows", h.key, "").into(t, 200, &l)
			for _, f := range l.Data {
				if f.Engine == "WORKFLOW_BUILDER" {
					wfID = f.ID
				}
			}
			call(t, h.api, "POST", "/api/v1/flows/"+wfID+"/webhook/security", h.key, `{"allowedIPs":`+tt.allowed+`}`).into(t, 200, &sec)
			for _, tc := range []struct {
				srv  *testServer
				path string
			}{{h.engine, "/api/v1/webhooks/" + fb}, {h.workflow, "/webhook/ips"}} {
				req, _ := http.NewRequest("POST", tc.srv.URL+tc.path, strings.NewReader(`{}`))
				req.Header.Set("Content-Type", "application/json")
				for _, x := range tt.xff {
					req.Header.Add("X-Forwarded-For", x)
				}
				resp, err := tc.srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				r := result{status: resp.StatusCode, header: resp.Header, body: b}
				if tt.want == 200 {
					r.started(t)
				} else {
					r.wantError(t, 403, "IP_NOT_ALLOWED")
				}
			}
		})
	}
}

// TestClientIP checks the address logic on its own, with peers a test
// cannot dial from, and the ClientIP override (Lambda's sourceIp).
func TestClientIP(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	tests := []struct {
		name, remote string
		xff          []string
		want         string
	}{
		{"IPv4 peer", "198.51.100.4:5555", nil, "198.51.100.4"},
		{"IPv6 peer", "[2001:db8::7]:443", nil, "2001:db8::7"},
		{"IPv6 peer with zone", "[fe80::1%eth0]:443", nil, "fe80::1"},
		{"4in6 peer", "[::ffff:198.51.100.4]:1", nil, "198.51.100.4"},
		{"untrusted peer's XFF ignored", "198.51.100.4:1", []string{"10.9.9.9"}, "198.51.100.4"},
		{"IPv6 trusted proxy", "[fd00::1]:1", []string{"2001:db8::9"}, "2001:db8::9"},
		{"IPv6 XFF with port", "10.0.0.1:1", []string{"[2001:db8::9]:8443"}, "2001:db8::9"},
		{"all hops trusted", "10.0.0.1:1", []string{"10.0.0.3, 10.0.0.2"}, "10.0.0.3"},
		{"garbage peer", "nonsense", nil, ""},
		{"empty hop", "10.0.0.1:1", []string{"1.2.3.4,,"}, ""},
	}
	rc := receiver{cfg: HookConfig{TrustedProxies: trusted}.withDefaults()}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/", nil)
			r.RemoteAddr = tt.remote
			for _, x := range tt.xff {
				r.Header.Add("X-Forwarded-For", x)
			}
			ip, ok := rc.clientIP(r)
			if got := map[bool]string{true: ip.String(), false: ""}[ok]; got != tt.want {
				t.Errorf("clientIP = %q (ok %v), want %q", got, ok, tt.want)
			}
		})
	}
	// The override replaces the socket and header logic entirely.
	override := receiver{cfg: HookConfig{TrustedProxies: trusted, ClientIP: func(*http.Request) (netip.Addr, bool) {
		return netip.MustParseAddr("2001:db8::42"), true
	}}.withDefaults()}
	r := httptest.NewRequest("POST", "/", nil)
	r.RemoteAddr = "10.0.0.1:1"
	r.Header.Set("X-Forwarded-For", "198.51.100.1")
	if ip, ok := override.clientIP(r); !ok || ip.String() != "2001:db8::42" {
		t.Errorf("override: %v %v", ip, ok)
	}
	f := automation.Flow{AllowedIPs: []string{"2001:db8::/32"}}
	if err := override.checkAllowed(r, f); err != nil {
		t.Errorf("IPv6 client in an IPv6 range refused: %v", err)
	}
	f.AllowedIPs = []string{"198.51.100.1"}
	if err := override.checkAllowed(r, f); err == nil {
		t.Error("IPv6 client admitted by an IPv4 allowlist")
	}
}

// TestIPv6Client dials the receiver over IPv6 loopback.
func TestIPv6Client(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	h := newHookEnv(t, HookConfig{})
	fb := h.activeFlow(t, h.key, flowBuilderBody)
	srv := httptest.NewUnstartedServer(NewWebhook(h.svc, HookConfig{}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	for _, tt := range []struct {
		allowed string
		want    int
	}{{`["::1"]`, 200}, {`["::/0"]`, 200}, {`["127.0.0.1"]`, 403}, {`["2001:db8::/32"]`, 403}} {
		var sec automation.WebhookSecurity
		call(t, h.api, "POST", "/api/v1/flows/"+fb+"/webhook/security", h.key, `{"allowedIPs":`+tt.allowed+`}`).into(t, 200, &sec)
		resp, err := http.Post(srv.URL+"/api/v1/webhooks/"+fb, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("allowlist %s: %d, want %d", tt.allowed, resp.StatusCode, tt.want)
		}
	}
}

// TestBodyLimit: 413 with and without Content-Length, reading nothing past
// the limit.
func TestBodyLimit(t *testing.T) {
	const limit = 64
	h := newHookEnv(t, HookConfig{MaxBody: limit})
	fb := h.activeFlow(t, h.key, flowBuilderBody)
	h.activeFlow(t, h.key, workflowFlow("limit", "POST", "", ""))
	atLimit := `{"a":"` + strings.Repeat("x", limit-8) + `"}`
	if len(atLimit) != limit {
		t.Fatal(len(atLimit))
	}
	for _, path := range []string{"/api/v1/webhooks/" + fb, "/webhook/limit"} {
		srv := h.workflow
		if strings.HasPrefix(path, "/api/") {
			srv = h.engine
		}
		t.Run(path, func(t *testing.T) {
			call(t, srv, "POST", path, "", atLimit).started(t)
			before := h.runs.count()
			call(t, srv, "POST", path, "", atLimit+" ").wantError(t, 413, "BODY_TOO_LARGE")

			// Chunked: no Content-Length; the writer is cut off at the limit.
			pr, pw := io.Pipe()
			go func() {
				chunk := []byte(strings.Repeat("y", 16))
				for i := 0; i < 1<<16; i++ { // up to 1 MiB
					if _, err := pw.Write(chunk); err != nil {
						return
					}
				}
				pw.Close()
			}()
			req, _ := http.NewRequest("POST", srv.URL+path, pr)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			pr.CloseWithError(io.ErrClosedPipe)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if req.ContentLength != 0 && req.ContentLength != -1 {
				t.Fatalf("request was not chunked: %d", req.ContentLength)
			}
			result{status: resp.StatusCode, header: resp.Header, body: b}.wantError(t, 413, "BODY_TOO_LARGE")
			if h.runs.count() != before {
				t.Error("an oversized body made a run")
			}
		})
	}
}

// TestRunsAPI: list, get and retry, and the 404s of other projects.
func TestRunsAPI(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	fb := h.activeFlow(t, h.key, `{"name":"fb","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"FILTER","condition":"trigger.body.n > 2"}]}`)
	var ids []string
	for n := range 5 {
		ids = append(ids, call(t, h.engine, "POST", "/api/v1/webhooks/"+fb, "", fmt.Sprintf(`{"n":%d}`, n)).started(t))
	}
	// One still RUNNING, the rest finished.
	last := ids[4]
	for _, e := range h.runs.claim(t, 4) {
		if _, err := e.execute(h.svc); err != nil {
			t.Fatal(err)
		}
	}

	// Pages of two, newest first, every run once.
	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		path := "/api/v1/flows/" + fb + "/runs?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		var l struct {
			Data    []automation.Run
			Cursor  *string
			HasMore bool
		}
		call(t, h.api, "GET", path, h.key, "").into(t, 200, &l)
		for _, r := range l.Data {
			seen = append(seen, r.ID)
		}
		if !l.HasMore {
			break
		}
		cursor = *l.Cursor
		if page > 5 {
			t.Fatal("too many pages")
		}
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
	if strings.Join(seen, ",") != strings.Join(want, ",") {
		t.Errorf("pages = %v, want %v", seen, want)
	}
	var l struct{ Data []automation.Run }
	call(t, h.api, "GET", "/api/v1/flows/"+fb+"/runs?status=RUNNING", h.key, "").into(t, 200, &l)
	if len(l.Data) != 1 || l.Data[0].ID != last {
		t.Errorf("RUNNING runs = %+v", l.Data)
	}
	call(t, h.api, "GET", "/api/v1/flows/"+fb+"/runs?status=DONE", h.key, "").wantError(t, 400, "")
	call(t, h.api, "GET", "/api/v1/flows/"+fb+"/runs?limit=0", h.key, "").wantError(t, 400, "")
	call(t, h.api, "GET", "/api/v1/flows/"+fb+"/runs?cursor=forged", h.key, "").wantError(t, 400, "")

	run := h.run(t, fb, ids[3])
	if run.Status != automation.RunSucceeded || run.FlowID != fb || string(run.Trigger.Body) != `{"n":3}` || len(run.Steps) != 1 {
		t.Errorf("run = %+v", run)
	}

	// Retry: a new RUNNING run with the same trigger data.
	var nr automation.Run
	r := call(t, h.api, "POST", "/api/v1/flows/"+fb+"/runs/"+ids[3]+"/retry", h.key, "")
	r.into(t, 201, &nr)
	if nr.ID == ids[3] || nr.Status != automation.RunRunning || string(nr.Trigger.Body) != `{"n":3}` ||
		r.header.Get("Location") != "/api/v1/flows/"+fb+"/runs/"+nr.ID {
		t.Errorf("retry = %+v, Location %q", nr, r.header.Get("Location"))
	}
	drain(t, h.svc, h.runs)
	if got := h.run(t, fb, nr.ID); got.Status != automation.RunSucceeded {
		t.Errorf("retried run: %s", got.Status)
	}
	if got := h.run(t, fb, ids[3]); got.Status != automation.RunSucceeded || got.ID != ids[3] {
		t.Errorf("the original run changed: %+v", got)
	}

	// Finishing runs updated the flow's stats: all six finished, a false
	// FILTER ending a run as SUCCEEDED.
	var stats struct {
		RunCount    int64
		SuccessRate float64
		LastRun     *time.Time
	}
	call(t, h.api, "GET", "/api/v1/flows/"+fb, h.key, "").into(t, 200, &stats)
	if stats.RunCount != 6 || stats.SuccessRate != 100 || stats.LastRun == nil {
		t.Errorf("flow stats = %+v, want 6 runs, 100%%, a lastRun", stats)
	}

	// Another project sees none of it; unknown IDs are 404 too.
	other := newProjectKey(t, h.api, automation.PlanTeam)
	otherFlow := createFlow(t, h.api, other, flowBuilderBody).ID
	for _, tt := range []struct{ method, path, key, code string }{
		{"GET", "/api/v1/flows/" + fb + "/runs", other, "FLOW_NOT_FOUND"},
		{"GET", "/api/v1/flows/" + fb + "/runs/" + ids[0], other, "RUN_NOT_FOUND"},
		{"POST", "/api/v1/flows/" + fb + "/runs/" + ids[0] + "/retry", other, "RUN_NOT_FOUND"},
		{"GET", "/api/v1/flows/" + otherFlow + "/runs/" + ids[0], other, "RUN_NOT_FOUND"},
		{"GET", "/api/v1/flows/" + fb + "/runs/run_unknown", h.key, "RUN_NOT_FOUND"},
		{"POST", "/api/v1/flows/" + fb + "/runs/run_unknown/retry", h.key, "RUN_NOT_FOUND"},
		{"GET", "/api/v1/flows/flw_unknown/runs", h.key, "FLOW_NOT_FOUND"},
		{"GET", "/api/v1/flows/" + fb + "/runs", "", "UNAUTHORIZED"},
		{"POST", "/api/v1/flows/" + fb + "/runs/" + ids[0] + "/retry", "", "UNAUTHORIZED"},
	} {
		want := 404
		if tt.code == "UNAUTHORIZED" {
			want = 401
		}
		call(t, h.api, tt.method, tt.path, tt.key, "").wantError(t, want, tt.code)
	}
	if n := h.runs.count(); n != 6 {
		t.Errorf("%d runs, want 6 (refused retries made runs)", n)
	}
}

// TestReceiverAccessLog: one line per request, with the route, flow and
// run, and never the body or credentials.
func TestReceiverAccessLog(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	fb := h.activeFlow(t, h.key, flowBuilderBody)
	runID := call(t, h.engine, "POST", "/api/v1/webhooks/"+fb, "", `{"marker":"body-marker-1"}`, "Authorization: Bearer log-secret").started(t)
	call(t, h.engine, "POST", "/api/v1/webhooks/"+fb, "", `not json body-marker-2`).wantError(t, 400, "INVALID_JSON")
	logs := h.log.String()
	for _, s := range []string{"body-marker", "log-secret"} {
		if strings.Contains(logs, s) {
			t.Errorf("log holds %q: %s", s, logs)
		}
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 2 || lines[0]["runId"] != runID || lines[0]["flowId"] != fb || lines[0]["status"] != 200.0 ||
		lines[0]["route"] != "POST /api/v1/webhooks/{flowId}" || lines[1]["status"] != 400.0 {
		t.Errorf("access lines = %v", lines)
	}
}

// TestReceiverFuzz: garbage methods, paths, headers and bodies get a
// documented 4xx JSON error, never a 5xx.
func TestReceiverFuzz(t *testing.T) {
	h := newHookEnv(t, HookConfig{MaxBody: 4096})
	fb := h.activeFlow(t, h.key, flowBuilderBody)
	h.activeFlow(t, h.key, workflowFlow("fz", "ANY", `,"responseMode":"ON_COMPLETION","authentication":{"type":"BASIC","username":"u","password":"p"}`, ""))
	h.activeFlow(t, h.key, workflowFlow("fz2", "POST", `,"signature":{"header":"X-Sig","secret":"s","prefix":"sha256="}`, ""))
	methods := []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE", "FOO", "get", "M-SEARCH"}
	paths := []string{"/api/v1/webhooks/" + fb, "/api/v1/webhooks/" + fb + "/", "/api/v1/webhooks/%00", "/api/v1/webhooks/" + strings.Repeat("a", 300),
		"/api/v1/webhooks/..%2F..%2Fetc", "/webhook/fz", "/webhook/fz2", "/webhook/fz/", "/webhook//fz", "/webhook/%F0%9F%92%A5", "/webhook/" + strings.Repeat("a/", 150),
		"/webhook/fz?%zz=1&a=%", "/webhook-test/fz", "/"}
	headers := [][]string{nil, {"Content-Type", "application/json; charset=\"unterminated"}, {"Content-Type", "application/x-www-form-urlencoded"},
		{"Authorization", "Basic !!!"}, {"Authorization", "Basic " + b64("u:p")}, {"X-Forwarded-For", strings.Repeat("1.2.3.4, ", 200)},
		{"X-Sig", "sha256=zz"}, {"Content-Type", "multipart/form-data; boundary=x"}}
	bodies := []string{"", "{", "\x00\xff\xfe", `{"a":1}`, "a=%zz&b", strings.Repeat("[", 5000), `"` + strings.Repeat("\\u0000", 100) + `"`}
	n := 0
	for i, m := range methods {
		for j, p := range paths {
			hdr := headers[(i+j)%len(headers)]
			body := bodies[(i*3+j)%len(bodies)]
			srv := h.workflow
			if strings.HasPrefix(p, "/api/") {
				srv = h.engine
			}
			req, err := http.NewRequest(m, srv.URL+p, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if hdr != nil {
				req.Header.Set(hdr[0], hdr[1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", m, p, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			n++
			if resp.StatusCode >= 500 {
				t.Errorf("%s %s (%v, %q) = %d %s", m, p, hdr, clipBytes([]byte(body)), resp.StatusCode, b)
			}
			if resp.StatusCode >= 400 && m != "HEAD" {
				var e errorBody
				if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" || e.Error.RequestID != resp.Header.Get("X-Request-Id") {
					t.Errorf("%s %s = %d, not an error envelope: %s", m, p, resp.StatusCode, b)
				}
			}
		}
	}
	if n != len(methods)*len(paths) {
		t.Fatal(n)
	}
}

// The point 4: project C could save a flow on project A's path and
// take over its CORS preflight. Paths are one namespace across projects
// (409 at save time), and a preflight answers for the method it asks about,
// from that method's flow.
func TestPathNamespaceAndPreflight(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	greet := h.activeFlow(t, h.key, workflowFlow("greet", "POST", `,"allowedOrigins":["https://a.example"]`, ""))
	keyC := newProjectKey(t, h.api, automation.PlanFree)

	evil := workflowFlow("greet", "GET", `,"allowedOrigins":["https://evil.example"]`, "")
	e := call(t, h.api, "POST", "/api/v1/flows", keyC, evil).wantError(t, http.StatusConflict, "ROUTE_CONFLICT")
	if strings.Contains(e.Message, greet) {
		t.Errorf("conflict message %q names A's flow", e.Message)
	}
	// Nor by moving a flow of C there.
	other := createFlow(t, h.api, keyC, workflowFlow("c-own", "GET", "", ""))
	call(t, h.api, "POST", "/api/v1/flows/"+other.ID, keyC, evil).wantError(t, http.StatusConflict, "ROUTE_CONFLICT")

	// A's own GET flow on the path, with other origins, is fine.
	h.activeFlow(t, h.key, workflowFlow("greet", "GET", `,"allowedOrigins":["https://reader.example"]`, ""))

	preflight := func(origin, method string) result {
		return call(t, h.workflow, "OPTIONS", "/webhook/greet", "", "", "Origin: "+origin, "Access-Control-Request-Method: "+method)
	}
	tests := []struct {
		origin, method, wantOrigin, wantMethods string
	}{
		{"https://a.example", "POST", "https://a.example", "POST, OPTIONS"},
		{"https://reader.example", "POST", "", ""}, // GET's origin, asking for POST
		{"https://reader.example", "GET", "https://reader.example", "GET, OPTIONS"},
		{"https://a.example", "GET", "", ""},
		{"https://evil.example", "POST", "", ""},
		{"https://a.example", "PUT", "", ""}, // no flow serves PUT
		{"https://a.example", "", "", ""},    // not a preflight
	}
	for _, tt := range tests {
		r := preflight(tt.origin, tt.method)
		if r.status != http.StatusNoContent || r.header.Get("Allow") != "GET, POST, OPTIONS" ||
			r.header.Get("Access-Control-Allow-Origin") != tt.wantOrigin ||
			r.header.Get("Access-Control-Allow-Methods") != tt.wantMethods {
			t.Errorf("preflight %s from %s = %d Allow %q ACAO %q ACAM %q; want ACAO %q ACAM %q", tt.method, tt.origin, r.status,
				r.header.Get("Allow"), r.header.Get("Access-Control-Allow-Origin"), r.header.Get("Access-Control-Allow-Methods"),
				tt.wantOrigin, tt.wantMethods)
		}
	}
	// A flow that does not answer (inactive) gives no CORS either; a path
	// none of whose flows answers is a 404.
	createFlow(t, h.api, h.key, workflowFlow("greet", "PUT", "", ""))
	r := preflight("https://a.example", "PUT")
	if r.status != http.StatusNoContent || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight for an inactive flow's method = %d %v", r.status, r.header)
	}
	createFlow(t, h.api, h.key, workflowFlow("sleepy", "POST", "", ""))
	call(t, h.workflow, "OPTIONS", "/webhook/sleepy", "", "", "Origin: https://a.example", "Access-Control-Request-Method: POST").
		wantError(t, http.StatusNotFound, "WEBHOOK_NOT_FOUND")

	// DELETE names A's methods only.
	r = call(t, h.workflow, "DELETE", "/webhook/greet", "", "")
	r.wantError(t, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED")
	if got := r.header.Get("Allow"); got != "GET, POST, PUT" {
		t.Errorf("Allow = %q, want GET, POST, PUT", got)
	}
	// Deleting A's flows frees the path for C.
	var l listView
	call(t, h.api, "GET", "/api/v1/flows", h.key, "").into(t, 200, &l)
	for _, f := range l.Data {
		if f.Engine == "WORKFLOW_BUILDER" {
			if r := call(t, h.api, "DELETE", "/api/v1/flows/"+f.ID, h.key, ""); r.status != http.StatusNoContent {
				t.Fatalf("delete %s: %d %s", f.ID, r.status, r.body)
			}
		}
	}
	createFlow(t, h.api, keyC, evil)
}
