package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
)

// Flow language 3 through a started flowd: the examples/ flows for
// pagination and polling against local stand-ins for the services they
// call.

// pagedCRM is a CRM whose contacts list is paginated by cursor, and a chat
// service that keeps the messages posted to it.
type pagedCRM struct {
	*httptest.Server
	mu       sync.Mutex
	contacts []map[string]any
	pageSize int
	lists    []string // the query of each list request
	messages []string
}

func newPagedCRM(t *testing.T, n, pageSize int) *pagedCRM {
	c := &pagedCRM{pageSize: pageSize}
	for i := range n {
		c.contacts = append(c.contacts, map[string]any{"id": "ct_" + strconv.Itoa(i), "name": "Contact " + strconv.Itoa(i)})
	}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/contacts":
			c.lists = append(c.lists, r.URL.RawQuery)
			from, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
			to := min(from+c.pageSize, len(c.contacts))
			var next any
			if to < len(c.contacts) {
				next = strconv.Itoa(to)
			}
			json.NewEncoder(w).Encode(map[string]any{"contacts": c.contacts[from:to], "next_cursor": next})
		case "/api/messages":
			var m struct{ Text string }
			b, _ := io.ReadAll(r.Body)
			json.Unmarshal(b, &m)
			c.messages = append(c.messages, m.Text)
			fmt.Fprint(w, `{"ok":true}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *pagedCRM) seen() (lists, messages []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lists...), append([]string(nil), c.messages...)
}

// TestPaginatedFetchExample: examples/paginated-contacts-digest.json reads
// all pages of the CRM's contacts through real HTTP and posts one digest.
func TestPaginatedFetchExample(t *testing.T) {
	crm := newPagedCRM(t, 7, 3)
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_CODE_SANDBOX=false")
	key := initialKey(t, dir)
	id := createCodeFlow(t, p, key, example(t, "paginated-contacts-digest", crm.URL))
	_, r := postHook(t, p, key, id, "/api/v1/webhooks/"+id, `{"since": "2026-11-01"}`, nil)
	if r.Status != "SUCCEEDED" {
		t.Fatalf("run %s %q %+v", r.Status, r.Error, r.Steps)
	}
	var out struct {
		Items []map[string]any
		Pages int
	}
	if err := json.Unmarshal(r.Steps[0].Output, &out); err != nil || len(out.Items) != 7 || out.Pages != 3 || out.Items[6]["id"] != "ct_6" {
		t.Fatalf("contacts output %s (%v)", r.Steps[0].Output, err)
	}
	lists, messages := crm.seen()
	if len(lists) != 3 || !strings.Contains(lists[0], "created_after=2026-11-01") || strings.Contains(lists[0], "cursor=") || !strings.Contains(lists[2], "cursor=6") {
		t.Errorf("list requests %q, want 3 pages by cursor with the step's query", lists)
	}
	want := "7 new contacts since 2026-11-01 (3 pages): Contact 0, Contact 1, Contact 2, Contact 3, Contact 4, Contact 5, Contact 6"
	if len(messages) != 1 || messages[0] != want {
		t.Errorf("chat got %q, want %q", messages, want)
	}
}

// shop is an orders API without webhooks, whose list grows, and a chat
// service that keeps the messages posted to it.
type shop struct {
	*httptest.Server
	mu       sync.Mutex
	orders   []map[string]any
	failing  bool
	messages []string
}

func newShop(t *testing.T) *shop {
	s := &shop{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/orders":
			if s.failing {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"error":"maintenance"}`)
				return
			}
			json.NewEncoder(w).Encode(map[string]any{"orders": s.orders})
		case "/api/messages":
			var m struct{ Text string }
			b, _ := io.ReadAll(r.Body)
			json.Unmarshal(b, &m)
			s.messages = append(s.messages, m.Text)
			fmt.Fprint(w, `{"ok":true}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *shop) add(id string, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Newest first, as such APIs list them.
	s.orders = append([]map[string]any{{"id": id, "total": total, "currency": "EUR"}}, s.orders...)
}

func (s *shop) fail(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = on
}

func (s *shop) chat() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.messages...)
}

// pollFlow is a POLL flow as GET /api/v1/flows/{id} shows it.
type pollFlow struct {
	Status string
	Poll   *struct {
		Primed       bool
		LastPolledAt *time.Time
		LastError    *string
		LastRuns     int
		SeenKeys     int
	}
}

// TestPollExample: examples/poll-new-orders.json (every 10s here) against
// an orders API whose list grows: the first poll after enabling records
// the orders that exist and starts nothing; each later order starts one
// run with the order as trigger.body; a failing API shows on the flow; a
// flow disabled and enabled again records, again, before it starts runs.
func TestPollExample(t *testing.T) {
	orders := newShop(t)
	orders.add("ord_1", 10)
	orders.add("ord_2", 20)
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_CODE_SANDBOX=false")
	key := initialKey(t, dir)
	def := strings.Replace(example(t, "poll-new-orders", orders.URL), `"every": "1m"`, `"every": "10s"`, 1)
	id := createCodeFlow(t, p, key, def)

	get := func() pollFlow {
		var f pollFlow
		api(t, p, key, "GET", "/api/v1/flows/"+id, "", 200, &f)
		if f.Poll == nil {
			t.Fatalf("flow %s shows no poll status", id)
		}
		return f
	}
	runs := func() []flowRun {
		var page struct{ Data []flowRun }
		api(t, p, key, "GET", "/api/v1/flows/"+id+"/runs?limit=100", "", 200, &page)
		return page.Data
	}
	// pollAfter waits for a poll that ended after t and returns the flow.
	pollAfter := func(what string, after time.Time) pollFlow {
		var f pollFlow
		testwait.For(t, 30*time.Second, what, func() bool {
			f = get()
			return f.Poll.LastPolledAt != nil && f.Poll.LastPolledAt.After(after)
		})
		return f
	}

	f := pollAfter("the first poll, at enabling", time.Time{})
	if !f.Poll.Primed || f.Poll.SeenKeys != 2 || f.Poll.LastRuns != 0 || f.Poll.LastError != nil {
		t.Fatalf("after the first poll: %+v", *f.Poll)
	}
	if r := runs(); len(r) != 0 {
		t.Fatalf("the first poll started runs: %+v", r)
	}

	orders.add("ord_3", 30)
	var r []flowRun
	testwait.For(t, 30*time.Second, "a run for ord_3", func() bool { r = runs(); return len(r) > 0 })
	var run flowRun
	testwait.For(t, 30*time.Second, "the ord_3 run to finish", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+id+"/runs/"+r[0].ID, "", 200, &run)
		return run.Status != "RUNNING"
	})
	if run.Status != "SUCCEEDED" {
		t.Fatalf("ord_3 run %s %q", run.Status, run.Error)
	}
	var full struct {
		Trigger struct {
			Method string
			Body   map[string]any
		}
	}
	api(t, p, key, "GET", "/api/v1/flows/"+id+"/runs/"+run.ID, "", 200, &full)
	if full.Trigger.Method != "POLL" || full.Trigger.Body["id"] != "ord_3" {
		t.Errorf("run trigger %+v, want the order as trigger.body", full.Trigger)
	}
	// A later poll starts nothing more: ord_1..3 are all seen.
	f = pollAfter("a poll after the ord_3 run", *get().Poll.LastPolledAt)
	if got := runs(); len(got) != 1 || f.Poll.SeenKeys != 3 {
		t.Errorf("after another poll: %d runs, %d keys; want 1 run, 3 keys", len(got), f.Poll.SeenKeys)
	}
	if msgs := orders.chat(); len(msgs) != 1 || msgs[0] != "New order ord_3: 30 EUR" {
		t.Errorf("chat got %q", msgs)
	}

	// A failing API shows on the flow, and the next good poll clears it.
	orders.fail(true)
	testwait.For(t, 30*time.Second, "the poll error on the flow", func() bool {
		f = get()
		return f.Poll.LastError != nil
	})
	if !strings.Contains(*f.Poll.LastError, "answered 503") {
		t.Errorf("lastError %q", *f.Poll.LastError)
	}
	orders.fail(false)
	testwait.For(t, 30*time.Second, "the error cleared by a good poll", func() bool { return get().Poll.LastError == nil })

	// Disabled, then enabled again: orders that came meanwhile are recorded,
	// not run.
	api(t, p, key, "POST", "/api/v1/flows/"+id+"/disable", "", 200, nil)
	orders.add("ord_4", 40)
	before := time.Now().UTC().Add(-time.Second)
	api(t, p, key, "POST", "/api/v1/flows/"+id+"/enable", "", 200, nil)
	f = pollAfter("the first poll after enabling again", before)
	testwait.For(t, 30*time.Second, "that poll to record ord_4", func() bool { f = get(); return f.Poll.Primed && f.Poll.SeenKeys == 4 })
	orders.add("ord_5", 50)
	testwait.For(t, 30*time.Second, "a run for ord_5", func() bool { return len(runs()) == 2 })
	for _, r := range runs() {
		var full struct{ Trigger struct{ Body map[string]any } }
		api(t, p, key, "GET", "/api/v1/flows/"+id+"/runs/"+r.ID, "", 200, &full)
		if full.Trigger.Body["id"] == "ord_4" {
			t.Errorf("ord_4, which came while the flow was disabled, started a run")
		}
	}
}

// TestPollValidation: a POLL trigger's fields are checked when saved.
func TestPollValidation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn", "FLOWD_CODE_SANDBOX=false")
	key := initialKey(t, dir)
	tests := []struct{ name, poll, want string }{
		{"every too short", `{"every": "5s", "request": {"url": "https://a.example.com"}, "items": "response.body", "key": "item.id"}`, `trigger.poll.every "5s": use a duration from 10s to 24h`},
		{"every too long", `{"every": "25h", "request": {"url": "https://a.example.com"}, "items": "response.body", "key": "item.id"}`, `trigger.poll.every "25h"`},
		{"no request url", `{"every": "1m", "request": {}, "items": "response.body", "key": "item.id"}`, "trigger.poll.request.url is required"},
		{"no items", `{"every": "1m", "request": {"url": "https://a.example.com"}, "key": "item.id"}`, "trigger.poll.items is required"},
		{"no key", `{"every": "1m", "request": {"url": "https://a.example.com"}, "items": "response.body"}`, "trigger.poll.key is required"},
		{"bad key", `{"every": "1m", "request": {"url": "https://a.example.com"}, "items": "response.body", "key": "item.("}`, "trigger.poll.key: expression"},
		{"retry", `{"every": "1m", "request": {"url": "https://a.example.com", "retry": {"attempts": 2}}, "items": "response.body", "key": "item.id"}`, "neither continueOnFail nor retry"},
		{"unknown connection", `{"every": "1m", "request": {"url": "https://a.example.com", "connectionId": "con_nope"}, "items": "response.body", "key": "item.id"}`, `trigger.poll.request.connectionId "con_nope": no such connection`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"name": "p", "engine": "FLOW_BUILDER", "trigger": {"type": "POLL", "poll": %s}}`, tt.poll)
			var e struct {
				Error struct{ Code, Message string }
			}
			api(t, p, key, "POST", "/api/v1/flows", body, 400, &e)
			if !strings.Contains(e.Error.Message, tt.want) {
				t.Errorf("message %q, want %q", e.Error.Message, tt.want)
			}
		})
	}
}

