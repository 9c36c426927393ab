package deploy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/httpapi"
)

// answer is one reply, from the Lambda path or from flowd over HTTP.
type answer struct {
	status int
	header http.Header
	body   string
	b64    bool
}

// lambdaAnswer is a proxy response as an answer.
func lambdaAnswer(resp events.APIGatewayProxyResponse) answer {
	h := http.Header(resp.MultiValueHeaders).Clone()
	if h == nil {
		h = http.Header{}
	}
	for k, v := range resp.Headers {
		h.Set(k, v)
	}
	return answer{status: resp.StatusCode, header: h, body: resp.Body, b64: resp.IsBase64Encoded}
}

// flowdCall sends a bodiless request to one of flowd's receivers, served
// over real HTTP on loopback.
func flowdCall(t *testing.T, method, url string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// headHeaders are the headers a HEAD answer must carry as flowd sends
// them: the length and type of the body a GET would get, and the rest of
// the receiver's headers.
var headHeaders = []string{"Content-Length", "Content-Type", "Allow", "Cache-Control", "X-Alive",
	"Access-Control-Allow-Origin", "X-Content-Type-Options", "Content-Security-Policy"}

// sameAsFlowd checks a Lambda HEAD answer against flowd's for the same
// request: status, headers, no body, and a Content-Length that is the
// length of the body the function answers a GET with (getBody, "" when
// GET is not comparable).
func sameAsFlowd(t *testing.T, lam, fd answer, wantStatus int) {
	t.Helper()
	if lam.status != wantStatus || fd.status != wantStatus {
		t.Errorf("status: Lambda %d, flowd %d, want %d", lam.status, fd.status, wantStatus)
	}
	if lam.body != "" || lam.b64 {
		t.Errorf("Lambda HEAD answer has a body: %q (base64 %v)", lam.body, lam.b64)
	}
	if fd.body != "" {
		t.Errorf("flowd HEAD answer has a body: %q", fd.body)
	}
	for _, k := range headHeaders {
		if l, f := lam.header.Get(k), fd.header.Get(k); l != f {
			t.Errorf("%s: Lambda %q, flowd %q", k, l, f)
		}
	}
	if (lam.header.Get("X-Run-Id") == "") != (fd.header.Get("X-Run-Id") == "") {
		t.Errorf("X-Run-Id: Lambda %q, flowd %q", lam.header.Get("X-Run-Id"), fd.header.Get("X-Run-Id"))
	}
	if lam.header.Get("X-Request-Id") == "" {
		t.Error("Lambda HEAD answer has no X-Request-Id")
	}
}

// bodyLength checks that a HEAD answer's Content-Length is the length of
// the body GET got.
func bodyLength(t *testing.T, head, get answer) {
	t.Helper()
	n, err := strconv.Atoi(head.header.Get("Content-Length"))
	if err != nil || n == 0 || n != len(get.body) {
		t.Errorf("HEAD Content-Length %q, want the GET body's length %d (%q)", head.header.Get("Content-Length"), len(get.body), get.body)
	}
	if head.header.Get("Content-Type") != get.header.Get("Content-Type") {
		t.Errorf("HEAD Content-Type %q, GET's %q", head.header.Get("Content-Type"), get.header.Get("Content-Type"))
	}
}

// TestHeadDeliveries sends HEAD (and for comparison GET) proxy events
// through the receivers' Lambda path (API Gateway REST proxy event, the
// proxy adapter, the same handlers flowd serves) on moto, and the same
// requests to flowd's receivers on the same tables over real HTTP: both
// answer alike, and the Lambda answer to HEAD has no body, as API Gateway
// must not send one.
func TestHeadDeliveries(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	wf, err := awsapp.NewWorkflowHookHandler(ctx, st.aws, st.cfgOf("WorkflowHookFunction"))
	if err != nil {
		t.Fatal(err)
	}
	hook, err := awsapp.NewWebhookHandler(ctx, st.aws, st.cfgOf("WebhookFunction"))
	if err != nil {
		t.Fatal(err)
	}
	// flowd's receivers (its aws backend builds the Service the same way).
	a, err := awsapp.New(ctx, st.aws, st.cfg, awsapp.Parts{Name: "flowd"})
	if err != nil {
		t.Fatal(err)
	}
	hc := httpapi.HookConfig{SyncTimeout: st.cfg.SyncTimeout}
	flowdWF := httptest.NewServer(httpapi.NewWorkflowHook(a.Svc, hc))
	t.Cleanup(flowdWF.Close)
	flowdHook := httptest.NewServer(httpapi.NewWebhook(a.Svc, hc))
	t.Cleanup(flowdHook.Close)

	// wfEvent is workflowhook-head.json for another path and method.
	wfEvent := func(method, path string) []byte {
		raw := event(t, "workflowhook-head.json", map[string]string{
			"deploys/status": path, `"HEAD"`: `"` + method + `"`,
		})
		return raw
	}

	// IMMEDIATE, ANY method: the events file's flow.
	status := st.flow(t, `{"name": "Status probe", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "ANY", "path": "deploys/status"}},
		"steps": [{"name": "note", "type": "SET", "values": {"method": "{{ trigger.method }}"}}]}`, true)
	t.Run("immediate", func(t *testing.T) {
		lam := lambdaAnswer(invoke(t, wf, event(t, "workflowhook-head.json", nil)))
		fd := flowdCall(t, "HEAD", flowdWF.URL+"/webhook/deploys/status")
		sameAsFlowd(t, lam, fd, 200)
		if ct := lam.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q, want application/json", ct)
		}
		get := lambdaAnswer(invoke(t, wf, wfEvent("GET", "deploys/status")))
		if get.status != 200 || !strings.Contains(get.body, `"status":"RUNNING"`) {
			t.Fatalf("GET: %d %s", get.status, get.body)
		}
		bodyLength(t, lam, get)
		// The HEAD delivery is a run like any other, recorded with its
		// method.
		runID := lam.header.Get("X-Run-Id")
		r, err := st.store.Run(ctx, st.project.ID, status.ID, runID)
		if err != nil {
			t.Fatalf("run %q of the HEAD delivery: %v", runID, err)
		}
		if r.Trigger.Method != "HEAD" || r.Status != automation.RunRunning {
			t.Errorf("run = %s %s, want a RUNNING HEAD delivery", r.Trigger.Method, r.Status)
		}
	})

	// ON_COMPLETION, HEAD only: the run's RESPOND answers, its body left
	// out and its length kept.
	alive := st.flow(t, `{"name": "Liveness", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "HEAD", "path": "deploys/alive", "responseMode": "ON_COMPLETION"}},
		"steps": [{"name": "reply", "type": "RESPOND", "statusCode": 203, "headers": {"X-Alive": "yes"},
			"contentType": "text/plain", "body": "alive as {{ trigger.method }}"}]}`, true)
	t.Run("on completion", func(t *testing.T) {
		lam := lambdaAnswer(invoke(t, wf, wfEvent("HEAD", "deploys/alive")))
		fd := flowdCall(t, "HEAD", flowdWF.URL+"/webhook/deploys/alive")
		sameAsFlowd(t, lam, fd, 203)
		if lam.header.Get("X-Alive") != "yes" || !strings.HasPrefix(lam.header.Get("Content-Type"), "text/plain") {
			t.Errorf("headers %v, want the RESPOND step's", lam.header)
		}
		if cl := lam.header.Get("Content-Length"); cl != strconv.Itoa(len("alive as HEAD")) {
			t.Errorf("Content-Length %q, want the length of %q", cl, "alive as HEAD")
		}
		runID := lam.header.Get("X-Run-Id")
		r, err := st.store.Run(ctx, st.project.ID, alive.ID, runID)
		if err != nil {
			t.Fatalf("run %q of the HEAD delivery: %v", runID, err)
		}
		if r.Trigger.Method != "HEAD" || r.Status != automation.RunSucceeded || r.Response == nil || r.Response.StatusCode != 203 {
			t.Errorf("run = %s %s %+v, want a SUCCEEDED HEAD delivery with its response", r.Trigger.Method, r.Status, r.Response)
		}
		// GET is not this flow's method: 405, as flowd says it.
		get := lambdaAnswer(invoke(t, wf, wfEvent("GET", "deploys/alive")))
		fdGet := flowdCall(t, "GET", flowdWF.URL+"/webhook/deploys/alive")
		if get.status != 405 || fdGet.status != 405 || get.header.Get("Allow") != "HEAD" || fdGet.header.Get("Allow") != "HEAD" {
			t.Errorf("GET: Lambda %d Allow %q, flowd %d Allow %q; want 405 Allow HEAD",
				get.status, get.header.Get("Allow"), fdGet.status, fdGet.header.Get("Allow"))
		}
		if !strings.Contains(get.body, `"METHOD_NOT_ALLOWED"`) {
			t.Errorf("GET body %q, want the error envelope", get.body)
		}
	})

	// A POST flow refuses HEAD: 405 with Allow, the envelope's length, no
	// body, and no run.
	st.flow(t, `{"name": "Push only", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "deploys/push"}}}`, true)
	t.Run("method not allowed", func(t *testing.T) {
		lam := lambdaAnswer(invoke(t, wf, wfEvent("HEAD", "deploys/push")))
		fd := flowdCall(t, "HEAD", flowdWF.URL+"/webhook/deploys/push")
		sameAsFlowd(t, lam, fd, 405)
		if lam.header.Get("Allow") != "POST" || lam.header.Get("X-Run-Id") != "" {
			t.Errorf("Allow %q, X-Run-Id %q; want POST and no run", lam.header.Get("Allow"), lam.header.Get("X-Run-Id"))
		}
		// GET's envelope, but for the method it names.
		get := lambdaAnswer(invoke(t, wf, wfEvent("GET", "deploys/push")))
		get.body = strings.Replace(get.body, "not GET", "not HEAD", 1)
		bodyLength(t, lam, get)
	})

	t.Run("unknown path", func(t *testing.T) {
		lam := lambdaAnswer(invoke(t, wf, wfEvent("HEAD", "deploys/nothing-here")))
		fd := flowdCall(t, "HEAD", flowdWF.URL+"/webhook/deploys/nothing-here")
		sameAsFlowd(t, lam, fd, 404)
	})

	// The management API answers HEAD on its GET routes through the same
	// adapter: no body, the GET body's length.
	t.Run("management api", func(t *testing.T) {
		api, err := management.NewHandler(ctx, st.aws, st.cfgOf("ApiFunction"))
		if err != nil {
			t.Fatal(err)
		}
		list := func(method string) answer {
			return lambdaAnswer(invoke(t, api, event(t, "api-list-flows.json", map[string]string{
				"__API_KEY__": st.key, `"httpMethod": "GET"`: `"httpMethod": "` + method + `"`,
			})))
		}
		head, get := list("HEAD"), list("GET")
		if head.status != 200 || get.status != 200 || head.body != "" || head.b64 || !strings.Contains(get.body, `"data"`) {
			t.Fatalf("HEAD %d %q, GET %d %.100s; want 200 both, HEAD without a body", head.status, head.body, get.status, get.body)
		}
		bodyLength(t, head, get)
	})

	// The flow builder receiver takes POST only: HEAD is 405 Allow POST,
	// on an existing flow and an unknown one alike (the method is checked
	// before the lookup).
	form := st.flow(t, formFlow, true)
	hookEvent := func(method, flowID string) []byte {
		return event(t, "webhook-post.json", map[string]string{
			"__FLOW_ID__": flowID, `"httpMethod": "POST"`: `"httpMethod": "` + method + `"`,
		})
	}
	for _, id := range []string{form.ID, "flw_doesnotexist000000000"} {
		t.Run("flow builder "+id, func(t *testing.T) {
			lam := lambdaAnswer(invoke(t, hook, hookEvent("HEAD", id)))
			fd := flowdCall(t, "HEAD", flowdHook.URL+"/api/v1/webhooks/"+id)
			sameAsFlowd(t, lam, fd, 405)
			if lam.header.Get("Allow") != "POST" || lam.header.Get("X-Run-Id") != "" {
				t.Errorf("Allow %q, X-Run-Id %q; want POST and no run", lam.header.Get("Allow"), lam.header.Get("X-Run-Id"))
			}
			get := lambdaAnswer(invoke(t, hook, hookEvent("GET", id)))
			if get.status != 405 || !strings.Contains(get.body, `"METHOD_NOT_ALLOWED"`) {
				t.Errorf("GET: %d %s, want 405 METHOD_NOT_ALLOWED", get.status, get.body)
			}
			bodyLength(t, lam, get)
		})
	}
}
