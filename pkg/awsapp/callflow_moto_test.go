package awsapp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
)

// TestCallFlowOnMoto is the Lambda path of CALL_FLOW on moto: a webhook
// through the webhook function starts the parent; the runner function
// executes it until its CALL_FLOW step parks it (its message settled, a
// delayed one sent) and queues the child on SQS; the runner executes the
// child, whose end sends a message that wakes the parent, which ends with
// the child's RESPOND body. A failing child fails its caller's step with
// the child's run ID.
func TestCallFlowOnMoto(t *testing.T) {
	ctx := context.Background()
	st := newMotoStage(t, "callflow", awsapp.Config{Stage: "test", LogOutput: io.Discard, AllowPrivateNetworks: true})
	awsCfg, cfg, key := st.AWS, st.Cfg, st.Key
	api, err := management.NewHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := awsapp.NewWebhookHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	call := func(h awsapp.ProxyHandler, method, path, body string, want int, out any) {
		t.Helper()
		resp, err := h(ctx, events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body,
			MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + key}},
			RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: path,
				Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}})
		if err != nil || resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s %v, want %d", method, path, resp.StatusCode, resp.Body, err, want)
		}
		if out != nil {
			if err := json.Unmarshal([]byte(resp.Body), out); err != nil {
				t.Fatal(err)
			}
		}
	}
	enabled := func(def string) string {
		t.Helper()
		var f struct{ ID string }
		call(api, "POST", "/api/v1/flows", def, 201, &f)
		call(api, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
		return f.ID
	}
	type run struct {
		ID, Status, Error string
		Trigger           struct{ Caller map[string]string }
		Steps             []struct {
			Status, Error string
			Output        json.RawMessage
		}
	}
	sqsc := sqs.NewFromConfig(awsCfg)
	// finish drives the runner until the run is final: every message the
	// queue holds now is handled, as SQS would deliver it to the function.
	finish := func(flowID, runID string) run {
		t.Helper()
		var r run
		for range 20 {
			call(api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, "", 200, &r)
			if r.Status != "RUNNING" {
				return r
			}
			if _, err := awsdev.PollOnce(ctx, sqsc, cfg.QueueURL, time.Second, runner); err != nil {
				t.Fatal(err)
			}
		}
		t.Fatalf("run %s is still %s after the queue ran dry", runID, r.Status)
		return r
	}

	child := enabled(`{"name": "enrich", "engine": "FLOW_BUILDER", "steps": [
		{"name": "answer", "type": "RESPOND", "body": {"customer": "{{ trigger.body.id }}", "caller": "{{ trigger.caller.runId }}"}}]}`)
	parent := enabled(fmt.Sprintf(`{"name": "order", "engine": "FLOW_BUILDER", "steps": [
		{"name": "enrich", "type": "CALL_FLOW", "flowId": %q, "input": {"id": "{{ trigger.body.customer }}"}},
		{"name": "use", "type": "SET", "values": {"who": "{{ steps.enrich.customer }}"}}]}`, child))
	var accepted struct{ RunID string }
	call(hook, "POST", "/api/v1/webhooks/"+parent, `{"customer": "cus_7"}`, 200, &accepted)
	r := finish(parent, accepted.RunID)
	want := fmt.Sprintf(`{"caller":%q,"customer":"cus_7"}`, accepted.RunID)
	if r.Status != "SUCCEEDED" || string(r.Steps[0].Output) != want || string(r.Steps[1].Output) != `{"who":"cus_7"}` {
		t.Fatalf("parent = %+v (enrich %s, use %s), want SUCCEEDED with the child's answer %s",
			r, r.Steps[0].Output, r.Steps[1].Output, want)
	}
	var kids struct{ Data []run }
	call(api, "GET", "/api/v1/flows/"+child+"/runs", "", 200, &kids)
	if len(kids.Data) != 1 || kids.Data[0].Status != "SUCCEEDED" || kids.Data[0].Trigger.Caller["runId"] != accepted.RunID {
		t.Fatalf("child runs = %+v, want one SUCCEEDED, called by %s", kids.Data, accepted.RunID)
	}

	broken := enabled(`{"name": "broken", "engine": "FLOW_BUILDER", "steps": [
		{"name": "check", "type": "FILTER", "condition": "trigger.body.x.y == 1"}]}`)
	caller := enabled(fmt.Sprintf(`{"name": "caller", "engine": "FLOW_BUILDER", "steps": [
		{"name": "enrich", "type": "CALL_FLOW", "flowId": %q}]}`, broken))
	call(hook, "POST", "/api/v1/webhooks/"+caller, `{}`, 200, &accepted)
	r = finish(caller, accepted.RunID)
	call(api, "GET", "/api/v1/flows/"+broken+"/runs", "", 200, &kids)
	if len(kids.Data) != 1 || kids.Data[0].Status != "FAILED" {
		t.Fatalf("broken child runs = %+v, want one FAILED", kids.Data)
	}
	if r.Status != "FAILED" || !strings.Contains(r.Steps[0].Error, kids.Data[0].ID) {
		t.Fatalf("caller = %+v, want FAILED naming the child run %s", r, kids.Data[0].ID)
	}
}
