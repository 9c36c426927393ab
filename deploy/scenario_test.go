package deploy

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/jscode"
	"flowservice/pkg/lambdacode"
	"flowservice/pkg/oauth/oauthtest"
	"flowservice/pkg/sandbox"
)

// TestEveryFunctionPath drives each function through the paths that make
// AWS calls, so that TestGrantsMatchObservedCalls sees them all: the
// management API over connections, flows of every trigger (schedules
// included), Test Trigger, runs (detail, retry) and deletes of flows with
// runs; the webhook receiver with a capture, a body large enough for the
// payload bucket and a repeated delivery of it; the runner with a
// connection's credential; the workflow receiver inline and on its test URL;
// CODE steps through the code function and OAuth2 connections whose token
// is refreshed, from the runner and the workflow receiver.
func TestEveryFunctionPath(t *testing.T) {
	recordGrants(t)
	e := newE2E(t, 5, automation.RunPolicy{MaxAttempts: 3})
	ext, _ := external(t, 200)
	// CODE steps reach the code function through the Lambda Invoke API
	// (loopback, running the real code handler).
	code := newCodeFunction(t)
	runnerCfg := e.cfgOf("RunnerFunction")
	runnerCfg.Code = lambdacode.New(code.endpoint(t, "RunnerFunction"), codeFunctionName)
	runner, err := awsapp.NewRunnerHandler(t.Context(), e.aws, runnerCfg)
	if err != nil {
		t.Fatal(err)
	}
	e.runner = runner
	api := func(method, path, body string, want int) map[string]any {
		t.Helper()
		status, b := call(t, e.api, method, path, e.key, body)
		if status != want {
			t.Fatalf("%s %s = %d %.300v, want %d", method, path, status, b, want)
		}
		return b
	}
	drain := func() {
		for i := 0; i < 5; i++ {
			if e.poll(t) == 0 && i > 0 {
				return
			}
		}
	}

	conn := api("POST", "/api/v1/connections", `{"name": "Chat", "app": "chat", "type": "API_KEY", "value": {"apiKey": "sk-not-real-1"}}`, 201)
	connID := conn["id"].(string)
	api("GET", "/api/v1/connections", "", 200)
	api("GET", "/api/v1/connections/"+connID, "", 200)

	f := api("POST", "/api/v1/flows", fmt.Sprintf(`{"name": "Intake", "engine": "FLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"idempotencyHeader": "X-Delivery"}},
		"steps": [{"name": "notify", "type": "HTTP", "method": "POST", "url": %q, "connectionId": %q, "body": {"n": "{{ trigger.body.n }}"}}]}`, ext.URL, connID), 201)
	flowID := f["id"].(string)
	api("POST", "/api/v1/flows/"+flowID+"/enable", "", 200)
	api("GET", "/api/v1/flows", "", 200)
	api("GET", "/api/v1/flows/"+flowID+"/webhook", "", 200)
	api("GET", "/api/v1/flows/"+flowID+"/webhook/security", "", 200)
	api("POST", "/api/v1/flows/"+flowID+"/webhook/security", `{"allowedIPs": ["198.51.100.0/24"]}`, 200)
	api("POST", "/api/v1/flows/"+flowID+"/webhook/test", "", 200)

	// The webhook receiver: a captured delivery, then one too large for an
	// item, then the same delivery again (its run's body read back from S3).
	status, b := call(t, e.hook, "POST", "/api/v1/webhooks/"+flowID, "", `{"n": 1}`)
	if status != 200 {
		t.Fatalf("webhook = %d %v", status, b)
	}
	run0 := b["runId"].(string)
	api("GET", "/api/v1/flows/"+flowID+"/webhook/sample", "", 200)
	big := `{"n": 2, "pad": "` + strings.Repeat("x", 500_000) + `"}`
	first := hookWith(t, e.hook, flowID, big, "delivery-1")
	again := hookWith(t, e.hook, flowID, big, "delivery-1")
	if first == "" || first != again {
		t.Fatalf("repeated delivery: runs %q and %q, want the same", first, again)
	}
	drain()
	run := api("GET", "/api/v1/flows/"+flowID+"/runs/"+first, "", 200)
	if run["status"] != "SUCCEEDED" {
		t.Fatalf("run status %v", run["status"])
	}
	api("GET", "/api/v1/flows/"+flowID+"/runs", "", 200)
	api("GET", "/api/v1/runs?flowId="+flowID+"&status=SUCCEEDED", "", 200)
	api("GET", "/api/v1/runs?status=SUCCEEDED", "", 200) // the project and status index
	api("GET", "/api/v1/runs", "", 200)                  // the project index
	// A large delivery without the idempotency header, retried: the new
	// run's trigger goes to the payload bucket too.
	status, b = call(t, e.hook, "POST", "/api/v1/webhooks/"+flowID, "", big)
	if status != 200 {
		t.Fatalf("webhook = %d", status)
	}
	drain()
	api("POST", "/api/v1/flows/"+flowID+"/runs/"+b["runId"].(string)+"/retry", "", 201)
	api("POST", "/api/v1/flows/"+flowID+"/runs/"+run0+"/retry", "", 201)
	drain()

	// The runner: a credential the service refuses (the connection goes to
	// ERROR) and an answer too large for the run's item.
	refusing, _ := external(t, 401)
	bigAnswer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"pad": %q}`, strings.Repeat("y", 500_000))
	}))
	t.Cleanup(bigAnswer.Close)
	for _, url := range []string{refusing.URL, bigAnswer.URL} {
		g := api("POST", "/api/v1/flows", fmt.Sprintf(`{"name": "Out", "engine": "FLOW_BUILDER",
			"steps": [{"name": "call", "type": "HTTP", "method": "GET", "url": %q, "connectionId": %q}]}`, url, connID), 201)
		gID := g["id"].(string)
		api("POST", "/api/v1/flows/"+gID+"/enable", "", 200)
		if status, b := call(t, e.hook, "POST", "/api/v1/webhooks/"+gID, "", `{}`); status != 200 {
			t.Fatalf("webhook = %d %v", status, b)
		}
		drain()
		api("DELETE", "/api/v1/flows/"+gID, "", 204)
	}

	// Flow secrets: a signed webhook (the secret stored on create, replaced
	// on update, read by the receiver) and the list filters by status.
	sg := api("POST", "/api/v1/flows", `{"name": "Signed", "engine": "FLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"signature": {"header": "X-Sig", "prefix": "sha256=", "secret": "s3cret-value"}}}}`, 201)
	sgID := sg["id"].(string)
	api("POST", "/api/v1/flows/"+sgID, `{"name": "Signed v2", "engine": "FLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"signature": {"header": "X-Sig", "prefix": "sha256=", "secret": "n3w-secret-value"}}}}`, 200)
	api("POST", "/api/v1/flows/"+sgID+"/enable", "", 200)
	mac := hmac.New(sha256.New, []byte("n3w-secret-value"))
	mac.Write([]byte(`{"signed": true}`))
	req := proxyRequest("POST", "/api/v1/webhooks/"+sgID, "", `{"signed": true}`)
	req.MultiValueHeaders["X-Sig"] = []string{"sha256=" + hex.EncodeToString(mac.Sum(nil))}
	if resp, err := e.hook(t.Context(), req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("signed webhook = %d %s %v", resp.StatusCode, resp.Body, err)
	}
	drain()
	for _, q := range []struct{ path, status string }{{"/api/v1/flows", "ACTIVE"}, {"/api/v1/flows/" + sgID + "/runs", "SUCCEEDED"}} {
		req := proxyRequest("GET", q.path, e.key, "")
		req.MultiValueQueryStringParameters = map[string][]string{"status": {q.status}}
		if resp, err := e.api(t.Context(), req); err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, `"id"`) {
			t.Fatalf("GET %s?status=%s = %d %.300s %v", q.path, q.status, resp.StatusCode, resp.Body, err)
		}
	}
	api("DELETE", "/api/v1/flows/"+sgID, "", 204)

	// The webhook receiver when the queue refuses the message: the run it
	// wrote is deleted again, so that the sender's retry is not a duplicate.
	broken := *e.stack
	broken.cfg.QueueURL = e.cfg.QueueURL + "-missing"
	brokenHook, err := awsapp.NewWebhookHandler(t.Context(), e.aws, broken.cfgOf("WebhookFunction"))
	if err != nil {
		t.Fatal(err)
	}
	if status, b := call(t, brokenHook, "POST", "/api/v1/webhooks/"+flowID, "", `{"n": 5}`); status < 500 {
		t.Fatalf("webhook with the queue missing = %d %v, want a 5xx", status, b)
	}
	api("POST", "/api/v1/flows/"+flowID, `{"name": "Intake v2", "engine": "FLOW_BUILDER"}`, 200)
	api("POST", "/api/v1/flows/"+flowID+"/disable", "", 200)
	api("DELETE", "/api/v1/flows/"+flowID, "", 204)

	// Schedules: enable, update, disable, delete.
	s := api("POST", "/api/v1/flows", `{"name": "Nightly", "engine": "FLOW_BUILDER",
		"trigger": {"type": "SCHEDULE", "schedule": {"cron": "0 3 * * *"}}}`, 201)
	sID := s["id"].(string)
	api("POST", "/api/v1/flows/"+sID+"/enable", "", 200)
	// A firing, as EventBridge Scheduler sends it to the queue: the runner
	// starts the run and queues it.
	firing := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "firing-1", Body: fmt.Sprintf(
		`{"kind": "schedule", "project": %q, "flowId": %q, "executionId": "exec-1", "scheduledTime": "2026-11-22T03:00:00Z"}`, e.project.ID, sID)}}}
	if out, err := e.runner(t.Context(), firing); err != nil || len(out.BatchItemFailures) != 0 {
		t.Fatalf("schedule firing: %+v %v", out, err)
	}
	drain()
	api("POST", "/api/v1/flows/"+sID, `{"name": "Nightly", "engine": "FLOW_BUILDER",
		"trigger": {"type": "SCHEDULE", "schedule": {"cron": "0 4 * * *"}}}`, 200)
	api("POST", "/api/v1/flows/"+sID+"/disable", "", 200)
	api("POST", "/api/v1/flows/"+sID+"/enable", "", 200)
	api("DELETE", "/api/v1/flows/"+sID, "", 204)

	// OAuth2: an app (as flowctl adds it) and a connection authorized at a
	// loopback provider whose access tokens live 30 s, within the service's
	// one-minute refresh margin, so that every use refreshes: the app read,
	// the refreshed token stored.
	idp := oauthtest.Start(oauthtest.Options{RedirectBase: "https://flow.example", AccessTokenExp: 30 * time.Second})
	t.Cleanup(idp.Close)
	oauthConnID := oauthConnection(t, e.stack, idp)
	// The dashboard's connections page through the api function lists the
	// apps to connect; Connect sends the browser to the app's provider.
	session := dashboardSession(t, e.api, e.key)
	if resp := page(t, e.api, "GET", "/ui/connections", session, ""); resp.StatusCode != 200 ||
		!strings.Contains(resp.Body, "Connect idp") || !strings.Contains(resp.Body, "OAUTH2") {
		t.Fatalf("GET /ui/connections = %d %.600s", resp.StatusCode, resp.Body)
	}
	if resp := page(t, e.api, "GET", "/ui/connections/connect/idp", session, ""); resp.StatusCode != 302 ||
		!strings.HasPrefix(header(resp, "Location"), idp.AuthorizeURL+"?") {
		t.Fatalf("Connect idp = %d to %q", resp.StatusCode, header(resp, "Location"))
	}

	// The runner: a CODE step, a call with the OAuth2 connection, and the
	// flow's state (STORE).
	refreshes := idp.TokenRequests()
	cf := api("POST", "/api/v1/flows", fmt.Sprintf(`{"name": "Code", "engine": "FLOW_BUILDER",
		"steps": [{"name": "sum", "type": "CODE", "timeout": "5s", "code": "console.log('adding'); return {sum: trigger.body.a + trigger.body.b}"},
		          {"name": "me", "type": "HTTP", "method": "GET", "url": %q, "connectionId": %q},
		          {"name": "remember", "type": "STORE", "set": {"lastSum": "{{ steps.sum.sum }}"}}]}`, idp.ResourceURL, oauthConnID), 201)
	cfID := cf["id"].(string)
	api("POST", "/api/v1/flows/"+cfID+"/enable", "", 200)
	status, b = call(t, e.hook, "POST", "/api/v1/webhooks/"+cfID, "", `{"a": 2, "b": 3}`)
	if status != 200 {
		t.Fatalf("webhook = %d %v", status, b)
	}
	drain()
	run = api("GET", "/api/v1/flows/"+cfID+"/runs/"+b["runId"].(string), "", 200)
	if steps, _ := run["steps"].([]any); run["status"] != "SUCCEEDED" || len(steps) != 3 ||
		fmt.Sprint(steps[0].(map[string]any)["output"]) != "map[sum:5]" {
		t.Fatalf("CODE, OAuth2 and STORE run = %.600v", run)
	}
	if idp.TokenRequests() <= refreshes {
		t.Fatalf("the runner used the OAuth2 connection without refreshing its expired token")
	}
	api("DELETE", "/api/v1/flows/"+cfID, "", 204)

	// The workflow receiver: an ON_COMPLETION flow inline, and its test URL.
	whCfg := e.cfgOf("WorkflowHookFunction")
	whCfg.Code = lambdacode.New(code.endpoint(t, "WorkflowHookFunction"), codeFunctionName)
	wh, err := awsapp.NewWorkflowHookHandler(t.Context(), e.aws, whCfg)
	if err != nil {
		t.Fatal(err)
	}
	w := api("POST", "/api/v1/flows", fmt.Sprintf(`{"name": "Deploys", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "scenario/deploys", "responseMode": "ON_COMPLETION",
			"authentication": {"type": "HEADER", "name": "X-Token", "value": "tok-value"}}},
		"steps": [{"name": "notify", "type": "HTTP", "method": "POST", "url": %q, "connectionId": %q},
		          {"name": "check", "type": "CODE", "timeout": "5s", "code": "return {n: trigger.body.n * 2}"},
		          {"name": "me", "type": "HTTP", "method": "GET", "url": %q, "connectionId": %q},
		          {"name": "remember", "type": "STORE", "set": {"lastN": "{{ trigger.body.n }}"}},
		          {"name": "reply", "type": "RESPOND", "statusCode": 200, "body": {"ok": "yes", "last": "{{ state.lastN ?? 'none' }}"}}]}`, ext.URL, connID, idp.ResourceURL, oauthConnID), 201)
	wID := w["id"].(string)
	api("POST", "/api/v1/flows/"+wID+"/enable", "", 200)
	req = proxyRequest("POST", "/webhook/scenario/deploys", "", `{"n": 3, "pad": "`+strings.Repeat("z", 500_000)+`"}`)
	req.MultiValueHeaders["X-Token"] = []string{"tok-value"}
	refreshes = idp.TokenRequests()
	if resp, err := wh(t.Context(), req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("workflow webhook = %d %.300s %v", resp.StatusCode, resp.Body, err)
	}
	if idp.TokenRequests() <= refreshes {
		t.Fatalf("the workflow receiver used the OAuth2 connection without refreshing its expired token")
	}
	api("POST", "/api/v1/flows/"+wID+"/webhook/test", "", 200)
	req = proxyRequest("POST", "/webhook-test/scenario/deploys", "", `{"n": 4}`)
	req.MultiValueHeaders["X-Token"] = []string{"tok-value"}
	if resp, err := wh(t.Context(), req); err != nil || resp.StatusCode >= 500 {
		t.Fatalf("workflow test webhook = %d %.300s %v", resp.StatusCode, resp.Body, err)
	}
	api("DELETE", "/api/v1/flows/"+wID, "", 204)
	api("DELETE", "/api/v1/connections/"+connID, "", 204)

	// Sub-flows: the runner parks the caller, queues the child, runs it,
	// and the child's end wakes the caller with a message (CALL_FLOW).
	child := api("POST", "/api/v1/flows", `{"name": "Child", "engine": "FLOW_BUILDER",
		"steps": [{"name": "reply", "type": "RESPOND", "body": {"got": "{{ trigger.body.n }}"}}]}`, 201)["id"].(string)
	api("POST", "/api/v1/flows/"+child+"/enable", "", 200)
	caller := api("POST", "/api/v1/flows", fmt.Sprintf(`{"name": "Caller", "engine": "FLOW_BUILDER",
		"steps": [{"name": "sub", "type": "CALL_FLOW", "flowId": %q, "input": {"n": "{{ trigger.body.n }}"}}]}`, child), 201)["id"].(string)
	api("POST", "/api/v1/flows/"+caller+"/enable", "", 200)
	status, b = call(t, e.hook, "POST", "/api/v1/webhooks/"+caller, "", `{"n": 6}`)
	if status != 200 {
		t.Fatalf("webhook of the caller = %d %v", status, b)
	}
	drain()
	drain()
	if run := api("GET", "/api/v1/flows/"+caller+"/runs/"+b["runId"].(string), "", 200); run["status"] != "SUCCEEDED" {
		t.Fatalf("caller run = %v, want SUCCEEDED with its child's answer", run)
	}
}

