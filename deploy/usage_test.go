package deploy

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
)

// usageRan says TestStoredBytesOnLambda completed in this process.
var usageRan atomic.Bool

// TestStoredBytesOnLambda: a FREE project's delivery has the webhook
// function measure its stored bytes (in the background), the runner counts
// a finished run on its flow, and GET /api/v1/project through the api
// function shows at least the run's trigger and output.
func TestStoredBytesOnLambda(t *testing.T) {
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
	testwait.For(t, 10*time.Second, "the webhook function measures the project's stored bytes", func() bool {
		observed.Lock()
		defer observed.Unlock()
		return observed.m["WebhookFunction"][grant{"dynamodb:BatchGetItem", "FlowsTable"}]
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
	usageRan.Store(!t.Failed())
}