// TestSignatureAndFormExamples: the interface document's signature check
// in a code node (examples/code-signature-check.json), GitHub's default
// form-encoded push delivery on both receivers
// (examples/github-push-form*.json) and a Slack slash command
// (examples/slack-slash-command.json), sent as those services send them to
// a started flowd.
func TestSignatureAndFormExamples(t *testing.T) {
	svc := newStandIn(t)
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	withSecret := func(name, placeholder, secret string) string {
		def := example(t, name, svc.URL)
		if !strings.Contains(def, placeholder) {
			t.Fatalf("%s has no %q", name, placeholder)
		}
		return strings.ReplaceAll(def, placeholder, secret)
	}

	t.Run("signature check in a code step", func(t *testing.T) {
		const secret = "s3cret"
		createCodeFlow(t, p, key, withSecret("code-signature-check", "replace-with-your-signing-secret", secret))
		body := "{\n  \"ref\": \"refs/heads/main\",\n  \"after\": \"abc\"\n}\n"
		var ok map[string]string
		doJSON(t, "POST", p.base+"/webhook/deploys/signed", "", "application/json", body,
			map[string]string{"X-Hub-Signature-256": "sha256=" + hmacHex(secret, body)}, 200, &ok)
		if ok["status"] != "ok" || ok["ref"] != "refs/heads/main" {
			t.Errorf("signed delivery answered %v", ok)
		}
		got, _ := doJSON(t, "POST", p.base+"/webhook/deploys/signed", "", "application/json", body,
			map[string]string{"X-Hub-Signature-256": "sha256=" + hmacHex("not-the-secret", body)}, 500, nil)
		if !strings.Contains(string(got), "Invalid webhook signature") {
			t.Errorf("a mismatch answered %s, want the error Invalid webhook signature", got)
		}
	})

	const ghSecret = "gh-secret"
	form := "payload=" + url.QueryEscape(`{"ref":"refs/heads/main","commits":[{},{}],"repository":{"full_name":"acme/api"}}`)
	ghHeaders := func(secret, delivery string) map[string]string {
		return map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": "sha256=" + hmacHex(secret, form)}
	}
	t.Run("GitHub form push, flow builder", func(t *testing.T) {
		id := createCodeFlow(t, p, key, withSecret("github-push-form", "replace_with_your_github_webhook_secret", ghSecret))
		var acc struct{ RunID string }
		doJSON(t, "POST", p.base+"/api/v1/webhooks/"+id, "", "application/x-www-form-urlencoded", form, ghHeaders(ghSecret, "d-1"), 200, &acc)
		var run flowRun
		testwait.For(t, 30*time.Second, "the push run to finish", func() bool {
			api(t, p, key, "GET", "/api/v1/flows/"+id+"/runs/"+acc.RunID, "", 200, &run)
			return run.Status != "RUNNING"
		})
		if run.Status != "SUCCEEDED" {
			t.Fatalf("run %s %q", run.Status, run.Error)
		}
		msgs := svc.take("/api/messages")
		if len(msgs) != 1 || msgs[0].Body["text"] != "2 commit(s) pushed to acme/api (refs/heads/main)" {
			t.Errorf("chat got %+v", msgs)
		}
		doJSON(t, "POST", p.base+"/api/v1/webhooks/"+id, "", "application/x-www-form-urlencoded", form, ghHeaders("wrong", "d-2"), 401, nil)
	})
	t.Run("GitHub form push, workflow builder", func(t *testing.T) {
		createCodeFlow(t, p, key, withSecret("github-push-form-workflow", "replace_with_your_github_webhook_secret", ghSecret))
		var got map[string]string
		doJSON(t, "POST", p.base+"/webhook/github/push", "", "application/x-www-form-urlencoded", form, ghHeaders(ghSecret, "d-3"), 200, &got)
		if got["event"] != "push" || got["ref"] != "refs/heads/main" || got["repository"] != "acme/api" {
			t.Errorf("answer %v", got)
		}
		doJSON(t, "POST", p.base+"/webhook/github/push", "", "application/x-www-form-urlencoded", form, ghHeaders("wrong", "d-4"), 401, nil)
	})

	t.Run("Slack slash command", func(t *testing.T) {
		const secret = "slack-secret"
		createCodeFlow(t, p, key, withSecret("slack-slash-command", "replace-with-your-slack-signing-secret", secret))
		body := "token=gIkuvaNzQIHg97ATvDxqgjtO&team_id=T0001&team_domain=example&channel_id=C2147483705&channel_name=deploys" +
			"&user_id=U2147483697&user_name=ada&command=%2Fdeploy&text=api+prod" +
			"&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2F1234%2F5678&trigger_id=13345224609.738474920.8088930838d88f008e0"
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		sig := map[string]string{"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + hmacHex(secret, "v0:"+ts+":"+body)}
		var got map[string]string
		doJSON(t, "POST", p.base+"/webhook/slack/deploy", "", "application/x-www-form-urlencoded", body, sig, 200, &got)
		if got["response_type"] != "in_channel" || got["text"] != "ada started a deploy of api (/deploy api prod)" {
			t.Errorf("answer %v", got)
		}
		deploys := svc.take("/api/deploys")
		if len(deploys) != 1 || deploys[0].Body["service"] != "api" || deploys[0].Body["requestedBy"] != "ada" {
			t.Errorf("deploys %+v", deploys)
		}
		sig["X-Slack-Signature"] = "v0=" + hmacHex("wrong", "v0:"+ts+":"+body)
		doJSON(t, "POST", p.base+"/webhook/slack/deploy", "", "application/x-www-form-urlencoded", body, sig, 401, nil)
	})
}
