package deploy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"flowservice/pkg/apps"
	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awstest"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/engine"
	"flowservice/pkg/oauth"
	"flowservice/pkg/s3payloads"
	"flowservice/pkg/sandbox"
	"flowservice/pkg/smsecrets"
)

// The test binary also serves as the code function's sandbox child
// (TestEveryFunctionPath runs CODE steps through the real code handler).
func TestMain(m *testing.M) {
	sandbox.MaybeServe()
	os.Exit(awstest.Main(m))
}

// stack is one deployment's resources on moto: what `sam deploy` would
// create, made by the test, plus a Service on the same tables to seed data.
type stack struct {
	aws     aws.Config
	cfg     awsapp.Config
	store   *dynamostore.Store
	svc     *automation.Service
	project automation.Project
	key     string
}

// newStack creates the tables, queue, bucket and cursor key secret of a
// deployment on moto_server, and a project with an API key.
func newStack(t *testing.T) *stack {
	t.Helper()
	ctx := context.Background()
	awsCfg := awstest.Start(t)
	name := awstest.UniqueName(t, "flow")
	tables := dynamostore.TableNames(name)
	db := dynamodb.NewFromConfig(awsCfg)
	if err := dynamostore.CreateTables(ctx, db, tables); err != nil {
		t.Fatal(err)
	}
	q, err := sqs.NewFromConfig(awsCfg).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	qa, err := sqs.NewFromConfig(awsCfg).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scheduler.NewFromConfig(awsCfg).CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	bucket := strings.ToLower(name)
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = true })
	if err := s3payloads.CreateBucket(ctx, s3c, bucket, 31); err != nil {
		t.Fatal(err)
	}
	// As GenerateSecretString makes it: 64 characters, no punctuation.
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	cursorKey := hex.EncodeToString(raw)
	sm := secretsmanager.NewFromConfig(awsCfg)
	sec, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String(name + "-cursor-key"), SecretString: aws.String(cursorKey),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Dashboard sign-in with OpenID Connect is on, as with the template's
	// Oidc* parameters: the api function reads its client secret at each
	// cold start (the provider is asked only at a sign-in).
	oidcSecret, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String(name + "-oidc-client"), SecretString: aws.String("oidc-client-secret"),
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := awsapp.Config{
		OIDC: awsapp.OIDCConfig{Issuer: "https://login.example.com", ClientID: "flows", ClientSecretARN: *oidcSecret.ARN,
			AllowedDomains: []string{"example.com"}, ViewerProject: "acme"},
		Stage: "test", Tables: tables, QueueURL: *q.QueueUrl, PayloadBucket: bucket,
		SecretPrefix: "flow/" + name, CursorKeySecretARN: *sec.ARN,
		QueueARN: qa.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], ScheduleGroup: name,
		SchedulerRoleARN: "arn:aws:iam::123456789012:role/" + name + "-scheduler",
		EngineURL:        "https://engine0api.execute-api.us-east-1.amazonaws.com/dev",
		WorkflowURL:      "https://wflow0api1.execute-api.us-east-1.amazonaws.com/dev",
		// The events come from 198.51.100.10.
		AllowedCIDRs: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("2001:db8::/32")},
		SyncTimeout:  10 * time.Second,
		LogOutput:    io.Discard,
	}
	if testing.Verbose() {
		cfg.LogOutput = os.Stderr
	}
	st := &stack{aws: awsCfg, cfg: cfg, store: dynamostore.New(db, tables, dynamostore.WithPayloads(s3payloads.New(s3c, bucket)))}
	st.svc, err = automation.NewService(automation.Config{
		Store: st.store, Secrets: smsecrets.New(sm, cfg.SecretPrefix), Checker: engine.Checker{},
		CursorKey: []byte(cursorKey), EngineURL: cfg.EngineURL, WorkflowURL: cfg.WorkflowURL,
		// OAuth2 apps and connections, as flowctl and the dashboard make
		// them (the providers in tests are on loopback).
		OAuthApps: st.store, OAuth: oauth.New(http.DefaultTransport), Polls: st.store,
		// The catalog the functions ship, for flows with ACTION steps.
		Apps: apps.MustLoad(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.project, err = st.svc.CreateProject(ctx, "acme", automation.PlanEnterprise); err != nil {
		t.Fatal(err)
	}
	if st.key, _, err = st.svc.CreateAPIKey(ctx, st.project.ID); err != nil {
		t.Fatal(err)
	}
	return st
}

// flow creates a flow from its JSON definition, enabled when active.
func (st *stack) flow(t *testing.T, def string, active bool) automation.Flow {
	t.Helper()
	var in automation.FlowInput
	if err := json.Unmarshal([]byte(def), &in); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f, err := st.svc.CreateFlow(ctx, st.project, in)
	if err != nil {
		t.Fatal(err)
	}
	if active {
		if f, err = st.svc.EnableFlow(ctx, st.project, f.ID); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// event reads an events/ file and fills in its placeholders, as a user of
// `make invoke-<function>` does by hand.
func event(t *testing.T, file string, placeholders map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "events", file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for k, v := range placeholders {
		s = strings.ReplaceAll(s, k, v)
	}
	if i := strings.Index(s, "__"); i >= 0 && strings.Contains(s[i+2:], "__") {
		if j := strings.Index(s[i+2:], "__"); j < 40 && !strings.ContainsAny(s[i+2:i+2+j], " \"") {
			t.Fatalf("%s: placeholder %s left unfilled", file, s[i:i+4+j])
		}
	}
	return []byte(s)
}

// invoke passes a proxy event to a handler through JSON, as the Lambda
// runtime does, and returns the answer.
func invoke(t *testing.T, h awsapp.ProxyHandler, raw []byte) events.APIGatewayProxyResponse {
	t.Helper()
	var req events.APIGatewayProxyRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatalf("event: %v", err)
	}
	resp, err := h(context.Background(), req)
	if err != nil {
		t.Fatalf("handler error (the invocation fails): %v", err)
	}
	return resp
}

func decodeBody(t *testing.T, resp events.APIGatewayProxyResponse) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &m); err != nil {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
	return m
}

func header(resp events.APIGatewayProxyResponse, k string) string {
	return http.Header(resp.MultiValueHeaders).Get(k)
}

const formFlow = `{"name": "Form intake", "engine": "FLOW_BUILDER",
	"steps": [{"name": "shape", "type": "SET", "values": {"email": "{{ trigger.body.data.email }}"}}]}`

// TestAPIEvents invokes the api function's handler with each api-*.json
// event against moto-backed tables and secrets.
func TestAPIEvents(t *testing.T) {
	st := newStack(t)
	h, err := management.NewHandler(context.Background(), st.aws, st.cfgOf("ApiFunction"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := st.flow(t, formFlow, false)
	if _, err := st.svc.CreateConnection(ctx, st.project, automation.ConnectionInput{
		Name: "Chat", App: "chat", Type: "API_KEY", Value: json.RawMessage(`{"apiKey": "sk-not-real-123"}`),
	}); err != nil {
		t.Fatal(err)
	}
	ph := map[string]string{"__API_KEY__": st.key, "__FLOW_ID__": f.ID}

	tests := []struct {
		file       string
		wantStatus int
		check      func(t *testing.T, body map[string]any, raw string)
	}{
		{"api-list-flows.json", 200, func(t *testing.T, b map[string]any, _ string) {
			if data, _ := b["data"].([]any); len(data) != 1 || b["hasMore"] != false {
				t.Errorf("list = %v, want the one flow and hasMore false", b)
			}
		}},
		{"api-get-flow.json", 200, func(t *testing.T, b map[string]any, _ string) {
			if b["id"] != f.ID || b["status"] != "INACTIVE" {
				t.Errorf("flow = %v", b)
			}
		}},
		{"api-get-webhook.json", 200, func(t *testing.T, b map[string]any, _ string) {
			if want := st.cfg.EngineURL + "/api/v1/webhooks/" + f.ID; b["webhookUrl"] != want || b["method"] != "POST" {
				t.Errorf("webhook = %v, want webhookUrl %s", b, want)
			}
		}},
		{"api-list-runs.json", 200, func(t *testing.T, b map[string]any, _ string) {
			if data, ok := b["data"].([]any); !ok || len(data) != 0 {
				t.Errorf("runs = %v, want an empty list", b)
			}
		}},
		{"api-list-connections.json", 200, func(t *testing.T, b map[string]any, raw string) {
			if data, _ := b["data"].([]any); len(data) != 1 || strings.Contains(raw, "sk-not-real") {
				t.Errorf("connections = %s, want one, redacted", raw)
			}
		}},
		{"api-enable-flow.json", 200, func(t *testing.T, b map[string]any, _ string) {
			if b["status"] != "ACTIVE" {
				t.Errorf("enabled flow = %v", b)
			}
		}},
		{"api-create-flow.json", 201, func(t *testing.T, b map[string]any, _ string) {
			id, _ := b["id"].(string)
			if !strings.HasPrefix(id, "flw_") || b["status"] != "INACTIVE" || b["engine"] != "FLOW_BUILDER" {
				t.Errorf("created flow = %v", b)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			resp := invoke(t, h, event(t, tt.file, ph))
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, resp.Body)
			}
			if ct := header(resp, "Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			tt.check(t, decodeBody(t, resp), resp.Body)
		})
	}

	// Enabling a SCHEDULE flow through the API creates its schedule in the
	// stage's group, targeting the run queue.
	t.Run("schedule on enable", func(t *testing.T) {
		sf := st.flow(t, `{"name": "Nightly", "engine": "FLOW_BUILDER",
			"trigger": {"type": "SCHEDULE", "schedule": {"cron": "0 3 * * *", "timezone": "Europe/Paris"}}}`, false)
		resp := invoke(t, h, event(t, "api-enable-flow.json", map[string]string{"__API_KEY__": st.key, "__FLOW_ID__": sf.ID}))
		if resp.StatusCode != 200 {
			t.Fatalf("enable: %d %s", resp.StatusCode, resp.Body)
		}
		out, err := scheduler.NewFromConfig(st.aws).GetSchedule(ctx, &scheduler.GetScheduleInput{
			GroupName: aws.String(st.cfg.ScheduleGroup), Name: aws.String("flow-" + sf.ID),
		})
		if err != nil {
			t.Fatalf("schedule of the enabled flow: %v", err)
		}
		if *out.Target.Arn != st.cfg.QueueARN || *out.Target.RoleArn != st.cfg.SchedulerRoleARN {
			t.Errorf("schedule target %s as %s, want the run queue as the scheduler role", *out.Target.Arn, *out.Target.RoleArn)
		}
	})

	t.Run("no key", func(t *testing.T) {
		resp := invoke(t, h, event(t, "api-list-flows.json", map[string]string{"__API_KEY__": "wrong"}))
		if resp.StatusCode != 401 {
			t.Errorf("status %d, want 401: %s", resp.StatusCode, resp.Body)
		}
	})

	// Another cold start reads the same cursor key from Secrets Manager, so
	// a cursor one instance issued is good on another.
	t.Run("cursor across instances", func(t *testing.T) {
		st.flow(t, `{"name": "Second", "engine": "FLOW_BUILDER"}`, false)
		first := decodeBody(t, invoke(t, h, event(t, "api-list-flows.json", map[string]string{
			"__API_KEY__": st.key, `"limit": "10"`: `"limit": "1"`, `"10"`: `"1"`,
		})))
		cursor, _ := first["cursor"].(string)
		if cursor == "" || first["hasMore"] != true {
			t.Fatalf("first page = %v, want a cursor", first)
		}
		h2, err := management.NewHandler(context.Background(), st.aws, st.cfgOf("ApiFunction"))
		if err != nil {
			t.Fatal(err)
		}
		var req events.APIGatewayProxyRequest
		if err := json.Unmarshal(event(t, "api-list-flows.json", map[string]string{"__API_KEY__": st.key}), &req); err != nil {
			t.Fatal(err)
		}
		req.QueryStringParameters = map[string]string{"limit": "1", "cursor": cursor}
		req.MultiValueQueryStringParameters = map[string][]string{"limit": {"1"}, "cursor": {cursor}}
		resp, err := h2(context.Background(), req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("next page on another instance: %d %s %v", resp.StatusCode, resp.Body, err)
		}
		if data, _ := decodeBody(t, resp)["data"].([]any); len(data) != 1 {
			t.Errorf("next page = %s", resp.Body)
		}
	})
}

// TestWebhookEvents invokes the webhook function with webhook-post.json.
func TestWebhookEvents(t *testing.T) {
	st := newStack(t)
	h, err := awsapp.NewWebhookHandler(context.Background(), st.aws, st.cfgOf("WebhookFunction"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("accepted", func(t *testing.T) {
		f := st.flow(t, formFlow, true)
		resp := invoke(t, h, event(t, "webhook-post.json", map[string]string{"__FLOW_ID__": f.ID}))
		b := decodeBody(t, resp)
		runID, _ := b["runId"].(string)
		if resp.StatusCode != 200 || b["status"] != "RUNNING" || !strings.HasPrefix(runID, "run_") {
			t.Fatalf("answer %d %s, want 200 RUNNING with a run ID", resp.StatusCode, resp.Body)
		}
		if header(resp, "X-Run-Id") != runID {
			t.Errorf("X-Run-Id %q, want %q", header(resp, "X-Run-Id"), runID)
		}
		if r, err := st.store.Run(ctx, st.project.ID, f.ID, runID); err != nil || r.Status != automation.RunRunning {
			t.Errorf("run record = %+v, %v; want it durable and RUNNING", r, err)
		}
		// And its message is on the queue for the runner.
		out, err := sqs.NewFromConfig(st.aws).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &st.cfg.QueueURL, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		var found bool
		for _, m := range out.Messages {
			found = found || strings.Contains(*m.Body, runID)
		}
		if !found {
			t.Errorf("no queue message names run %s", runID)
		}
	})

	// The largest accepted body, in the event API Gateway really sends
	// (binary media types: base64; the most headers and query string API
	// Gateway admits, each twice), fits Lambda's 6 MB: the function sees it
	// and accepts it (the run keeps the body in the payload bucket). One
	// byte more is 413 from the function, not a failure of API Gateway.
	t.Run("body limit", func(t *testing.T) {
		f := st.flow(t, formFlow, true)
		body := func(size int) string {
			pad := size - len(`{"event":"bulk","data":""}`)
			return `{"event":"bulk","data":"` + strings.Repeat("x", pad) + `"}`
		}
		proxyEvent := func(size int) []byte {
			var req events.APIGatewayProxyRequest
			if err := json.Unmarshal(event(t, "webhook-post.json", map[string]string{"__FLOW_ID__": f.ID}), &req); err != nil {
				t.Fatal(err)
			}
			req.Body, req.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(body(size))), true
			// API Gateway admits 10 KiB of request line and headers: spend
			// them on headers and a query string, both in single- and
			// multi-value form, as the proxy event carries them.
			for i := range 8 {
				k, v := fmt.Sprintf("X-Padding-%d", i), strings.Repeat("h", 1000)
				req.Headers[k], req.MultiValueHeaders[k] = v, []string{v}
			}
			q := strings.Repeat("q", 1500)
			req.QueryStringParameters = map[string]string{"pad": q}
			req.MultiValueQueryStringParameters = map[string][]string{"pad": {q}}
			raw, err := json.Marshal(req)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}
		raw := proxyEvent(awsapp.MaxProxyBody)
		if len(raw) > awsapp.LambdaPayloadLimit {
			t.Fatalf("event for the largest accepted body is %d bytes, over Lambda's %d", len(raw), awsapp.LambdaPayloadLimit)
		}
		if overhead := len(raw) - base64.StdEncoding.EncodedLen(awsapp.MaxProxyBody); overhead > awsapp.ProxyEventOverhead {
			t.Errorf("event overhead %d bytes, over the %d budgeted", overhead, awsapp.ProxyEventOverhead)
		}
		resp := invoke(t, h, raw)
		if resp.StatusCode != 200 {
			t.Fatalf("largest body: %d %.200s", resp.StatusCode, resp.Body)
		}
		runID, _ := decodeBody(t, resp)["runId"].(string)
		r, err := st.store.Run(ctx, st.project.ID, f.ID, runID)
		if err != nil || len(r.Trigger.Body) != awsapp.MaxProxyBody {
			t.Errorf("stored trigger body %d bytes (%v), want %d", len(r.Trigger.Body), err, awsapp.MaxProxyBody)
		}
		raw = proxyEvent(awsapp.MaxProxyBody + 1)
		if len(raw) > awsapp.LambdaPayloadLimit {
			t.Fatalf("event one byte over the limit is %d bytes: API Gateway would fail before the function's 413", len(raw))
		}
		if resp := invoke(t, h, raw); resp.StatusCode != 413 {
			t.Errorf("largest body + 1: %d %.200s, want 413", resp.StatusCode, resp.Body)
		}
	})

	t.Run("unknown flow", func(t *testing.T) {
		resp := invoke(t, h, event(t, "webhook-post.json", map[string]string{"__FLOW_ID__": "flw_doesnotexist000000000"}))
		if resp.StatusCode != 404 {
			t.Errorf("status %d, want 404: %s", resp.StatusCode, resp.Body)
		}
	})

	// The flow's own allowlist is judged on API Gateway's sourceIp.
	t.Run("flow allowlist uses sourceIp", func(t *testing.T) {
		f := st.flow(t, formFlow, true)
		if _, err := st.svc.SetWebhookSecurity(ctx, st.project, f.ID, []string{"192.0.2.0/24"}); err != nil {
			t.Fatal(err)
		}
		// X-Forwarded-For claims an allowed address; only sourceIp counts.
		raw := event(t, "webhook-post.json", map[string]string{"__FLOW_ID__": f.ID, `"X-Forwarded-For": "198.51.100.10"`: `"X-Forwarded-For": "192.0.2.1"`})
		resp := invoke(t, h, raw)
		if resp.StatusCode != 403 || decodeBody(t, resp)["error"].(map[string]any)["code"] != "IP_NOT_ALLOWED" {
			t.Errorf("answer %d %s, want 403 IP_NOT_ALLOWED", resp.StatusCode, resp.Body)
		}
	})

	// The platform-wide ranges (ALLOWED_CIDRS) hold in the handler too.
	t.Run("platform allowlist", func(t *testing.T) {
		f := st.flow(t, formFlow, true)
		raw := event(t, "webhook-post.json", map[string]string{"__FLOW_ID__": f.ID, "198.51.100.10": "203.0.113.9"})
		resp := invoke(t, h, raw)
		if resp.StatusCode != 403 || !strings.Contains(resp.Body, "IP_NOT_ALLOWED") {
			t.Errorf("answer %d %s, want 403 IP_NOT_ALLOWED", resp.StatusCode, resp.Body)
		}
	})
}

// TestWorkflowHookEvents invokes the workflowhook function with
// workflowhook-post.json: an ON_COMPLETION flow runs inline and answers
// with its RESPOND step.
func TestWorkflowHookEvents(t *testing.T) {
	st := newStack(t)
	h, err := awsapp.NewWorkflowHookHandler(context.Background(), st.aws, st.cfgOf("WorkflowHookFunction"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("unknown path", func(t *testing.T) {
		resp := invoke(t, h, event(t, "workflowhook-post.json", nil))
		if resp.StatusCode != 404 {
			t.Errorf("status %d, want 404: %s", resp.StatusCode, resp.Body)
		}
	})
	t.Run("on completion", func(t *testing.T) {
		st.flow(t, `{"name": "Deploy notifier", "engine": "WORKFLOW_BUILDER",
			"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "deploys/github", "responseMode": "ON_COMPLETION"}},
			"steps": [
				{"name": "only_pushes", "type": "FILTER", "condition": "trigger.body.event == \"push\""},
				{"name": "reply", "type": "RESPOND", "statusCode": 202, "body": {"status": "ok", "message": "deployed {{ trigger.body.data.ref }}"}}
			]}`, true)
		resp := invoke(t, h, event(t, "workflowhook-post.json", nil))
		b := decodeBody(t, resp)
		if resp.StatusCode != 202 || b["status"] != "ok" || b["message"] != "deployed refs/heads/main" {
			t.Errorf("answer %d %s, want 202 with the RESPOND body", resp.StatusCode, resp.Body)
		}
	})
}

// TestRunnerEvents invokes the runner with runner-batch.json for a queued
// run, plus an unreadable record: the run is executed and only the bad
// record is reported back.
func TestRunnerEvents(t *testing.T) {
	st := newStack(t)
	h, err := awsapp.NewRunnerHandler(context.Background(), st.aws, st.cfgOf("RunnerFunction"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := st.flow(t, formFlow, true)
	// The store half of enqueueing: what the receiver wrote before sending
	// the message.
	run := automation.Run{
		ID: automation.NewID(automation.PrefixRun), Project: st.project.ID, FlowID: f.ID, Status: automation.RunRunning,
		Trigger: automation.TriggerData{Method: "POST", Headers: map[string]string{}, Query: map[string]string{},
			Body: json.RawMessage(`{"event": "form.submitted", "data": {"email": "ada@example.com"}}`)},
		Steps: []automation.StepResult{}, Created: time.Now().UTC().Truncate(time.Millisecond),
	}
	if err := st.store.CreateRun(ctx, run); err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(event(t, "runner-batch.json", map[string]string{"__PROJECT_ID__": st.project.ID, "__RUN_ID__": run.ID}), &ev); err != nil {
		t.Fatal(err)
	}
	bad := ev.Records[0]
	bad.MessageId, bad.Body = "bad-record", "not json"
	ev.Records = append(ev.Records, bad)

	resp, err := h(ctx, ev)
	if err != nil {
		t.Fatalf("handler error (the whole batch would return): %v", err)
	}
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	if !slices.Equal(ids, []string{"bad-record"}) {
		t.Errorf("BatchItemFailures = %v, want only the unreadable record", ids)
	}
	got, err := st.store.Run(ctx, st.project.ID, f.ID, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != automation.RunSucceeded || len(got.Steps) != 1 {
		t.Errorf("run = %s with %d steps (%s), want SUCCEEDED with 1", got.Status, len(got.Steps), got.Error)
	}

	// Redelivered, the finished run is done with: no failure, no second run.
	resp, err = h(ctx, events.SQSEvent{Records: ev.Records[:1]})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("redelivery = %+v, %v; want no failures", resp, err)
	}
}
