package deploy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
)

// apiPost is api-create-flow.json as a POST of body to path.
func apiPost(t *testing.T, key, path, body string) []byte {
	t.Helper()
	var req events.APIGatewayProxyRequest
	if err := json.Unmarshal(event(t, "api-create-flow.json", map[string]string{"__API_KEY__": key}), &req); err != nil {
		t.Fatal(err)
	}
	req.Path, req.Body = path, body
	raw, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestFaultPathGrants drives the undo paths through the functions, their
// calls recorded as grants for TestGrantsMatchObservedCalls: with the run
// queue gone, every send fails, and each function that wrote a run (and
// its large trigger body in the payload bucket) deletes both again, the
// api function on retry and on replay, the receivers on a delivery. No run
// is left RUNNING without a message.
func TestFaultPathGrants(t *testing.T) {
	calls := recordGrants(t)
	st := newStack(t)
	ctx := context.Background()
	api, err := management.NewHandler(ctx, st.aws, st.cfgOf("ApiFunction"))
	if err != nil {
		t.Fatal(err)
	}
	hook, err := awsapp.NewWebhookHandler(ctx, st.aws, st.cfgOf("WebhookFunction"))
	if err != nil {
		t.Fatal(err)
	}
	wf, err := awsapp.NewWorkflowHookHandler(ctx, st.aws, st.cfgOf("WorkflowHookFunction"))
	if err != nil {
		t.Fatal(err)
	}
	f := st.flow(t, formFlow, true)
	st.flow(t, `{"name": "Deploy queue", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "deploys/github"}},
		"steps": [{"name": "note", "type": "SET", "values": {"ref": "{{ trigger.body.data.ref }}"}}]}`, true)
	// A FAILED run whose trigger body is in the payload bucket (over the
	// store's threshold), to retry and replay.
	big := `{"event": "bulk", "data": {"email": "ada@example.com", "pad": "` + strings.Repeat("x", 400<<10) + `"}}`
	now := time.Now().UTC().Truncate(time.Millisecond)
	failed := automation.Run{
		ID: automation.NewID(automation.PrefixRun), Project: st.project.ID, FlowID: f.ID, Status: automation.RunFailed,
		Trigger: automation.TriggerData{Method: "POST", Headers: map[string]string{}, Query: map[string]string{}, Body: json.RawMessage(big)},
		Steps:   []automation.StepResult{}, Created: now, Finished: &now, Error: "upstream 500",
	}
	if err := st.store.CreateRun(ctx, failed); err != nil {
		t.Fatal(err)
	}
	if _, err := sqs.NewFromConfig(st.aws).DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &st.cfg.QueueURL}); err != nil {
		t.Fatal(err)
	}

	refused := func(name string, resp events.APIGatewayProxyResponse) {
		t.Helper()
		if resp.StatusCode < 500 {
			t.Errorf("%s with no queue: %d %.200s, want a 5xx", name, resp.StatusCode, resp.Body)
		}
	}
	refused("retry", invoke(t, api, apiPost(t, st.key, "/api/v1/flows/"+f.ID+"/runs/"+failed.ID+"/retry", "")))
	refused("replay", invoke(t, api, apiPost(t, st.key, "/api/v1/runs/replay", `{"status": "FAILED"}`)))
	// The receivers' events with the large body.
	withBig := func(file string, ph map[string]string) []byte {
		var req events.APIGatewayProxyRequest
		if err := json.Unmarshal(event(t, file, ph), &req); err != nil {
			t.Fatal(err)
		}
		req.Body, req.IsBase64Encoded = big, false
		raw, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	refused("webhook", invoke(t, hook, withBig("webhook-post.json", map[string]string{"__FLOW_ID__": f.ID})))
	refused("workflowhook", invoke(t, wf, withBig("workflowhook-post.json", nil)))

	// Every run written was deleted again: only the FAILED one is left.
	page, err := st.store.SearchRuns(ctx, st.project.ID, automation.RunQuery{ListQuery: automation.ListQuery{Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	{
		for _, r := range page.Items {
			if r.ID != failed.ID {
				t.Errorf("run %s (%s) left after its message failed", r.ID, r.Status)
			}
		}
	}
	for fn, want := range map[string][]grant{
		"ApiFunction":          {{"dynamodb:DeleteItem", "RunsTable"}, {"s3:DeleteObject", "PayloadBucket/*"}},
		"WebhookFunction":      {{"dynamodb:DeleteItem", "RunsTable"}, {"s3:DeleteObject", "PayloadBucket/*"}},
		"WorkflowHookFunction": {{"dynamodb:DeleteItem", "RunsTable"}, {"s3:DeleteObject", "PayloadBucket/*"}},
	} {
		for _, g := range want {
			if !calls.has(fn, g) {
				t.Errorf("%s made no %s on its undo path", fn, g)
			}
		}
	}
}

// TestRefusedFencedWrite: while the runner's attempt is in its HTTP step,
// another attempt takes the run over (its claim, as after a lease that
// lapsed); the runner's next write is refused by the fence, and it reads
// the run to tell why (whyRefused: dynamodb:GetItem on the runs table,
// which its role must grant, or the refusal would be an AccessDenied that
// counts toward the DLQ). The run is left to the attempt that holds it.
func TestRefusedFencedWrite(t *testing.T) {
	calls := recordGrants(t)
	e := newE2E(t, 10, automation.RunPolicy{Timeout: 30 * time.Second, MaxAttempts: 5})
	ctx := context.Background()
	var runID atomic.Value
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			// Another attempt claims the run as if the runner's lease had
			// lapsed: from a day later.
			if _, err := e.store.ClaimRun(ctx, e.project.ID, runID.Load().(string), time.Now().Add(24*time.Hour), time.Hour); err != nil {
				t.Errorf("takeover: %v", err)
			}
		})
		w.WriteHeader(200)
		_, _ = w.Write([]byte(`{"received":true}`))
	}))
	t.Cleanup(srv.Close)
	flowID := e.activeFlow(t, srv.URL)
	status, acc := call(t, e.hook, "POST", "/api/v1/webhooks/"+flowID, "", `{"event": "push", "ref": "main"}`)
	if status != 200 {
		t.Fatalf("webhook = %d %v", status, acc)
	}
	runID.Store(acc["runId"].(string))
	if n := e.poll(t); n != 1 {
		t.Fatalf("polled %d messages, want the run's", n)
	}
	r, err := e.store.Run(ctx, e.project.ID, flowID, runID.Load().(string))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != automation.RunRunning {
		t.Errorf("run is %s, want RUNNING, held by the attempt that took it over", r.Status)
	}
	if !calls.has("RunnerFunction", grant{"dynamodb:GetItem", "RunsTable"}) {
		t.Error("the runner's refused write did not read the run (whyRefused)")
	}
}

