package deploy

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsdev"
)

// secretReads is SDK middleware that counts GetSecretValue calls.
func secretReads(n *atomic.Int64) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("countSecretReads",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if awsmiddleware.GetServiceID(ctx) == secretsmanager.ServiceID && awsmiddleware.GetOperationName(ctx) == "GetSecretValue" {
					n.Add(1)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	}
}

// TestCachedSecretsRevokeAtOnce runs the webhook and runner functions with
// warm secret caches (smsecrets.Cached): a second delivery and run read no
// secret, and yet a connection deleted, or a signing secret changed,
// through another function's Service takes effect on the very next
// delivery, within the cache's minute.
func TestCachedSecretsRevokeAtOnce(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	var reads atomic.Int64
	counted := st.aws.Copy()
	counted.APIOptions = append(counted.APIOptions, secretReads(&reads))
	st.cfg.AllowPrivateNetworks = true
	hook, err := awsapp.NewWebhookHandler(ctx, counted, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, counted, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ext, calls := external(t, 200)
	conn, err := st.svc.CreateConnection(ctx, st.project, automation.ConnectionInput{
		Name: "Chat", App: "chat", Type: automation.ConnectionAPIKey, Value: json.RawMessage(`{"apiKey": "sk-not-real-1"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	f := st.flow(t, fmt.Sprintf(`{"name": "Signed", "engine": "FLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST",
			"signature": {"header": "X-Sig", "prefix": "sha256=", "secret": "whsec-1"}}},
		"steps": [{"name": "notify", "type": "HTTP", "method": "POST", "url": %q, "connectionId": %q}]}`, ext.URL, conn.ID), true)

	body := `{"event": "push"}`
	deliver := func(secret string) (int, string) {
		t.Helper()
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(body))
		req := proxyRequest("POST", "/api/v1/webhooks/"+f.ID, "", body)
		req.MultiValueHeaders["X-Sig"] = []string{"sha256=" + hex.EncodeToString(mac.Sum(nil))}
		resp, err := hook(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var acc map[string]any
		_ = json.Unmarshal([]byte(resp.Body), &acc)
		id, _ := acc["runId"].(string)
		return resp.StatusCode, id
	}
	run := func(id string) automation.Run {
		t.Helper()
		for j := 0; j < 5; j++ {
			if n, err := awsdev.PollOnce(ctx, sqs.NewFromConfig(st.aws), st.cfg.QueueURL, 0, runner); err != nil {
				t.Fatal(err)
			} else if n > 0 {
				break
			}
		}
		r, err := st.store.Run(ctx, st.project.ID, f.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	// Cold: the flow's secrets once in each function (the webhook checks
	// the signature, the runner reveals the flow) and the API key once.
	status, id := deliver("whsec-1")
	if r := run(id); status != 200 || r.Status != automation.RunSucceeded {
		t.Fatalf("first delivery = %d, run %s %q", status, r.Status, r.Error)
	}
	if n := reads.Load(); n != 3 {
		t.Fatalf("first delivery and run read %d secrets, want 3", n)
	}
	// Warm: none.
	status, id = deliver("whsec-1")
	if r := run(id); status != 200 || r.Status != automation.RunSucceeded {
		t.Fatalf("second delivery = %d, run %s %q", status, r.Status, r.Error)
	}
	if n := reads.Load(); n != 3 {
		t.Fatalf("second delivery and run read %d more secrets, want 0 (cached)", n-3)
	}

	// The signing secret changed: the old one is refused on the next
	// delivery, the new one accepted.
	secret := "whsec-2"
	trig := f.Trigger
	wh := *trig.Webhook
	wh.Signature = &automation.Signature{Header: "X-Sig", Prefix: "sha256=", Secret: automation.Secret(secret)}
	trig.Webhook = &wh
	if _, err := st.svc.UpdateFlow(ctx, st.project, f.ID, automation.FlowInput{Trigger: &trig}); err != nil {
		t.Fatal(err)
	}
	if status, _ := deliver("whsec-1"); status != 401 {
		t.Fatalf("old signing secret after the change = %d, want 401", status)
	}
	status, id = deliver(secret)
	if r := run(id); status != 200 || r.Status != automation.RunSucceeded {
		t.Fatalf("new signing secret = %d, run %s %q; want 200 and a run", status, r.Status, r.Error)
	}

	// The connection deleted by the management API (another Service, as
	// in another function): the next run fails at once, naming it, and
	// calls nothing.
	if err := st.svc.DeleteConnection(ctx, st.project, conn.ID); err != nil {
		t.Fatal(err)
	}
	status, id = deliver(secret)
	r := run(id)
	if status != 200 || r.Status != automation.RunFailed || !strings.Contains(r.Error+fmt.Sprint(r.Steps), conn.ID) {
		t.Fatalf("after the delete: delivery %d, run %s %q %+v; want FAILED naming %s", status, r.Status, r.Error, r.Steps, conn.ID)
	}
	if calls() != 3 {
		t.Fatalf("the external service got %d calls, want 3: none with the deleted connection", calls())
	}
}