// hookWith posts body to a flow's webhook with an idempotency header and
// returns the run's ID.
func hookWith(t *testing.T, h awsapp.ProxyHandler, flowID, body, delivery string) string {
	t.Helper()
	req := proxyRequest("POST", "/api/v1/webhooks/"+flowID, "", body)
	req.MultiValueHeaders["X-Delivery"] = []string{delivery}
	resp, err := h(t.Context(), req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("webhook with %s = %d %s %v", delivery, resp.StatusCode, resp.Body, err)
	}
	var b map[string]any
	_ = jsonUnmarshal(resp.Body, &b)
	id, _ := b["runId"].(string)
	return id
}

// codeFunctionName is the code function's name in TestEveryFunctionPath.
const codeFunctionName = "flow-test-code"

// codeFunction is the code function behind the Lambda Invoke API: the real
// handler (lambdacode.Handler over a sandbox pool whose children are this
// test binary, see TestMain).
type codeFunction struct {
	handle func(context.Context, automation.CodeRequest) (automation.CodeResult, error)
}

func newCodeFunction(t *testing.T) *codeFunction {
	t.Helper()
	pool, err := sandbox.New(sandbox.Config{Idle: 1, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	return &codeFunction{handle: lambdacode.Handler(pool, jscode.Check)}
}

// endpoint starts the Lambda Invoke API on loopback for one calling
// function and returns the AWS configuration that reaches it: each invoke
// of the code function is recorded as the caller's lambda:InvokeFunction
// on CodeFunction, as IAM would authorize it.
func (c *codeFunction) endpoint(t *testing.T, caller string) aws.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/")
		name, ok2 := strings.CutSuffix(name, "/invocations")
		if !ok || !ok2 || r.Method != http.MethodPost || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
			http.Error(w, `{"message": "unexpected request"}`, http.StatusBadRequest)
			return
		}
		if name != codeFunctionName {
			w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
			http.Error(w, `{"message": "Function not found"}`, http.StatusNotFound)
			return
		}
		record(caller, grant{"lambda:InvokeFunction", "CodeFunction"})
		var req automation.CodeRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"message": "bad payload"}`, http.StatusBadRequest)
			return
		}
		res, err := c.handle(r.Context(), req)
		if err != nil {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			_ = json.NewEncoder(w).Encode(map[string]string{"errorMessage": err.Error()})
			return
		}
		_ = json.NewEncoder(w).Encode(res)
	}))
	t.Cleanup(srv.Close)
	return aws.Config{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("testing", "testing", ""),
	}
}

// oauthConnection adds an OAuth2 app for idp and authorizes a connection of
// the stack's project through it, as flowctl oauth-apps add and the
// dashboard's Connect do, and returns the connection's ID.
func oauthConnection(t *testing.T, st *stack, idp *oauthtest.Server) string {
	t.Helper()
	ctx := t.Context()
	if _, err := st.svc.AddOAuthApp(ctx, automation.OAuthAppInput{
		Name: "idp", ClientID: oauthtest.ClientID, ClientSecret: oauthtest.ClientSecret,
		AuthorizeURL: idp.AuthorizeURL, TokenURL: idp.TokenURL, Scopes: []string{"read"},
	}); err != nil {
		t.Fatal(err)
	}
	const redirect = "https://flow.example/ui/oauth/callback"
	start, err := st.svc.StartOAuth(ctx, "idp", redirect)
	if err != nil {
		t.Fatal(err)
	}
	back, err := idp.Consent(start.URL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.svc.CompleteOAuth(ctx, st.project, automation.OAuthCompletion{
		App: "idp", RedirectURL: redirect, Code: back.Query().Get("code"), Verifier: start.Verifier,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c.ID
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// dashboardSession signs in to the dashboard through h (the api function)
// as a browser does: the sign-in form and its nonce cookie, then the form
// posted with the API key. It returns the session cookie ("name=value").
func dashboardSession(t *testing.T, h awsapp.ProxyHandler, key string) string {
	t.Helper()
	form := page(t, h, "GET", "/ui/signin", "", "")
	m := csrfField.FindStringSubmatch(form.Body)
	nonce := cookie(form, "flow_signin")
	if form.StatusCode != 200 || m == nil || nonce == "" {
		t.Fatalf("GET /ui/signin = %d, csrf %v, cookie %q", form.StatusCode, m, nonce)
	}
	resp := page(t, h, "POST", "/ui/signin", nonce, url.Values{"apiKey": {key}, "csrf": {html.UnescapeString(m[1])}}.Encode())
	session := cookie(resp, "flow_session")
	if resp.StatusCode != 303 || session == "" {
		t.Fatalf("POST /ui/signin = %d %.300s", resp.StatusCode, resp.Body)
	}
	return session
}

// page sends a browser's request for a dashboard page to h: with cookie
// ("name=value") if set, and body as a posted form.
func page(t *testing.T, h awsapp.ProxyHandler, method, path, cookie, body string) events.APIGatewayProxyResponse {
	t.Helper()
	req := proxyRequest(method, path, "", body)
	req.MultiValueHeaders["Content-Type"] = []string{"application/x-www-form-urlencoded"}
	if cookie != "" {
		req.MultiValueHeaders["Cookie"] = []string{cookie}
	}
	resp, err := h(t.Context(), req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body = string(b)
	}
	return resp
}

// cookie is "name=value" of the cookie named name that resp sets, or "".
func cookie(resp events.APIGatewayProxyResponse, name string) string {
	for _, c := range (&http.Response{Header: http.Header(resp.MultiValueHeaders)}).Cookies() {
		if c.Name == name && c.Value != "" {
			return c.Name + "=" + c.Value
		}
	}
	return ""
}