// TestReplayTokenOnDynamoDB: POST /api/v1/runs/replay through the api
// function, sent twice with one replayToken as a client retrying after a
// 504 would: the second makes no run (DynamoDB refuses the same run IDs),
// and the answer counts the replayed runs both times.
func TestReplayTokenOnDynamoDB(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	api, err := management.NewHandler(ctx, st.aws, st.cfgOf("ApiFunction"))
	if err != nil {
		t.Fatal(err)
	}
	f := st.flow(t, formFlow, true)
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i := range 3 {
		created := now.Add(time.Duration(i-10) * time.Minute)
		r := automation.Run{
			ID: automation.NewRunID(created), Project: st.project.ID, FlowID: f.ID, Status: automation.RunFailed,
			Trigger: automation.TriggerData{Method: "POST", Headers: map[string]string{}, Query: map[string]string{}, Body: json.RawMessage(`{"n": 1}`)},
			Steps:   []automation.StepResult{}, Created: created, Finished: &created, Error: "upstream 500",
		}
		if err := st.store.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	running := func() int {
		t.Helper()
		page, err := st.store.SearchRuns(ctx, st.project.ID, automation.RunQuery{ListQuery: automation.ListQuery{Limit: 100, Status: string(automation.RunRunning)}})
		if err != nil {
			t.Fatal(err)
		}
		return len(page.Items)
	}
	for try := range 2 {
		resp := invoke(t, api, apiPost(t, st.key, "/api/v1/runs/replay", `{"status": "FAILED", "replayToken": "nightly-2026-11-26"}`))
		if resp.StatusCode != 200 || decodeBody(t, resp)["replayed"] != 3.0 {
			t.Fatalf("try %d: %d %s, want 200 with 3 replayed", try, resp.StatusCode, resp.Body)
		}
		if n := running(); n != 3 {
			t.Fatalf("try %d: %d RUNNING runs, want the 3 replays", try, n)
		}
	}
	resp := invoke(t, api, apiPost(t, st.key, "/api/v1/runs/replay", `{"status": "FAILED", "replayToken": "has space"}`))
	if resp.StatusCode != 400 || !strings.Contains(resp.Body, "replayToken") {
		t.Errorf("bad token: %d %s, want 400 naming replayToken", resp.StatusCode, resp.Body)
	}
}
