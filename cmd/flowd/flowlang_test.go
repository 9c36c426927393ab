package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
)

// The flow language through a started flowd: the examples/ flows against
// a local stand-in for the chat, billing, CRM and status services, and
// WAIT across a restart.

// standIn is the chat, billing, CRM and status services in one local
// server: it keeps every request and answers as those would.
type standIn struct {
	*httptest.Server
	mu   sync.Mutex
	got  []call
	tag  string // the status service's latest release
	fail string // a line SKU the CRM refuses
}

type call struct {
	Method, Path string
	Body         map[string]any
}

func newStandIn(t *testing.T) *standIn {
	s := &standIn{tag: "v1"}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(raw, &body)
		s.mu.Lock()
		s.got = append(s.got, call{r.Method, r.URL.Path, body})
		tag, fail := s.tag, s.fail
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/releases/latest":
			fmt.Fprintf(w, `{"tag":%q}`, tag)
		case r.URL.Path == "/v2/orders":
			w.WriteHeader(http.StatusCreated)
			fmt.Fprint(w, `{"id":"ord_1"}`)
		case strings.HasSuffix(r.URL.Path, "/lines") && fail != "" && body["sku"] == fail:
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprint(w, `{"error":"unknown sku"}`)
		default:
			fmt.Fprint(w, `{"ok":true}`)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// calls returns the requests to path (a prefix when it ends with "*") and
// forgets every request seen so far.
func (s *standIn) take(path string) []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []call
	for _, c := range s.got {
		if c.Path == path || strings.HasSuffix(path, "*") && strings.HasPrefix(c.Path, strings.TrimSuffix(path, "*")) {
			out = append(out, c)
		}
	}
	s.got = nil
	return out
}

// example reads examples/<name>.json with its services pointed at the
// stand-in.
func example(t *testing.T, name, base string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	def := string(raw)
	for _, host := range []string{"https://chat.example.com", "https://billing.example.com", "https://crm.example.com", "https://status.example.com", "https://shop.example.com"} {
		def = strings.ReplaceAll(def, host, base)
	}
	return def
}

// flowRun is a run as GET …/runs/{runId} shows it.
type flowRun struct {
	ID, Status, Error string
	NextAttemptAt     *time.Time
	Steps             []stepRun
	OnErrorSteps      []stepRun
}

type stepRun struct {
	Name, Type, Status, Error string
	Output                    json.RawMessage
	Steps                     []stepRun
	Iterations                []struct {
		Index  int
		Status string
		Steps  []stepRun
	}
}

// post sends a webhook and returns the run it started, finished.
func postHook(t *testing.T, p *proc, key, flowID, path string, body string, header http.Header) (int, flowRun) {
	t.Helper()
	req, _ := http.NewRequest("POST", p.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		return resp.StatusCode, flowRun{}
	}
	var acc struct{ RunID string }
	json.Unmarshal(raw, &acc)
	if acc.RunID == "" {
		acc.RunID = resp.Header.Get("X-Run-Id")
	}
	if acc.RunID == "" {
		var page struct{ Data []struct{ ID string } }
		api(t, p, key, "GET", "/api/v1/flows/"+flowID+"/runs?limit=1", "", 200, &page)
		if len(page.Data) == 0 {
			t.Fatalf("webhook %s = %d %s, and no run", path, resp.StatusCode, raw)
		}
		acc.RunID = page.Data[0].ID
	}
	return resp.StatusCode, finishedRun(t, p, key, flowID, acc.RunID)
}

func finishedRun(t *testing.T, p *proc, key, flowID, runID string) flowRun {
	t.Helper()
	var r flowRun
	testwait.For(t, 30*time.Second, "run "+runID+" to finish", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, "", 200, &r)
		return r.Status != "RUNNING"
	})
	return r
}

func TestFlowLanguageExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	svc := newStandIn(t)
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_CODE_SANDBOX=false")
	key := initialKey(t, dir)

	t.Run("GitHub push to chat", func(t *testing.T) {
		const secret = "gh-secret"
		def := strings.Replace(example(t, "github-push-to-chat", svc.URL), "replace_with_your_github_webhook_secret", secret, 1)
		id := createCodeFlow(t, p, key, def)
		push := func(ref string) (int, flowRun) {
			body := fmt.Sprintf(`{"ref":%q,"pusher":{"name":"ada"},"commits":[{},{}],"repository":{"full_name":"acme/api"},"head_commit":{"message":"fix"}}`, ref)
			return postHook(t, p, key, id, "/api/v1/webhooks/"+id, body, http.Header{
				"X-Github-Event": {"push"}, "X-Hub-Signature-256": {"sha256=" + hmacHex(secret, body)}})
		}
		if _, r := push("refs/heads/main"); r.Status != "SUCCEEDED" {
			t.Fatalf("push to main: %+v", r)
		}
		msgs := svc.take("/api/messages")
		if len(msgs) != 1 || msgs[0].Body["text"] != "ada pushed 2 commit(s) to acme/api: fix" {
			t.Fatalf("chat got %+v", msgs)
		}
		_, r := push("refs/heads/feature")
		if r.Status != "SUCCEEDED" || r.Steps[1].Status != "SKIPPED" || len(svc.take("/api/messages")) != 0 {
			t.Errorf("push to a branch: %+v", r)
		}
		code, _ := postHook(t, p, key, id, "/api/v1/webhooks/"+id, `{}`, http.Header{"X-Hub-Signature-256": {"sha256=00"}})
		if code != http.StatusUnauthorized {
			t.Errorf("bad signature answered %d", code)
		}
	})

	t.Run("Stripe router", func(t *testing.T) {
		const secret = "whsec_test"
		def := strings.Replace(example(t, "stripe-router", svc.URL), "whsec_replace_with_your_endpoint_secret", secret, 1)
		id := createCodeFlow(t, p, key, def)
		event := func(evt, typ string) flowRun {
			body := fmt.Sprintf(`{"id":%q,"type":%q,"data":{"object":{"id":"in_1","customer":"cus_9","amount_paid":500,"status":"active"}}}`, evt, typ)
			ts := fmt.Sprint(time.Now().Unix())
			_, r := postHook(t, p, key, id, "/api/v1/webhooks/"+id, body, http.Header{
				"Stripe-Signature": {"t=" + ts + ",v1=" + hmacHex(secret, ts+"."+body)}})
			if r.Status != "SUCCEEDED" {
				t.Fatalf("%s: %+v", typ, r)
			}
			return r
		}
		r := event("evt_1", "invoice.paid")
		got := svc.take("*")
		if len(got) != 1 || got[0].Path != "/v1/payments" || got[0].Body["invoice"] != "in_1" || string(r.Steps[0].Output) != `{"case":0}` ||
			len(r.Steps[0].Steps) != 1 || r.Steps[0].Steps[0].Name != "billing" {
			t.Errorf("invoice.paid: calls %+v, run %+v", got, r.Steps)
		}
		r = event("evt_2", "customer.subscription.updated")
		got = svc.take("*")
		if len(got) != 1 || got[0].Method != "PUT" || got[0].Path != "/v2/customers/cus_9/subscription" || string(r.Steps[0].Output) != `{"case":1}` {
			t.Errorf("subscription: calls %+v, run %+v", got, r.Steps)
		}
		r = event("evt_3", "charge.refunded")
		if got = svc.take("*"); len(got) != 0 || string(r.Steps[0].Output) != `{"case":"default"}` || r.Steps[0].Steps[0].Name != "ignored" {
			t.Errorf("other event: calls %+v, run %+v", got, r.Steps)
		}
	})

	t.Run("form to CRM per line item, alert on failure", func(t *testing.T) {
		id := createCodeFlow(t, p, key, example(t, "form-to-crm-line-items", svc.URL))
		form := `{"email":"bo@example.com","items":[{"sku":"A","qty":1},{"sku":"B","qty":2},{"sku":"C","qty":3}]}`
		resp, err := http.Post(p.base+"/webhook/orders/form", "application/json", strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated || !strings.Contains(string(answer), `"lines":3`) || !strings.Contains(string(answer), `"order":"ord_1"`) {
			t.Fatalf("form answered %d %s", resp.StatusCode, answer)
		}
		lines := svc.take("/v2/orders/ord_1/lines")
		if len(lines) != 3 {
			t.Fatalf("CRM got %d lines", len(lines))
		}
		seen := map[string]bool{}
		for _, l := range lines {
			seen[fmt.Sprintf("%v %v %v", l.Body["position"], l.Body["sku"], l.Body["quantity"])] = true
		}
		if !seen["1 A 1"] || !seen["2 B 2"] || !seen["3 C 3"] {
			t.Errorf("line items %+v", lines)
		}
		var page struct{ Data []struct{ ID string } }
		api(t, p, key, "GET", "/api/v1/flows/"+id+"/runs?limit=1", "", 200, &page)
		r := finishedRun(t, p, key, id, page.Data[0].ID)
		if its := r.Steps[1].Iterations; len(its) != 3 || its[2].Index != 2 || its[2].Status != "SUCCEEDED" || its[2].Steps[0].Name != "line" {
			t.Errorf("iterations %+v", its)
		}

		// A line the CRM refuses fails the run, and the alert goes out once.
		svc.mu.Lock()
		svc.fail = "B"
		svc.mu.Unlock()
		resp, err = http.Post(p.base+"/webhook/orders/form", "application/json", strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		api(t, p, key, "GET", "/api/v1/flows/"+id+"/runs?limit=1", "", 200, &page)
		r = finishedRun(t, p, key, id, page.Data[0].ID)
		if r.Status != "FAILED" || !strings.Contains(r.Error, "step lines: item 1: step line: ") {
			t.Fatalf("failing line: %s %q", r.Status, r.Error)
		}
		if len(r.OnErrorSteps) != 1 || r.OnErrorSteps[0].Status != "SUCCEEDED" {
			t.Fatalf("onErrorSteps %+v", r.OnErrorSteps)
		}
		// flowctl runs get shows the items, the failed one, and onError.
		out := newCtl(t, "FLOWCTL_URL="+p.base).ok("", "--data-dir", dir, "runs", "get", id, r.ID)
		for _, want := range []string{"lines ", "  [0]", "  [1]", "    line", "item 1: step line: ", "onError:", "alert"} {
			if !strings.Contains(out, want) {
				t.Errorf("flowctl runs get lacks %q:\n%s", want, out)
			}
		}
		alerts := svc.take("/api/messages")
		if len(alerts) != 1 || !strings.HasPrefix(fmt.Sprint(alerts[0].Body["text"]), "Order from bo@example.com failed at lines: item 1: step line: ") {
			t.Errorf("alerts %+v", alerts)
		}
		svc.mu.Lock()
		svc.fail = ""
		svc.mu.Unlock()
	})

	t.Run("scheduled poll acts on changes", func(t *testing.T) {
		def := example(t, "scheduled-poll-on-changes", svc.URL)
		var f struct{ ID string }
		api(t, p, key, "POST", "/api/v1/flows", def, 201, &f) // the example as it is saves
		// Its steps, fired by a webhook instead of every five minutes.
		var doc map[string]any
		json.Unmarshal([]byte(def), &doc)
		doc["name"] = "release watch (webhook)"
		doc["trigger"] = map[string]any{"type": "WEBHOOK"}
		raw, _ := json.Marshal(doc)
		id := createCodeFlow(t, p, key, string(raw))
		svc.take("*")
		var announced []string
		for _, tag := range []string{"v1", "v1", "v2", "v2"} {
			svc.mu.Lock()
			svc.tag = tag
			svc.mu.Unlock()
			if _, r := postHook(t, p, key, id, "/api/v1/webhooks/"+id, `{}`, nil); r.Status != "SUCCEEDED" {
				t.Fatalf("poll: %+v", r)
			}
			for _, m := range svc.take("/api/messages") {
				announced = append(announced, fmt.Sprint(m.Body["text"]))
			}
		}
		if strings.Join(announced, "|") != "New release v1 (was none)|New release v2 (was v1)" {
			t.Errorf("announced %q", announced)
		}
		// Deleting the flow deletes its state: a new flow starts empty.
		api(t, p, key, "DELETE", "/api/v1/flows/"+id, "", 204, nil)
	})
}

// A WAIT keeps the run RUNNING with nextAttemptAt; flowd stopped and
// started again resumes it at the step after the WAIT.
func TestWaitResumesAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd twice")
	}
	t.Parallel() // its own flowd, directory and ports
	svc := newStandIn(t)
	dir := filepath.Join(t.TempDir(), "data")
	env := []string{"FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_CODE_SANDBOX=false"}
	p := startFlowd(t, dir, env...)
	key := initialKey(t, dir)
	id := createCodeFlow(t, p, key, fmt.Sprintf(`{"name": "later", "engine": "FLOW_BUILDER", "steps": [
		{"name": "first", "type": "HTTP", "method": "POST", "url": "%s/first", "body": {}},
		{"name": "pause", "type": "WAIT", "duration": "3s"},
		{"name": "second", "type": "HTTP", "method": "POST", "url": "%s/second", "body": {"after": "{{ steps.pause.until }}"}}]}`, svc.URL, svc.URL))
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+id, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var acc struct{ RunID string }
	json.NewDecoder(resp.Body).Decode(&acc)
	resp.Body.Close()
	var r flowRun
	testwait.For(t, testwait.Hang, "the run to wait at its WAIT step", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+id+"/runs/"+acc.RunID, "", 200, &r)
		if r.Status != "RUNNING" {
			t.Fatalf("run never waited: %+v", r)
		}
		return r.NextAttemptAt != nil && len(r.Steps) == 3 && r.Steps[1].Status == "SUCCEEDED"
	})
	if r.Status != "RUNNING" || r.Steps[2].Status != "PENDING" {
		t.Fatalf("waiting run %+v", r)
	}
	p.stop(t)
	p2 := startFlowd(t, dir, env...)
	defer p2.stop(t)
	r = finishedRun(t, p2, key, id, acc.RunID)
	if r.Status != "SUCCEEDED" || r.NextAttemptAt != nil {
		t.Fatalf("after the restart: %+v", r)
	}
	n := map[string]int{}
	for _, c := range svc.take("*") {
		n[c.Path]++
	}
	if n["/first"] != 1 || n["/second"] != 1 {
		t.Errorf("calls %v; want /first and /second once each", n)
	}
}

