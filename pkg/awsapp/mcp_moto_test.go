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

	"flowservice/internal/mcptest"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
)

// TestMCPStepOnMoto is the Lambda path of MCP steps: the api function
// stores an MCP connection (its headers in Secrets Manager), the webhook
// function accepts a delivery, and the runner function runs the flow's
// MCP step against the SDK's own MCP server on 127.0.0.1: the tool is
// called once with the connection's header, its structuredContent is the
// step's output, and the run record never shows the header.
func TestMCPStepOnMoto(t *testing.T) {
	ctx := context.Background()
	const token = "tok-moto-mcp-1234567890"
	srv := mcptest.Start(t)

	st := newMotoStage(t, "mcp", awsapp.Config{Stage: "test", LogOutput: io.Discard, AllowPrivateNetworks: true})
	api, err := management.NewHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := awsapp.NewWebhookHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, st.AWS, st.Cfg)
	if err != nil {
		t.Fatal(err)
	}
	call := func(h awsapp.ProxyHandler, method, path, body string, want int, out any) string {
		t.Helper()
		resp, err := h(ctx, events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body,
			MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + st.Key}},
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
		return resp.Body
	}
	call(api, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "tracker", "app": "tracker", "type": "MCP",
		"value": {"url": %q, "headers": {"Authorization": "Bearer %s"}}}`, srv.Endpoint, token), 201, nil)
	// The step's connection must be an MCP one.
	call(api, "POST", "/api/v1/connections", `{"name": "plain", "app": "x", "type": "API_KEY", "value": {"apiKey": "k-1234567"}}`, 201, nil)
	call(api, "POST", "/api/v1/flows", `{"name": "bad", "engine": "FLOW_BUILDER", "steps": [
		{"name": "i", "type": "MCP", "connection": "plain", "tool": "create_issue"}]}`, 400, nil)

	var f struct{ ID string }
	call(api, "POST", "/api/v1/flows", `{"name": "file", "engine": "FLOW_BUILDER", "steps": [
		{"name": "issue", "type": "MCP", "connection": "tracker", "tool": "create_issue", "arguments": {"title": "{{ trigger.body.title }}"}}]}`, 201, &f)
	call(api, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
	var accepted struct{ RunID string }
	call(hook, "POST", "/api/v1/webhooks/"+f.ID, `{"title": "Disk full"}`, 200, &accepted)

	sqsc := sqs.NewFromConfig(st.AWS)
	var r struct {
		Status, Error string
		Steps         []struct{ Output json.RawMessage }
	}
	var raw string
	for range 20 {
		raw = call(api, "GET", "/api/v1/flows/"+f.ID+"/runs/"+accepted.RunID, "", 200, &r)
		if r.Status != "RUNNING" {
			break
		}
		if _, err := awsdev.PollOnce(ctx, sqsc, st.Cfg.QueueURL, time.Second, runner); err != nil {
			t.Fatal(err)
		}
	}
	if r.Status != "SUCCEEDED" {
		t.Fatalf("run %s", raw)
	}
	if string(r.Steps[0].Output) != `{"id":1,"title":"Disk full"}` {
		t.Errorf("MCP step output %s", r.Steps[0].Output)
	}
	if n := srv.Calls("create_issue"); n != 1 {
		t.Errorf("create_issue ran %d times", n)
	}
	if auth := srv.HeaderValues("Authorization"); len(auth) == 0 || auth[0] != "Bearer "+token {
		t.Errorf("the server saw Authorization %v", auth)
	}
	if strings.Contains(raw, token) {
		t.Errorf("the run record shows the token: %s", raw)
	}
}
