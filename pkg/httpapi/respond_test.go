package httpapi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestRespondFullResponse: a RESPOND step's status, headers, content type
// and body (text or any JSON value) are what the workflow builder receiver
// sends, through real HTTP.
func TestRespondFullResponse(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	sync := `,"responseMode":"ON_COMPLETION","signature":{"preset":"SLACK","secret":"slack-signing-secret"}`
	h.activeFlow(t, h.key, workflowFlow("slack-events", "POST", sync, `[
		{"name":"challenge","type":"RESPOND","body":"{{ trigger.body.challenge }}"}]`))

	// Slack's url_verification, signed as Slack signs it.
	body := `{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	sig := "v0=" + hmacHex("slack-signing-secret", "v0:"+ts+":"+body)
	r := call(t, h.workflow, "POST", "/webhook/slack-events", "", body,
		"X-Slack-Request-Timestamp: "+ts, "X-Slack-Signature: "+sig)
	if r.status != 200 || string(r.body) != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("challenge answer %d %q", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("challenge Content-Type %q", ct)
	}
	if r.header.Get("X-Run-Id") == "" || r.header.Get("Cache-Control") != "no-store" {
		t.Errorf("receiver headers lost: %v", r.header)
	}
	// A forged signature still gets no answer from the flow.
	r = call(t, h.workflow, "POST", "/webhook/slack-events", "", body,
		"X-Slack-Request-Timestamp: "+ts, "X-Slack-Signature: v0=00")
	r.wantError(t, 401, "")

	// hub.challenge echo on GET.
	h.activeFlow(t, h.key, workflowFlow("meta-verify", "GET", `,"responseMode":"ON_COMPLETION"`, `[
		{"name":"echo","type":"RESPOND","body":"{{ trigger.query['hub.challenge'] }}"}]`))
	r = call(t, h.workflow, "GET", "/webhook/meta-verify?hub.mode=subscribe&hub.challenge=1158201444", "", "")
	if r.status != 200 || string(r.body) != "1158201444" {
		t.Errorf("hub.challenge answer %d %q", r.status, r.body)
	}

	// Any JSON value, with headers and a content type of its own.
	h.activeFlow(t, h.key, workflowFlow("custom", "POST", `,"responseMode":"ON_COMPLETION"`, `[
		{"name":"reply","type":"RESPOND","statusCode":202,
		 "headers":{"X-Order":"{{ trigger.body.id }}","Link":"</orders/{{ trigger.body.id }}>; rel=self"},
		 "contentType":"application/vnd.api+json",
		 "body":[{"id":"{{ trigger.body.id }}","n":"{{ trigger.body.n }}","ok":true},null,3.5]}]`))
	r = call(t, h.workflow, "POST", "/webhook/custom", "", `{"id":"o-7","n":42}`)
	if r.status != 202 {
		t.Fatalf("custom answer %d %s", r.status, r.body)
	}
	var got []any
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatalf("custom body %q: %v", r.body, err)
	}
	if want := `[{"id":"o-7","n":42,"ok":true},null,3.5]`; mustJSON(t, got) != want {
		t.Errorf("custom body %s, want %s", mustJSON(t, got), want)
	}
	if r.header.Get("X-Order") != "o-7" || r.header.Get("Link") != "</orders/o-7>; rel=self" ||
		r.header.Get("Content-Type") != "application/vnd.api+json" {
		t.Errorf("custom headers %v", r.header)
	}
	if r.header.Get("Content-Security-Policy") != "sandbox" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("an answer is not sandboxed: %v", r.header)
	}

	// A header value rendered with CR/LF fails the run; nothing is split.
	h.activeFlow(t, h.key, workflowFlow("crlf", "POST", `,"responseMode":"ON_COMPLETION"`, `[
		{"name":"reply","type":"RESPOND","headers":{"X-Echo":"{{ trigger.body.v }}"},"body":{"ok":"yes"}}]`))
	r = call(t, h.workflow, "POST", "/webhook/crlf", "", `{"v":"a\r\nSet-Cookie: s=1"}`)
	e := r.wantError(t, 500, "RUN_FAILED")
	if !strings.Contains(e.Message, "control character") || r.header.Get("Set-Cookie") != "" {
		t.Errorf("CRLF header: %q, headers %v", e.Message, r.header)
	}

	// The old flat object of strings still answers as before.
	h.activeFlow(t, h.key, workflowFlow("flat", "POST", `,"responseMode":"ON_COMPLETION"`, `[
		{"name":"reply","type":"RESPOND","statusCode":201,"body":{"status":"ok"}}]`))
	r = call(t, h.workflow, "POST", "/webhook/flat", "", `{}`)
	if r.status != 201 || strings.TrimSpace(string(r.body)) != `{"status":"ok"}` || r.header.Get("Content-Type") != "application/json" {
		t.Errorf("flat answer %d %q %v", r.status, r.body, r.header)
	}
}

// TestRespondReservedHeaders: a header the receiver owns is refused at save
// time with a 400 that names the field.
func TestRespondReservedHeaders(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	for _, name := range []string{"Content-Length", "transfer-encoding", "Connection", "Keep-Alive", "Upgrade",
		"Set-Cookie", "X-Run-Id", "X-Request-Id", "Content-Type", "Access-Control-Allow-Origin", "Cache-Control",
		"Content-Security-Policy", "NEL", "report-to", "Reporting-Endpoints", "Clear-Site-Data", "Strict-Transport-Security",
		"Refresh", "Location"} {
		steps := fmt.Sprintf(`[{"name":"reply","type":"RESPOND","headers":{%q:"x"},"body":"ok"}]`, name)
		r := call(t, h.api, "POST", "/api/v1/flows", h.key, workflowFlow("", "POST", `,"responseMode":"ON_COMPLETION"`, steps))
		e := r.wantError(t, 400, "")
		if !strings.Contains(e.Message, "steps[0].headers."+name) || !strings.Contains(e.Message, `(step "reply")`) {
			t.Errorf("%s: message %q does not name the field", name, e.Message)
		}
	}
	for _, bad := range []string{
		`[{"name":"reply","type":"RESPOND","contentType":"not a type"}]`,
		`[{"name":"reply","type":"RESPOND","headers":{"Bad Name":"x"}}]`,
		`[{"name":"reply","type":"RESPOND","headers":{"X-A":"a\r\nb"}}]`,
		`[{"name":"reply","type":"RESPOND","body":"{{ trigger.body. }}"}]`,
		`[{"name":"s","type":"SET","values":{},"contentType":"text/plain"}]`,
	} {
		r := call(t, h.api, "POST", "/api/v1/flows", h.key, workflowFlow("", "POST", `,"responseMode":"ON_COMPLETION"`, bad))
		r.wantError(t, 400, "")
	}
	// Allowed: ordinary headers, in any case.
	f := createFlow(t, h.api, h.key, workflowFlow("", "POST", `,"responseMode":"ON_COMPLETION"`,
		`[{"name":"reply","type":"RESPOND","headers":{"x-custom":"1","Link":"</x>; rel=next"},"contentType":"text/csv","body":"a,b"}]`))
	if !strings.Contains(string(f.Trigger), "ON_COMPLETION") {
		t.Errorf("flow %s", f.Trigger)
	}
	_ = automation.StepRespond
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
