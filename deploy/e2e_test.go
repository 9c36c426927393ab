package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/awstest"
	"flowservice/pkg/sqsqueue"
)

// e2e is a deployment on moto with the three functions a webhook crosses:
// the api and webhook handlers as API Gateway calls them, and the runner as
// the SQS event source mapping calls it, driven by the test.
type e2e struct {
	*stack
	api, hook awsapp.ProxyHandler
	runner    awsapp.SQSHandler
	sqs       *sqs.Client
	dlqURL    string
}

// newE2E builds the stack with a run queue whose redrive policy sends a
// message to a DLQ after maxReceive receives, as template.yaml does, and a
// short visibility timeout so that retries come quickly.
func newE2E(t *testing.T, maxReceive int, policy automation.RunPolicy) *e2e {
	t.Helper()
	ctx := context.Background()
	st := newStack(t)
	client := sqs.NewFromConfig(st.aws)
	name := awstest.UniqueName(t, "e2e")
	dlq, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		t.Fatal(err)
	}
	dlqAttrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: dlq.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		t.Fatal(err)
	}
	redrive, _ := json.Marshal(map[string]string{
		"deadLetterTargetArn": dlqAttrs.Attributes[string(sqstypes.QueueAttributeNameQueueArn)],
		"maxReceiveCount":     strconv.Itoa(maxReceive),
	})
	q, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{
		string(sqstypes.QueueAttributeNameRedrivePolicy):     string(redrive),
		string(sqstypes.QueueAttributeNameVisibilityTimeout): "1",
	}})
	if err != nil {
		t.Fatal(err)
	}
	st.cfg.QueueURL = *q.QueueUrl
	st.cfg.RunPolicy = policy
	st.cfg.AllowPrivateNetworks = true // the external service is a loopback fake
	e := &e2e{stack: st, sqs: client, dlqURL: *dlq.QueueUrl}
	if e.api, err = management.NewHandler(ctx, st.aws, st.cfgOf("ApiFunction")); err != nil {
		t.Fatal(err)
	}
	if e.hook, err = awsapp.NewWebhookHandler(ctx, st.aws, st.cfgOf("WebhookFunction")); err != nil {
		t.Fatal(err)
	}
	if e.runner, err = awsapp.NewRunnerHandler(ctx, st.aws, st.cfgOf("RunnerFunction")); err != nil {
		t.Fatal(err)
	}
	return e
}

// call sends one REST API proxy event to h, as API Gateway would.
func call(t *testing.T, h awsapp.ProxyHandler, method, path, key, body string) (int, map[string]any) {
	t.Helper()
	resp, err := h(context.Background(), proxyRequest(method, path, key, body))
	if err != nil {
		t.Fatalf("%s %s: invocation failed: %v", method, path, err)
	}
	var m map[string]any
	if resp.Body != "" {
		if err := json.Unmarshal([]byte(resp.Body), &m); err != nil {
			t.Fatalf("%s %s: body %q: %v", method, path, resp.Body, err)
		}
	}
	return resp.StatusCode, m
}

