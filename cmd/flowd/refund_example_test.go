package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
)

// refundDoubles stands in for Slack (chat.postMessage, through the slack
// connection's baseUrl) and the billing API of examples/refund-approval.json.
type refundDoubles struct {
	*httptest.Server
	mu       sync.Mutex
	messages []string
	refunds  []map[string]any
	events   []struct {
		Type string
		Data struct{ RunID, Step, Status, Decision, URL string }
	}
	posted chan string
}

func newRefundDoubles(t *testing.T) *refundDoubles {
	d := &refundDoubles{posted: make(chan string, 100)}
	d.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		d.mu.Lock()
		defer d.mu.Unlock()
		switch r.URL.Path {
		case "/api/chat.postMessage":
			if r.Header.Get("Authorization") != "Bearer xoxb-test" {
				w.Write([]byte(`{"ok": false, "error": "invalid_auth"}`))
				return
			}
			text, _ := body["text"].(string)
			d.messages = append(d.messages, text)
			d.posted <- text
			fmt.Fprintf(w, `{"ok": true, "channel": "C1", "ts": "1700000000.%06d"}`, len(d.messages))
		case "/events": // the event subscription's receiver
			raw, _ := json.Marshal(body)
			var e struct {
				Type string
				Data struct{ RunID, Step, Status, Decision, URL string }
			}
			_ = json.Unmarshal(raw, &e)
			d.events = append(d.events, e)
		case "/api/refunds":
			d.refunds = append(d.refunds, body)
			w.Write([]byte(`{"id": "re_1", "status": "succeeded"}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(d.Close)
	return d
}

func (d *refundDoubles) next(t *testing.T) string {
	t.Helper()
	select {
	case m := <-d.posted:
		return m
	case <-time.After(60 * time.Second):
		t.Fatal("no Slack message came")
	}
	return ""
}

// TestRefundApprovalExample runs examples/refund-approval.json on flowd: a
// refund request posts its decision link to the Slack double (through the
// slack connection's baseUrl); approving through that link with an amount
// refunds it through billing and says so in Slack; rejecting through the
// link refunds nothing and says so.
func TestRefundApprovalExample(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	d := newRefundDoubles(t)
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	api(t, p, key, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "slack", "app": "slack", "type": "API_KEY",
		"value": {"apiKey": "xoxb-test"}, "baseUrl": %q}`, d.URL), 201, nil)
	flowID := createEnabled(t, p, key, example(t, "refund-approval", d.URL))
	api(t, p, key, "POST", "/api/v1/subscriptions", fmt.Sprintf(`{"url": %q, "events": ["approval.requested", "approval.decided"]}`,
		d.URL+"/events"), 201, nil)
	linkRE := regexp.MustCompile(regexp.QuoteMeta(p.base) + `/approvals/[A-Za-z0-9_-]{43}`)
	ask := func(body string) (runID, link string) {
		t.Helper()
		runID = trigger(t, p, flowID, body)
		msg := d.next(t)
		link = linkRE.FindString(msg)
		if link == "" || !strings.Contains(msg, "#") && !strings.Contains(msg, "Refund") {
			t.Fatalf("Slack message %q has no decision link", msg)
		}
		return runID, link
	}

	runID, link := ask(`{"charge": "ch_1", "amount": 120, "currency": "EUR", "customer": "Ada", "reason": "damaged"}`)
	if code, body, _ := do(t, "POST", link, "application/json", `{"decision": "approve", "values": {"amount": 100, "note": "sorry"}}`); code != 200 {
		t.Fatalf("approve through the link = %d %s", code, body)
	}
	if r := finalRun(t, p, key, flowID, runID); r.Status != "SUCCEEDED" {
		t.Fatalf("approved run = %s %s %+v", r.Status, r.Error, r.Steps)
	}
	if msg := d.next(t); msg != "Refunded 100 EUR to Ada." {
		t.Errorf("Slack after the approval got %q", msg)
	}

	runID, link = ask(`{"charge": "ch_2", "amount": 900, "currency": "EUR", "customer": "Bob", "reason": "changed mind"}`)
	if code, body, _ := do(t, "POST", link, "application/json", `{"decision": "reject"}`); code != 200 {
		t.Fatalf("reject through the link = %d %s", code, body)
	}
	if r := finalRun(t, p, key, flowID, runID); r.Status != "SUCCEEDED" {
		t.Fatalf("rejected run = %s %s %+v", r.Status, r.Error, r.Steps)
	}
	if msg := d.next(t); msg != "No refund to Bob: rejected." {
		t.Errorf("Slack after the rejection got %q", msg)
	}
	// The subscription got each request with its link, and each decision.
	want := map[string]string{}
	testwait.For(t, 60*time.Second, "four approval events", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, e := range d.events {
			want[e.Type+" "+e.Data.RunID] = e.Data.Decision + e.Data.URL
		}
		return len(want) == 4
	})
	if got := want["approval.requested "+runID]; got != link {
		t.Errorf("approval.requested of %s carried %q, want the link %s", runID, got, link)
	}
	if got := want["approval.decided "+runID]; got != "rejected" {
		t.Errorf("approval.decided of %s carried %q, want rejected and no link", runID, got)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.refunds) != 1 || d.refunds[0]["charge"] != "ch_1" || d.refunds[0]["amount"] != 100.0 || d.refunds[0]["note"] != "sorry" {
		t.Errorf("billing got %v, want one refund of 100 on ch_1", d.refunds)
	}
}