// CODE inside FOR_EACH runs in the sandbox with item and index in scope;
// its console lines are kept per item and shown by flowctl runs get.
func TestCodeInLoopThroughFlowd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	id := createCodeFlow(t, p, key, `{"name": "code loop", "engine": "FLOW_BUILDER", "steps": [
		{"name": "each", "type": "FOR_EACH", "items": "trigger.body.xs", "steps": [
			{"name": "js", "type": "CODE", "code": "console.log('doubling ' + item + ' at ' + index); return {v: item * 2, i: index}"}]}]}`)
	_, full := postHook(t, p, key, id, "/api/v1/webhooks/"+id, `{"xs": [3, 4]}`, nil)
	if full.Status != "SUCCEEDED" {
		t.Fatalf("run %+v", full)
	}
	r := full
	if string(full.Steps[0].Output) != `{"items":[{"js":{"i":0,"v":6}},{"js":{"i":1,"v":8}}]}` {
		t.Errorf("output %s", full.Steps[0].Output)
	}
	out := newCtl(t, "FLOWCTL_URL="+p.base).ok("", "--data-dir", dir, "runs", "get", id, r.ID)
	for _, want := range []string{"logs of js (item 0):", "doubling 3 at 0", "logs of js (item 1):", "doubling 4 at 1"} {
		if !strings.Contains(out, want) {
			t.Errorf("flowctl runs get lacks %q:\n%s", want, out)
		}
	}
}
