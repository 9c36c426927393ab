package httpapi

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestIdempotencyKeyExpression: a Stripe event delivered again (same evt_
// ID in the body, no idempotency header) gets the first run back, alone or
// twice at once, on both receivers; another ID is a new run; an event
// without the field is not deduplicated.
func TestIdempotencyKeyExpression(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	fb := h.activeFlow(t, h.key, `{"name":"stripe","engine":"FLOW_BUILDER",
		"trigger":{"type":"WEBHOOK","webhook":{"idempotencyKey":"trigger.body.id","signature":{"preset":"STRIPE","secret":"whsec_test"}}},
		"steps":[{"name":"s","type":"SET","values":{"evt":"{{ trigger.body.id }}"}}]}`)
	h.activeFlow(t, h.key, workflowFlow("stripe-wf", "POST", `,"idempotencyKey":"trigger.body.data.object.id","idempotencyHeader":"Idempotency-Key"`, ""))

	stripe := func(body string) string {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		return "Stripe-Signature: t=" + ts + ",v1=" + hmacHex("whsec_test", ts+"."+body)
	}
	deliver := func(body string) string {
		return call(t, h.engine, "POST", "/api/v1/webhooks/"+fb, "", body, stripe(body)).started(t)
	}
	evt := `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","type":"invoice.paid","data":{"object":{"id":"in_1"}}}`
	before := h.runs.count()
	first := deliver(evt)
	if again := deliver(evt); again != first {
		t.Errorf("redelivery made run %s, want %s", again, first)
	}
	// The same key with another body: a 409 that tells nothing of the
	// first delivery's run.
	forged := `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","type":"invoice.paid","data":{"object":{"id":"in_mallory"}}}`
	r := call(t, h.engine, "POST", "/api/v1/webhooks/"+fb, "", forged, stripe(forged))
	r.wantError(t, 409, "DUPLICATE_DELIVERY")
	if strings.Contains(string(r.body), first) {
		t.Errorf("the 409 names the first run: %s", r.body)
	}
	// Two deliveries of one new event at once: one run.
	evt2 := `{"id":"evt_2","type":"invoice.paid"}`
	var wg sync.WaitGroup
	ids := make([]string, 2)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i] = deliver(evt2)
		}()
	}
	wg.Wait()
	if ids[0] != ids[1] || ids[0] == first {
		t.Errorf("concurrent deliveries: runs %v (first event's %s)", ids, first)
	}
	if n := h.runs.count() - before; n != 2 {
		t.Errorf("%d runs made, want 2 (one per event)", n)
	}
	// No id: each delivery is its own run.
	noID := `{"type":"ping"}`
	if a, b := deliver(noID), deliver(noID); a == b {
		t.Errorf("deliveries without the key shared run %s", a)
	}
	// Workflow builder: the expression, and the header winning over it.
	wf := func(body string, hdr ...string) string {
		return call(t, h.workflow, "POST", "/webhook/stripe-wf", "", body, hdr...).started(t)
	}
	a := wf(evt)
	if b := wf(evt); b != a {
		t.Errorf("workflow builder redelivery: %s, want %s", b, a)
	}
	if c := wf(evt, "Idempotency-Key: k-1"); c == a {
		t.Errorf("the header's value did not win over the expression")
	}
	// Save time: the expression is checked.
	call(t, h.api, "POST", "/api/v1/flows", h.key, workflowFlow("", "POST", `,"idempotencyKey":"trigger.body.("`, "")).wantError(t, 400, "")
}

// TestRetryOfBodyWithHTMLCharacters: a sender's retry of a body holding
// <, > or & (every Slack app_mention: "<@U123>") gets the first run back
// on both receivers. Before, the first body was stored re-encoded
// (\u003c), its digest no longer matched the bytes of the retry, and the
// retry was 409 DUPLICATE_DELIVERY.
func TestRetryOfBodyWithHTMLCharacters(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	fb := h.activeFlow(t, h.key, `{"name":"slack","engine":"FLOW_BUILDER",
		"trigger":{"type":"WEBHOOK","webhook":{"idempotencyKey":"trigger.body.event_id"}},
		"steps":[{"name":"s","type":"SET","values":{"text":"{{ trigger.body.event.text }}"}}]}`)
	h.activeFlow(t, h.key, workflowFlow("slack-events", "POST", `,"idempotencyHeader":"X-Delivery"`, ""))
	mention := `{"event_id":"Ev01","event":{"type":"app_mention","text":"<@U123> deploy a & b > prod"}}`
	for _, tc := range []struct {
		name string
		srv  *testServer
		path string
		hdr  []string
	}{
		{"flow builder", h.engine, "/api/v1/webhooks/" + fb, nil},
		{"workflow builder", h.workflow, "/webhook/slack-events", []string{"X-Delivery: d-1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := call(t, tc.srv, "POST", tc.path, "", mention, tc.hdr...).started(t)
			r := call(t, tc.srv, "POST", tc.path, "", mention, tc.hdr...)
			if r.status != 200 {
				t.Fatalf("retry = %d %s, want 200 with the first run %s", r.status, r.body, first)
			}
			if again := r.started(t); again != first {
				t.Errorf("retry made run %s, want the first run %s", again, first)
			}
			// Another body with the key is still refused.
			other := strings.Replace(mention, "prod", "staging", 1)
			call(t, tc.srv, "POST", tc.path, "", other, tc.hdr...).wantError(t, 409, "DUPLICATE_DELIVERY")
		})
	}
}
