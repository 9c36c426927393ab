package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
)

// linkCatcher is the "Slack" notify steps post to: it keeps each body.
type linkCatcher struct {
	mu     sync.Mutex
	bodies []map[string]string
	got    chan map[string]string
	hold   chan struct{} // when set, each request waits for a token from it
}

func newLinkCatcher(t *testing.T) (*linkCatcher, *httptest.Server) {
	c := &linkCatcher{got: make(chan map[string]string, 1000)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]string
		_ = json.NewDecoder(r.Body).Decode(&m)
		c.mu.Lock()
		c.bodies = append(c.bodies, m)
		hold := c.hold
		c.mu.Unlock()
		c.got <- m
		if hold != nil {
			<-hold // one token per held request
		}
		w.WriteHeader(200)
	}))
	t.Cleanup(srv.Close)
	return c, srv
}

func (c *linkCatcher) next(t *testing.T) map[string]string {
	t.Helper()
	select {
	case m := <-c.got:
		return m
	case <-time.After(60 * time.Second):
		t.Fatal("no notify request came")
	}
	return nil
}

// do sends a request and returns its status and body.
func do(t testing.TB, method, u, contentType, body string, hdr ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

type approvalOut struct {
	Decision  string
	Values    map[string]any
	Decisions []struct{ By, Via, Decision string }
}

func stepOutput(t *testing.T, r callRun, name string, into any) {
	t.Helper()
	for _, s := range r.Steps {
		if s.Name == name {
			if err := json.Unmarshal(s.Output, into); err != nil {
				t.Fatalf("step %s output %s: %v", name, s.Output, err)
			}
			return
		}
	}
	t.Fatalf("run has no step %s: %+v", name, r)
}

// TestApprovalOnFlowd: an APPROVAL step posts its link from a notify step,
// the public page renders the form without script, a bad value is a 400
// naming the field, the first answer through the link wins and resumes the
// run, a second is 409 ALREADY_DECIDED with the decision, an unknown token
// is a 404 page; a decision through the API rejects; a WAIT for a callback
// resumes with the first POST's body.
func TestApprovalOnFlowd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	slack, srv := newLinkCatcher(t)

	flowID := createEnabled(t, p, key, fmt.Sprintf(`{"name": "refunds", "engine": "FLOW_BUILDER", "steps": [
		{"name": "approve_refund", "type": "APPROVAL", "title": "Refund {{ trigger.body.amount }}?", "timeout": "72h",
		 "form": {"type": "object", "required": ["amount"], "properties": {
			"amount": {"type": "number", "title": "Amount", "maximum": 500}, "note": {"type": "string"}}},
		 "notify": [{"name": "slack", "type": "HTTP", "method": "POST", "url": %q,
			"body": {"url": "{{ approval.url }}", "approve": "{{ approval.approveUrl }}", "expires": "{{ approval.expiresAt }}"}}]},
		{"name": "after", "type": "SET", "values": {"decision": "{{ steps.approve_refund.decision }}"}}]}`, srv.URL))

	t.Run("link", func(t *testing.T) {
		runID := trigger(t, p, flowID, `{"amount": 120}`)
		msg := slack.next(t)
		link := msg["url"]
		if !strings.HasPrefix(link, p.base+"/approvals/") || msg["approve"] != link+"?decision=approve" || msg["expires"] == "" {
			t.Fatalf("notify got %v", msg)
		}
		code, page, h := do(t, "GET", link, "", "")
		if code != 200 || !strings.Contains(page, "Refund 120?") || !strings.Contains(page, `name="amount"`) ||
			strings.Contains(page, "<script") || !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Fatalf("page = %d %s %v", code, page, h)
		}
		// A form post with a bad value: the page again, naming the field.
		code, page, _ = do(t, "POST", link, "application/x-www-form-urlencoded", url.Values{"decision": {"approve"}, "amount": {"900"}}.Encode())
		if code != 400 || !strings.Contains(page, "amount") {
			t.Fatalf("bad form = %d %s", code, page)
		}
		code, body, _ := do(t, "POST", link, "application/json", `{"decision": "approve", "values": {"amount": "x"}}`)
		if code != 400 || !strings.Contains(body, "values.amount") {
			t.Fatalf("bad JSON answer = %d %s", code, body)
		}
		code, page, _ = do(t, "POST", link, "application/x-www-form-urlencoded", url.Values{"decision": {"approve"}, "amount": {"120"}, "note": {"ok"}}.Encode())
		if code != 200 {
			t.Fatalf("approve = %d %s", code, page)
		}
		code, body, _ = do(t, "POST", link, "application/json", `{"decision": "reject"}`)
		if code != 409 || !strings.Contains(body, `"ALREADY_DECIDED"`) || !strings.Contains(body, `"decision":"approved"`) {
			t.Fatalf("second answer = %d %s", code, body)
		}
		r := finalRun(t, p, key, flowID, runID)
		var out approvalOut
		stepOutput(t, r, "approve_refund", &out)
		if r.Status != "SUCCEEDED" || out.Decision != "approved" || out.Values["amount"] != 120.0 || len(out.Decisions) != 1 || out.Decisions[0].Via != "link" {
			t.Fatalf("run = %+v, output %+v", r, out)
		}
		code, page, _ = do(t, "GET", link, "", "")
		if code != 200 || !strings.Contains(page, "approved") {
			t.Errorf("decided page = %d %s", code, page)
		}
		code, page, _ = do(t, "GET", p.base+"/approvals/"+strings.Repeat("A", 43), "", "")
		if code != 404 || strings.Contains(page, "refunds") {
			t.Errorf("unknown token = %d %s", code, page)
		}
		var list struct {
			Data []struct{ RunID, Step, Decision string }
		}
		api(t, p, key, "GET", "/api/v1/approvals?status=DECIDED", "", 200, &list)
		if len(list.Data) == 0 || list.Data[0].RunID != runID || list.Data[0].Decision != "approved" {
			t.Errorf("decided approvals = %+v", list)
		}
	})

	t.Run("api", func(t *testing.T) {
		runID := trigger(t, p, flowID, `{"amount": 5}`)
		slack.next(t)
		var pending struct {
			Data []struct{ RunID, Title string }
		}
		api(t, p, key, "GET", "/api/v1/approvals", "", 200, &pending)
		if len(pending.Data) != 1 || pending.Data[0].RunID != runID || pending.Data[0].Title != "Refund 5?" {
			t.Fatalf("pending = %+v", pending)
		}
		api(t, p, key, "POST", "/api/v1/runs/"+runID+"/approvals/approve_refund", `{"decision": "reject"}`, 200, nil)
		api(t, p, key, "POST", "/api/v1/runs/"+runID+"/approvals/approve_refund", `{"decision": "approve", "values": {"amount": 5}}`, 409, nil)
		api(t, p, key, "POST", "/api/v1/runs/"+runID+"/approvals/nosuch", `{"decision": "approve"}`, 404, nil)
		r := finalRun(t, p, key, flowID, runID)
		var out approvalOut
		stepOutput(t, r, "approve_refund", &out)
		if r.Status != "SUCCEEDED" || out.Decision != "rejected" || out.Decisions[0].Via != "api" {
			t.Fatalf("run = %+v, output %+v", r, out)
		}
	})

	t.Run("flowctl", func(t *testing.T) {
		c := newCtl(t, "FLOWCTL_URL="+p.base, "FLOWCTL_API_KEY="+key)
		runID := trigger(t, p, flowID, `{"amount": 7}`)
		slack.next(t)
		testwait.For(t, 60*time.Second, "the approval to be listed", func() bool {
			return strings.Contains(c.ok("", "approvals", "list"), runID)
		})
		out := c.ok("", "approvals", "list", "--status", "PENDING")
		if !strings.Contains(out, "approve_refund") || !strings.Contains(out, "Refund 7?") || !strings.Contains(out, "0/1") {
			t.Fatalf("approvals list:\n%s", out)
		}
		if r := c.run("", "approvals", "decide", runID, "approve_refund", "--approve", "--reject"); r.code == 0 {
			t.Fatalf("--approve --reject accepted: %+v", r)
		}
		if r := c.run("", "approvals", "decide", runID, "approve_refund", "--approve", "--values", `{"amount": 900}`); r.code == 0 ||
			!strings.Contains(r.stderr, "values.amount") {
			t.Fatalf("a bad value: %+v, want the field named", r)
		}
		out = c.ok("", "approvals", "decide", runID, "approve_refund", "--approve", "--values", `{"amount": 7}`)
		if !strings.Contains(out, "approved") {
			t.Fatalf("decide:\n%s", out)
		}
		if r := c.run("", "approvals", "decide", runID, "approve_refund", "--reject"); r.code == 0 || !strings.Contains(r.stderr, "ALREADY_DECIDED") {
			t.Fatalf("a second answer: %+v, want ALREADY_DECIDED", r)
		}
		r := finalRun(t, p, key, flowID, runID)
		var got approvalOut
		stepOutput(t, r, "approve_refund", &got)
		if r.Status != "SUCCEEDED" || got.Decision != "approved" || got.Values["amount"] != 7.0 {
			t.Fatalf("run = %+v, output %+v", r, got)
		}
		if out := c.ok("", "-o", "json", "approvals", "list", "--status", "decided"); !strings.Contains(out, runID) {
			t.Fatalf("decided list:\n%s", out)
		}
	})

	t.Run("callback", func(t *testing.T) {
		cbFlow := createEnabled(t, p, key, fmt.Sprintf(`{"name": "cb", "engine": "FLOW_BUILDER", "steps": [
			{"name": "job", "type": "WAIT", "for": "callback", "timeout": "1h",
			 "notify": [{"name": "start", "type": "HTTP", "method": "POST", "url": %q, "body": {"url": "{{ wait.callbackUrl }}"}}]},
			{"name": "after", "type": "SET", "values": {"status": "{{ steps.job.body.status }}"}}]}`, srv.URL))
		runID := trigger(t, p, cbFlow, `{}`)
		cb := slack.next(t)["url"]
		if !strings.HasPrefix(cb, p.base+"/api/v1/callbacks/") {
			t.Fatalf("callback URL %q", cb)
		}
		if code, body, _ := do(t, "POST", cb, "application/json", `{"status": "done"}`, "Authorization", "Bearer secret"); code != 200 {
			t.Fatalf("callback = %d %s", code, body)
		}
		if code, body, _ := do(t, "POST", cb, "text/plain", `again`); code != 409 || !strings.Contains(body, "ALREADY_DECIDED") {
			t.Fatalf("second callback = %d %s", code, body)
		}
		r := finalRun(t, p, key, cbFlow, runID)
		var out struct {
			Body    map[string]any
			Headers map[string]string
		}
		stepOutput(t, r, "job", &out)
		if r.Status != "SUCCEEDED" || out.Body["status"] != "done" || out.Headers["authorization"] != "" {
			t.Fatalf("run = %+v, job %+v", r, out)
		}
		if code, _, _ := do(t, "POST", p.base+"/api/v1/callbacks/"+strings.Repeat("B", 43), "", "{}"); code != 404 {
			t.Errorf("unknown callback = %d", code)
		}
	})
}

