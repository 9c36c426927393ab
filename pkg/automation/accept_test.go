package automation_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// TestAdmitAccept: a delivery's acceptance in its two phases. Admit
// refuses in order (depth, IP allowlist, authentication: each refused
// delivery below would fail every later check too), Accept refuses a bad
// signature before decoding the body and starts nothing, and an
// idempotent repeat gets the first run back while another body under the
// same key is a conflict.
func TestAdmitAccept(t *testing.T) {
	e := newPureEnv(t, flowtest.Options{})
	ctx := context.Background()
	f := e.flow(t, "orders/:id", `,"idempotencyHeader":"X-Delivery",
		"authentication":{"type":"HEADER","name":"X-Key","value":"k3y"},
		"signature":{"header":"X-Sig","prefix":"sha256=","secret":"s3cret"}`,
		`[{"name":"s","type":"SET","values":{"id":"{{ trigger.params.id }}"}}]`, "")
	if _, err := e.Svc.SetWebhookSecurity(ctx, e.project, f.ID, []string{"203.0.113.0/24"}); err != nil {
		t.Fatal(err)
	}
	f, err := e.Svc.RouteFlow(ctx, "orders/7", "POST")
	if err != nil {
		t.Fatal(err)
	}
	inside := netip.MustParseAddr("203.0.113.9")
	good := automation.CallerCredentials{Header: "k3y"}

	for _, tt := range []struct {
		name string
		d    automation.Delivery
		code string
	}{
		{"depth before all", automation.Delivery{Flow: f, Depth: automation.MaxFlowDepth + 1}, "LOOP_DETECTED"},
		{"allowlist before credentials", automation.Delivery{Flow: f, Depth: automation.MaxFlowDepth}, "IP_NOT_ALLOWED"},
		{"unknown address", automation.Delivery{Flow: f, Credentials: good}, "IP_NOT_ALLOWED"},
		{"credentials", automation.Delivery{Flow: f, ClientIP: inside, Credentials: automation.CallerCredentials{Header: "k3"}}, "UNAUTHORIZED"},
		{"the owner's address is unknown too", automation.Delivery{Flow: f, Owner: true, Test: true}, "IP_NOT_ALLOWED"},
	} {
		if adm, err := e.Svc.Admit(ctx, tt.d); adm != nil || !automation.HasCode(err, tt.code) {
			t.Errorf("%s: Admit = %v, %v; want %s", tt.name, adm, err, tt.code)
		}
	}

	body := []byte(`{"n":1}`)
	deliver := func(raw []byte, sig string) (automation.Answer, error) {
		adm, err := e.Svc.Admit(ctx, automation.Delivery{Flow: f, ClientIP: inside, Credentials: good, RoutePath: "orders/7"})
		if err != nil {
			t.Fatalf("Admit with the right address and key: %v", err)
		}
		var decodeErr error
		if !json.Valid(raw) {
			decodeErr = automation.InvalidCode("INVALID_JSON", "not JSON")
		}
		return adm.Accept(ctx, automation.Body{Raw: raw, Method: "POST", Path: "/webhook/orders/7",
			Decoded: automation.DecodedBody{Body: json.RawMessage(raw)}, DecodeErr: decodeErr,
			Headers: map[string][]string{"X-Sig": {sig}, "X-Delivery": {"d1"}, "X-Key": {"k3y"}, "Content-Type": {"application/json"}}})
	}
	signed, err := automation.SignHeaders(*f.Trigger.Webhook.Signature, body, "msg_1", time.Now())
	if err != nil {
		t.Fatal(err)
	}

	if ans, err := deliver(body, "sha256=00"); !automation.HasCode(err, "INVALID_SIGNATURE") || ans.Run.ID != "" {
		t.Fatalf("Accept with a bad signature = %q, %v; want INVALID_SIGNATURE", ans.Run.ID, err)
	}
	// A body that does not decode is answered so only once the signature
	// holds.
	bad := []byte(`{"n":1, `)
	badSig, err := automation.SignHeaders(*f.Trigger.Webhook.Signature, bad, "msg_0", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deliver(bad, "sha256=00"); !automation.HasCode(err, "INVALID_SIGNATURE") {
		t.Fatalf("a bad body with a bad signature = %v; want INVALID_SIGNATURE first", err)
	}
	if _, err := deliver(bad, badSig["X-Sig"]); !automation.HasCode(err, "INVALID_JSON") {
		t.Fatalf("a bad body, signed = %v; want INVALID_JSON", err)
	}
	first, err := deliver(body, signed["X-Sig"])
	if err != nil || first.Run.ID == "" || first.Run.Status != automation.RunRunning || first.Awaited {
		t.Fatalf("Accept signed = %+v, %v; want a RUNNING run, not awaited (IMMEDIATE)", first, err)
	}
	run, err := e.Svc.Run(ctx, e.project, f.ID, first.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if td := run.Trigger; td.Params["id"] != "7" || td.Headers["x-key"] != "" || td.Headers["x-delivery"] != "d1" || string(td.Body) != `{"n":1}` {
		t.Errorf("the run's trigger = %+v; want params id 7, x-key left out, the body", td)
	}

	again, err := deliver(body, signed["X-Sig"])
	if err != nil || again.Run.ID != first.Run.ID {
		t.Fatalf("a repeat = %q, %v; want the first run %q", again.Run.ID, err, first.Run.ID)
	}
	other := []byte(`{"n":2}`)
	otherSig, err := automation.SignHeaders(*f.Trigger.Webhook.Signature, other, "msg_2", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deliver(other, otherSig["X-Sig"]); !automation.HasCode(err, automation.CodeDuplicateDelivery) {
		t.Fatalf("another body under the same key = %v; want %s", err, automation.CodeDuplicateDelivery)
	}
	l, err := e.Svc.ListRuns(ctx, e.project, f.ID, automation.PageRequest{})
	if err != nil || len(l.Data) != 1 {
		t.Fatalf("runs = %d, %v; want the one run", len(l.Data), err)
	}
}
