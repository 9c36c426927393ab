package awsapp_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
)

// hookApp is the api, webhook and workflowhook functions on moto.
type hookApp struct {
	t                 *testing.T
	api, hook, wfhook awsapp.ProxyHandler
	key               string
}

func newHookApp(t *testing.T) *hookApp {
	t.Helper()
	ctx := context.Background()
	st := newMotoStage(t, "hookedge", awsapp.Config{Stage: "test", LogOutput: io.Discard})
	awsCfg, cfg := st.AWS, st.Cfg
	a := &hookApp{t: t, key: st.Key}
	var err error
	if a.api, err = management.NewHandler(ctx, awsCfg, cfg); err != nil {
		t.Fatal(err)
	}
	if a.hook, err = awsapp.NewWebhookHandler(ctx, awsCfg, cfg); err != nil {
		t.Fatal(err)
	}
	if a.wfhook, err = awsapp.NewWorkflowHookHandler(ctx, awsCfg, cfg); err != nil {
		t.Fatal(err)
	}
	return a
}

// call sends one proxy event as API Gateway would (path as the client
// sent it) and returns the answer.
func (a *hookApp) call(h awsapp.ProxyHandler, method, path, body string, hdr map[string]string) events.APIGatewayProxyResponse {
	a.t.Helper()
	mv := map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + a.key}}
	for k, v := range hdr {
		mv[k] = []string{v}
	}
	resp, err := h(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body,
		MultiValueHeaders: mv,
		RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: path,
			Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}})
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// enabled creates and enables a flow and returns its ID.
func (a *hookApp) enabled(def string) string {
	a.t.Helper()
	resp := a.call(a.api, "POST", "/api/v1/flows", def, nil)
	var f struct{ ID string }
	if resp.StatusCode != 201 || json.Unmarshal([]byte(resp.Body), &f) != nil {
		a.t.Fatalf("create flow = %d %s", resp.StatusCode, resp.Body)
	}
	if resp := a.call(a.api, "POST", "/api/v1/flows/"+f.ID+"/enable", "", nil); resp.StatusCode != 200 {
		a.t.Fatalf("enable flow = %d %s", resp.StatusCode, resp.Body)
	}
	return f.ID
}

// runID is the run a 200 answer names.
func runID(t *testing.T, resp events.APIGatewayProxyResponse) string {
	t.Helper()
	var ack struct{ RunID string }
	if resp.StatusCode != 200 || json.Unmarshal([]byte(resp.Body), &ack) != nil || ack.RunID == "" {
		t.Fatalf("answer = %d %s, want 200 with a run", resp.StatusCode, resp.Body)
	}
	return ack.RunID
}

// TestRetryOfBodyWithHTMLCharactersOnMoto is the Lambda path (DynamoDB
// store) of a sender's retry of a body holding <, > and &: both receiver
// functions answer it with the first run, not 409 DUPLICATE_DELIVERY;
// another body with the key still is 409.
func TestRetryOfBodyWithHTMLCharactersOnMoto(t *testing.T) {
	a := newHookApp(t)
	fb := a.enabled(`{"name": "slack", "engine": "FLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"idempotencyKey": "trigger.body.event_id"}},
		"steps": [{"name": "s", "type": "SET", "values": {"text": "{{ trigger.body.event.text }}"}}]}`)
	a.enabled(`{"name": "slack-wf", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "slack-events", "idempotencyHeader": "X-Delivery"}},
		"steps": [{"name": "s", "type": "SET", "values": {"text": "{{ trigger.body.event.text }}"}}]}`)
	mention := `{"event_id": "Ev01", "event": {"type": "app_mention", "text": "<@U123> deploy a & b > prod"}}`
	for _, tc := range []struct {
		name string
		h    awsapp.ProxyHandler
		path string
		hdr  map[string]string
	}{
		{"webhook function", a.hook, "/api/v1/webhooks/" + fb, nil},
		{"workflowhook function", a.wfhook, "/webhook/slack-events", map[string]string{"X-Delivery": "d-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := runID(t, a.call(tc.h, "POST", tc.path, mention, tc.hdr))
			if again := runID(t, a.call(tc.h, "POST", tc.path, mention, tc.hdr)); again != first {
				t.Errorf("retry made run %s, want the first run %s", again, first)
			}
			other := strings.Replace(mention, "prod", "staging", 1)
			if resp := a.call(tc.h, "POST", tc.path, other, tc.hdr); resp.StatusCode != 409 || !strings.Contains(resp.Body, "DUPLICATE_DELIVERY") {
				t.Errorf("another body with the key = %d %s, want 409 DUPLICATE_DELIVERY", resp.StatusCode, resp.Body)
			}
		})
	}
}

// TestEscapedWorkflowPathOnMoto: the workflowhook function routes a path
// whose slash arrives escaped (a%2Fb, as generated clients send it) to
// the flow of a/b, decoding once: a%252Fb is no path of it.
func TestEscapedWorkflowPathOnMoto(t *testing.T) {
	a := newHookApp(t)
	a.enabled(`{"name": "nested", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "a/b"}},
		"steps": [{"name": "s", "type": "SET", "values": {"path": "{{ trigger.path }}"}}]}`)
	plain := runID(t, a.call(a.wfhook, "POST", "/webhook/a/b", `{}`, nil))
	escaped := runID(t, a.call(a.wfhook, "POST", "/webhook/a%2Fb", `{}`, nil))
	if plain == escaped {
		t.Fatalf("two deliveries shared run %s", plain)
	}
	for _, p := range []string{"/webhook/a%252Fb", "/webhook/a%2F%2Fb", "/webhook/a%2F..%2Fb"} {
		if resp := a.call(a.wfhook, "POST", p, `{}`, nil); resp.StatusCode != 404 || !strings.Contains(resp.Body, "WEBHOOK_NOT_FOUND") {
			t.Errorf("POST %s = %d %s, want 404 WEBHOOK_NOT_FOUND", p, resp.StatusCode, resp.Body)
		}
	}
}