// TestApprovalRaceOnFlowd: parked runs, each sent concurrent answers
// (approve and reject alternately, through the API), plus answers sent
// while the notify step still runs. No run is lost or decided twice:
// exactly one answer per run wins, every other is 409 ALREADY_DECIDED
// carrying the winner's decision, and the run's output is the winner's.
func TestApprovalRaceOnFlowd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	const runs, answers, early = 200, 10, 20
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_RATE_LIMIT=0")
	key := initialKey(t, dir)
	flowID := createEnabled(t, p, key, `{"name": "race", "engine": "FLOW_BUILDER", "steps": [
		{"name": "ok", "type": "APPROVAL", "title": "go?"},
		{"name": "after", "type": "SET", "values": {"d": "{{ steps.ok.decision }}"}}]}`)
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = trigger(t, p, flowID, `{}`)
	}
	for _, id := range ids {
		testwait.For(t, 120*time.Second, "run "+id+" to park", func() bool {
			var r struct{ WaitingFor string }
			api(t, p, key, "GET", "/api/v1/flows/"+flowID+"/runs/"+id, "", 200, &r)
			return r.WaitingFor == "APPROVAL"
		})
	}
	type result struct {
		code     int
		decision string
	}
	results := make([][]result, runs)
	var wg sync.WaitGroup
	for i, id := range ids {
		results[i] = make([]result, answers)
		for j := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := []string{"approve", "reject"}[j%2]
				code, body, _ := do(t, "POST", p.base+"/api/v1/runs/"+id+"/approvals/ok", "application/json",
					`{"decision": "`+d+`"}`, "Authorization", "Bearer "+key)
				var got struct {
					Decision any
				}
				_ = json.Unmarshal([]byte(body), &got)
				res := result{code: code}
				switch v := got.Decision.(type) {
				case string:
					res.decision = v
				case map[string]any:
					res.decision, _ = v["decision"].(string)
				}
				results[i][j] = res
			}()
		}
		if i%20 == 19 {
			wg.Wait() // bounded concurrency on a loaded machine
		}
	}
	wg.Wait()
	for i, id := range ids {
		r := finalRun(t, p, key, flowID, id)
		var out approvalOut
		stepOutput(t, r, "ok", &out)
		wins := 0
		for _, res := range results[i] {
			switch {
			case res.code == 200:
				wins++
				if res.decision != out.Decision {
					t.Errorf("run %s: winner answered %q, run decided %q", id, res.decision, out.Decision)
				}
			case res.code == 409:
				if res.decision != out.Decision {
					t.Errorf("run %s: a loser was told %q, run decided %q", id, res.decision, out.Decision)
				}
			default:
				t.Errorf("run %s: an answer got %d", id, res.code)
			}
		}
		if wins != 1 || r.Status != "SUCCEEDED" || len(out.Decisions) != 1 {
			t.Errorf("run %s: %d winners, status %s, %d decisions recorded", id, wins, r.Status, len(out.Decisions))
		}
	}

	// Answers while notify still runs: the notify request is held until the
	// answer is in; the run parks after, and must still resume with it.
	slack, srv := newLinkCatcher(t)
	slack.hold = make(chan struct{})
	holdFlow := createEnabled(t, p, key, fmt.Sprintf(`{"name": "early", "engine": "FLOW_BUILDER", "steps": [
		{"name": "ok", "type": "APPROVAL", "title": "go?",
		 "notify": [{"name": "slack", "type": "HTTP", "method": "POST", "url": %q, "body": {"url": "{{ approval.url }}"}}]},
		{"name": "after", "type": "SET", "values": {"d": "{{ steps.ok.decision }}"}}]}`, srv.URL))
	earlyRuns := make([]string, early)
	for i := range earlyRuns {
		// One at a time: its notify request is held while it is answered,
		// then let go, and the run parks after its answer came.
		earlyRuns[i] = trigger(t, p, holdFlow, `{}`)
		link := slack.next(t)["url"]
		code, body, _ := do(t, "POST", link, "application/json", `{"decision": "approve"}`)
		if code != 200 {
			t.Fatalf("early answer = %d %s", code, body)
		}
		slack.hold <- struct{}{}
	}
	for _, id := range earlyRuns {
		r := finalRun(t, p, key, holdFlow, id)
		var out approvalOut
		stepOutput(t, r, "ok", &out)
		if r.Status != "SUCCEEDED" || out.Decision != "approved" {
			t.Errorf("early run %s = %s, %+v", id, r.Status, out)
		}
	}
}
