package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/sqsqueue"
)

// TestApprovalsOnLambda takes approvals and callbacks through the functions
// that serve them, with their grants recorded: the runner opens a
// waitpoint (an item of the runs table and its token item) and parks the
// run; the webhook function serves the link's page and answer and the
// callback URL (the run item made due in the answer's transaction, its
// message sent); the api function lists the inbox and decides; a runner
// whose clock is past the expiry times an approval out (its token item
// deleted).
func TestApprovalsOnLambda(t *testing.T) {
	recordGrants(t)
	e := newE2E(t, 5, automation.RunPolicy{MaxAttempts: 3})
	links := make(chan string, 10)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/alerts" {
			return // the approval events' receiver
		}
		var m map[string]string
		_ = json.NewDecoder(r.Body).Decode(&m)
		links <- m["url"]
	}))
	t.Cleanup(fake.Close)
	enabled := func(def string) string {
		t.Helper()
		status, f := call(t, e.api, "POST", "/api/v1/flows", e.key, def)
		if status != 201 {
			t.Fatalf("create = %d %v", status, f)
		}
		id := f["id"].(string)
		if status, b := call(t, e.api, "POST", "/api/v1/flows/"+id+"/enable", e.key, ""); status != 200 {
			t.Fatalf("enable = %d %v", status, b)
		}
		return id
	}
	start := func(flowID, waiting string) (string, string) {
		t.Helper()
		status, acc := call(t, e.hook, "POST", "/api/v1/webhooks/"+flowID, "", `{}`)
		if status != 200 {
			t.Fatalf("webhook = %d %v", status, acc)
		}
		runID := acc["runId"].(string)
		testwait.For(t, 60*time.Second, "the run to park", func() bool {
			e.poll(t)
			_, r := call(t, e.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, e.key, "")
			return r["waitingFor"] == waiting
		})
		select {
		case link := <-links:
			return runID, link[strings.Index(link, "/dev/")+len("/dev"):]
		default:
			t.Fatal("no link was sent")
		}
		return "", ""
	}
	finish := func(flowID, runID string) map[string]any {
		t.Helper()
		var r map[string]any
		testwait.For(t, 60*time.Second, "the run to finish", func() bool {
			e.poll(t)
			_, r = call(t, e.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, e.key, "")
			return r["status"] != "RUNNING"
		})
		return r
	}
	// A subscription to approval events: each opening and decision (the
	// runner's, the webhook function's answer to a link, the api
	// function's) commits its delivery in the waitpoint's transaction.
	status, sub := call(t, e.api, "POST", "/api/v1/subscriptions", e.key,
		`{"url": "`+fake.URL+`/alerts", "events": ["approval.requested", "approval.decided"]}`)
	if status != 201 {
		t.Fatalf("create subscription = %d %v", status, sub)
	}
	approval := enabled(fmt.Sprintf(`{"name": "approve", "engine": "FLOW_BUILDER", "steps": [
		{"name": "ok", "type": "APPROVAL", "title": "go?", "timeout": "1h",
		 "notify": [{"name": "n", "type": "HTTP", "method": "POST", "url": %q, "body": {"url": "{{ approval.url }}"}}]}]}`, fake.URL))

	// Through the link: the page, then the answer.
	runID, path := start(approval, "APPROVAL")
	if status, _ := callRaw(t, e.hook, "GET", path, ""); status != 200 {
		t.Fatalf("page = %d", status)
	}
	if status, body := callRaw(t, e.hook, "POST", path, `{"decision": "approve"}`); status != 200 {
		t.Fatalf("answer = %d %s", status, body)
	}
	if r := finish(approval, runID); r["status"] != "SUCCEEDED" {
		t.Fatalf("run = %v", r)
	}
	// Through the API: the inbox, then the decision.
	runID, _ = start(approval, "APPROVAL")
	if status, l := call(t, e.api, "GET", "/api/v1/approvals", e.key, ""); status != 200 || len(l["data"].([]any)) != 1 {
		t.Fatalf("inbox = %d %v", status, l)
	}
	if status, d := call(t, e.api, "POST", "/api/v1/runs/"+runID+"/approvals/ok", e.key, `{"decision": "reject"}`); status != 200 {
		t.Fatalf("decide = %d %v", status, d)
	}
	if r := finish(approval, runID); r["status"] != "SUCCEEDED" {
		t.Fatalf("run = %v", r)
	}
	// A callback.
	cb := enabled(fmt.Sprintf(`{"name": "cb", "engine": "FLOW_BUILDER", "steps": [
		{"name": "job", "type": "WAIT", "for": "callback", "timeout": "1h",
		 "notify": [{"name": "n", "type": "HTTP", "method": "POST", "url": %q, "body": {"url": "{{ wait.callbackUrl }}"}}]}]}`, fake.URL))
	runID, path = start(cb, "CALLBACK")
	if status, body := callRaw(t, e.hook, "POST", path, `{"done": true}`); status != 200 {
		t.Fatalf("callback = %d %s", status, body)
	}
	if r := finish(cb, runID); r["status"] != "SUCCEEDED" {
		t.Fatalf("run = %v", r)
	}
	// A timeout, by a runner whose clock is past the expiry.
	runID, _ = start(approval, "APPROVAL")
	cfg := e.cfgOf("RunnerFunction")
	cfg.Clock = func() time.Time { return time.Now().Add(2 * time.Hour) }
	late, err := awsapp.NewRunnerHandler(context.Background(), e.aws, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.runner = late
	if status, _ := call(t, e.api, "POST", "/api/v1/runs/"+runID+"/approvals/nosuch", e.key, `{"decision": "approve"}`); status != 404 {
		t.Fatalf("decide an unknown step = %d", status)
	}
	// The delayed message comes at the expiry; send it now, as it arrives then.
	msg, err := sqsqueue.Message(automation.Run{ID: runID, Project: e.project.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &e.cfg.QueueURL,
		MessageBody: aws.String(string(msg))}); err != nil {
		t.Fatal(err)
	}
	r := finish(approval, runID)
	steps, _ := r["steps"].([]any)
	if r["status"] != "SUCCEEDED" || len(steps) != 1 || steps[0].(map[string]any)["output"].(map[string]any)["decision"] != "timeout" {
		t.Fatalf("timed out run = %v", r)
	}
	// Three approvals opened and decided (a link, the API, the timeout).
	_, list := call(t, e.api, "GET", "/api/v1/subscriptions/"+sub["id"].(string)+"/deliveries", e.key, "")
	types := map[string]int{}
	ds, _ := list["data"].([]any)
	for _, d := range ds {
		types[d.(map[string]any)["eventType"].(string)]++
	}
	if types["approval.requested"] != 3 || types["approval.decided"] != 3 {
		t.Fatalf("deliveries by type = %v, want 3 approval.requested and 3 approval.decided", types)
	}
}

// callRaw sends one proxy event with a JSON body and returns the status
// and the raw body (a page is HTML).
func callRaw(t *testing.T, h awsapp.ProxyHandler, method, path, body string) (int, string) {
	t.Helper()
	resp, err := h(context.Background(), proxyRequest(method, path, "", body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, resp.Body
}