// proxyRequest is the event API Gateway sends for a request from an
// allowed address.
func proxyRequest(method, path, key, body string) events.APIGatewayProxyRequest {
	req := events.APIGatewayProxyRequest{
		HTTPMethod: method, Path: path, Body: body,
		MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}},
		RequestContext: events.APIGatewayProxyRequestContext{
			Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}, HTTPMethod: method, Path: path,
		},
	}
	if key != "" {
		req.MultiValueHeaders["Authorization"] = []string{"Bearer " + key}
	}
	return req
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// poll delivers what the run queue holds to the runner as the event source
// mapping would (awsapp.PollOnce, which flowd's aws backend also uses) and
// returns how many messages it delivered.
func (e *e2e) poll(t *testing.T) int {
	t.Helper()
	n, err := awsdev.PollOnce(context.Background(), e.sqs, e.cfg.QueueURL, time.Second, e.runner)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// external is a fake external service that answers status and counts calls.
func external(t *testing.T, status int) (*httptest.Server, func() int) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		mu.Unlock()
		w.WriteHeader(status)
		fmt.Fprint(w, `{"received":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// activeFlow creates and enables a flow through the api handler.
func (e *e2e) activeFlow(t *testing.T, url string) string {
	t.Helper()
	status, f := call(t, e.api, "POST", "/api/v1/flows", e.key, fmt.Sprintf(`{"name": "Deploys", "engine": "FLOW_BUILDER",
		"steps": [{"name": "notify", "type": "HTTP", "method": "POST", "url": %q, "body": {"ref": "{{ trigger.body.ref }}"}}]}`, url))
	if status != 201 {
		t.Fatalf("create flow = %d %v", status, f)
	}
	id := f["id"].(string)
	if status, g := call(t, e.api, "POST", "/api/v1/flows/"+id+"/enable", e.key, ""); status != 200 || g["status"] != "ACTIVE" {
		t.Fatalf("enable = %d %v", status, g)
	}
	return id
}

// TestEndToEndOnMoto: create and enable a flow through the api function,
// POST its webhook through the webhook function, drain the queue into the
// runner, and read the SUCCEEDED run back through the api function; then
// redeliver the same message and see no second execution.
func TestEndToEndOnMoto(t *testing.T) {
	e := newE2E(t, 3, automation.RunPolicy{MaxAttempts: 3})
	ext, calls := external(t, 200)
	flowID := e.activeFlow(t, ext.URL)

	status, acc := call(t, e.hook, "POST", "/api/v1/webhooks/"+flowID, "", `{"event": "push", "ref": "main"}`)
	if status != 200 || acc["status"] != "RUNNING" {
		t.Fatalf("webhook = %d %v", status, acc)
	}
	runID := acc["runId"].(string)

	delivered := 0
	for i := 0; i < 5 && delivered == 0; i++ {
		delivered = e.poll(t)
	}
	if delivered != 1 {
		t.Fatalf("the queue delivered %d messages, want the run's one", delivered)
	}
	status, run := call(t, e.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, e.key, "")
	if status != 200 || run["status"] != "SUCCEEDED" || calls() != 1 {
		t.Fatalf("run = %d %v after %d external calls; want SUCCEEDED after 1", status, run, calls())
	}
	if _, f := call(t, e.api, "GET", "/api/v1/flows/"+flowID, e.key, ""); f["runCount"] != 1.0 || f["successRate"] != 100.0 {
		t.Fatalf("flow stats = runCount %v, successRate %v", f["runCount"], f["successRate"])
	}

	// At-least-once delivery: the same message again executes nothing.
	msg, err := sqsqueue.Message(automation.Run{Project: e.project.ID, ID: runID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &e.cfg.QueueURL, MessageBody: aws.String(string(msg))}); err != nil {
		t.Fatal(err)
	}
	again := 0
	for i := 0; i < 5 && again == 0; i++ {
		again = e.poll(t)
	}
	if again != 1 {
		t.Fatalf("redelivery: %d messages", again)
	}
	_, list := call(t, e.api, "GET", "/api/v1/flows/"+flowID+"/runs", e.key, "")
	if data := list["data"].([]any); len(data) != 1 || calls() != 1 {
		t.Fatalf("after a redelivery: %d runs, %d external calls; want 1 and 1", len(data), calls())
	}
	if _, r := call(t, e.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, e.key, ""); r["attempts"] != 1.0 {
		t.Fatalf("attempts after a redelivery = %v, want 1", r["attempts"])
	}
}

// TestFailingMessageReachesDLQ: a run whose external service keeps failing
// is retried through the queue's visibility timeout until its last attempt
// marks it FAILED; the message then moves to the dead-letter queue.
func TestFailingMessageReachesDLQ(t *testing.T) {
	e := newE2E(t, 2, automation.RunPolicy{MaxAttempts: 2})
	ext, calls := external(t, 503)
	flowID := e.activeFlow(t, ext.URL)
	status, acc := call(t, e.hook, "POST", "/api/v1/webhooks/"+flowID, "", `{"event": "push", "ref": "main"}`)
	if status != 200 {
		t.Fatalf("webhook = %d %v", status, acc)
	}
	runID := acc["runId"].(string)

	ctx := context.Background()
	testwait.For(t, 30*time.Second, "the failing message in the DLQ", func() bool {
		e.poll(t)
		out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: &e.dlqURL, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)] == "1"
	})
	status, run := call(t, e.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, e.key, "")
	if status != 200 || run["status"] != "FAILED" || run["attempts"] != 2.0 || calls() != 2 {
		t.Fatalf("run = %d %v after %d calls; want FAILED after 2 attempts", status, run, calls())
	}
	if msg, _ := run["error"].(string); !strings.Contains(msg, "gave up after 2 attempts") || !strings.Contains(msg, "503") {
		t.Fatalf("run error = %q, want the reason", msg)
	}
	dl, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &e.dlqURL, WaitTimeSeconds: 1})
	if err != nil || len(dl.Messages) != 1 || !strings.Contains(*dl.Messages[0].Body, runID) {
		t.Fatalf("DLQ holds %v, %v; want the run's message", dl.Messages, err)
	}
}

// TestHeldRunOutlivesMaxReceiveCount: a run held by a live attempt (a claim
// with a long lease, as an inline ON_COMPLETION attempt or a frozen Lambda
// leaves it) bounces its message many more times than the queue's
// maxReceiveCount; the runner sends fresh copies from
// sqsqueue.DefaultRequeueAt receives on, so the message never reaches the
// DLQ, and once the hold ends the run executes once.
func TestHeldRunOutlivesMaxReceiveCount(t *testing.T) {
	recordGrants(t)
	const maxReceive = sqsqueue.DefaultRequeueAt + 1
	e := newE2E(t, maxReceive, automation.RunPolicy{Timeout: time.Second, MaxAttempts: 5})
	ext, calls := external(t, 200)
	flowID := e.activeFlow(t, ext.URL)
	status, acc := call(t, e.hook, "POST", "/api/v1/webhooks/"+flowID, "", `{"event": "push", "ref": "main"}`)
	if status != 200 {
		t.Fatalf("webhook = %d %v", status, acc)
	}
	runID := acc["runId"].(string)
	ctx := context.Background()
	held, err := e.store.ClaimRun(ctx, e.project.ID, runID, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	dlqSize := func() string {
		out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: &e.dlqURL, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)]
	}
	bounces := 0
	for polls := 0; bounces <= 2*maxReceive; polls++ {
		if polls > 20*maxReceive {
			t.Fatalf("only %d bounces in %d polls (DLQ %s)", bounces, polls, dlqSize())
		}
		bounces += e.poll(t)
	}
	if n := dlqSize(); n != "0" || calls() != 0 {
		t.Fatalf("after %d bounces: %s messages in the DLQ, %d external calls; want none and none", bounces, n, calls())
	}

	// The hold ends: the next delivery executes the run.
	if err := e.store.ReleaseRun(ctx, held); err != nil {
		t.Fatal(err)
	}
	for polls := 0; calls() == 0; polls++ {
		if polls > 20 {
			t.Fatalf("the run never executed after its hold ended (DLQ %s)", dlqSize())
		}
		e.poll(t)
	}
	// Nothing left to deliver and no copy left behind, read from the
	// queue's counters rather than from polls that find nothing for a
	// while: no message visible, in flight or delayed.
	out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &e.cfg.QueueURL, AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"ApproximateNumberOfMessages": "0", "ApproximateNumberOfMessagesNotVisible": "0",
		"ApproximateNumberOfMessagesDelayed": "0"}; !maps.Equal(out.Attributes, want) {
		t.Fatalf("run queue after the run executed: %v, want %v", out.Attributes, want)
	}
	status, run := call(t, e.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, e.key, "")
	if status != 200 || run["status"] != "SUCCEEDED" || calls() != 1 || dlqSize() != "0" {
		t.Fatalf("run = %d %v after %d external calls, DLQ %s; want SUCCEEDED after 1, DLQ empty", status, run, calls(), dlqSize())
	}
}
