package deploy

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
)

// TestStoredBytesOnLambda: a FREE project's delivery has the webhook
// function measure its stored bytes (in the background), the runner counts
// a finished run on its flow, GET /api/v1/project through the api
// function shows at least the run's trigger and output, and past the
// quota the webhook function refuses deliveries.
func TestStoredBytesOnLambda(t *testing.T) {
	calls := recordGrants(t)
	e := newE2E(t, 5, automation.RunPolicy{MaxAttempts: 3})
	ctx := context.Background()
	p, err := e.svc.CreateProject(ctx, "tiny", automation.PlanFree)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := e.svc.CreateAPIKey(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	ext, _ := external(t, 200)
	status, f := call(t, e.api, "POST", "/api/v1/flows", key, fmt.Sprintf(`{"name": "Keep", "engine": "FLOW_BUILDER",
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"n": 1}}]}`, ext.URL))
	if status != 201 {
		t.Fatalf("create flow = %d %v", status, f)
	}
	flowID := f["id"].(string)
	if status, b := call(t, e.api, "POST", "/api/v1/flows/"+flowID+"/enable", key, ""); status != 200 {
		t.Fatalf("enable = %d %v", status, b)
	}
	const body = 20_000
	if status, b := call(t, e.hook, "POST", "/api/v1/webhooks/"+flowID, "", `{"pad": "`+strings.Repeat("x", body)+`"}`); status != 200 {
		t.Fatalf("webhook = %d %v", status, b)
	}
	testwait.For(t, testwait.Hang, "the webhook function measures the project's stored bytes", func() bool {
		return calls.has("WebhookFunction", grant{"dynamodb:BatchGetItem", "FlowsTable"})
	})
	e.poll(t)

	status, info := call(t, e.api, "GET", "/api/v1/project", key, "")
	if status != 200 {
		t.Fatalf("GET /api/v1/project = %d %v", status, info)
	}
	usage, _ := info["usage"].(map[string]any)
	if n, _ := usage["storedBytes"].(float64); n < body {
		t.Errorf("usage.storedBytes = %v after a finished run with a %d-byte body, want at least that", usage["storedBytes"], body)
	}

	// Over a limit below what it keeps, a webhook function instance that
	// has measured the project (its first delivery has it measured in the
	// background) answers 429 QUOTA_EXCEEDED with Retry-After.
	if _, err := e.svc.SetProjectLimits(ctx, "tiny", map[string]int64{"storedBytes": 1000}, nil); err != nil {
		t.Fatal(err)
	}
	fresh, err := awsapp.NewWebhookHandler(ctx, e.aws, e.cfgOf("WebhookFunction"))
	if err != nil {
		t.Fatal(err)
	}
	var refused events.APIGatewayProxyResponse
	testwait.For(t, testwait.Hang, "a delivery refused for storedBytes", func() bool {
		resp, err := fresh(ctx, proxyRequest("POST", "/api/v1/webhooks/"+flowID, "", `{}`))
		if err != nil {
			t.Fatal(err)
		}
		refused = resp
		return resp.StatusCode == http.StatusTooManyRequests
	})
	retryAfter := refused.Headers["Retry-After"]
	if v := refused.MultiValueHeaders["Retry-After"]; len(v) > 0 {
		retryAfter = v[0]
	}
	if !strings.Contains(refused.Body, "QUOTA_EXCEEDED") || !strings.Contains(refused.Body, "limits.storedBytes") || retryAfter == "" {
		t.Errorf("refused delivery = %d %s (Retry-After %q); want QUOTA_EXCEEDED naming limits.storedBytes with Retry-After",
			refused.StatusCode, refused.Body, retryAfter)
	}
}
