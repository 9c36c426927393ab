package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/internal/testwait"
)

// callRun is a run as the API shows it, with what CALL_FLOW tests read.
type callRun struct {
	ID, FlowID, Status, Error string
	Trigger                   struct {
		Method  string
		Headers map[string]string
		Body    json.RawMessage
		Caller  map[string]any
	}
	Steps []struct {
		Name, Type, Status, Error string
		Output                    json.RawMessage
		Attempts                  int
	}
}

// createEnabled saves a flow definition and enables it.
func createEnabled(t *testing.T, p *proc, key, def string) string {
	t.Helper()
	var f struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", def, 201, &f)
	api(t, p, key, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
	return f.ID
}

// trigger posts body to a flow builder webhook and returns the run's ID.
func trigger(t *testing.T, p *proc, flowID, body string) string {
	t.Helper()
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+flowID, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct{ RunID string }
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != http.StatusOK || got.RunID == "" {
		t.Fatalf("webhook of %s = %d %v %+v", flowID, resp.StatusCode, err, got)
	}
	return got.RunID
}

// finalRun waits for a run to be final and returns it.
func finalRun(t *testing.T, p *proc, key, flowID, runID string) callRun {
	t.Helper()
	var r callRun
	testwait.For(t, 30*time.Second, "run "+runID+" to finish", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, "", 200, &r)
		return r.Status != "RUNNING"
	})
	return r
}

// runsOf lists a flow's runs, newest first.
func runsOf(t *testing.T, p *proc, key, flowID string) []callRun {
	t.Helper()
	var page struct{ Data []callRun }
	api(t, p, key, "GET", "/api/v1/flows/"+flowID+"/runs?limit=100", "", 200, &page)
	return page.Data
}

// TestCallFlowOnFlowd runs CALL_FLOW steps on flowd through its API and
// webhooks: a waiting call gets the child's RESPOND body, a call without
// wait gets the child's run ID, a failed child fails the step with its run
// ID, a disabled child fails the step clearly, and a flow that calls
// itself stops at the depth bound.
func TestCallFlowOnFlowd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)

	child := createEnabled(t, p, key, `{"name": "enrich", "engine": "FLOW_BUILDER", "steps": [
		{"name": "shape", "type": "SET", "values": {"customer": "{{ trigger.body.id }}", "tier": "gold"}},
		{"name": "answer", "type": "RESPOND", "body": {"customer": "{{ steps.shape.customer }}", "tier": "{{ steps.shape.tier }}", "by": "{{ trigger.caller.flowId }}"}},
		{"name": "after", "type": "SET", "values": {"ignored": true}}]}`)

	t.Run("wait", func(t *testing.T) {
		parent := createEnabled(t, p, key, fmt.Sprintf(`{"name": "order", "engine": "FLOW_BUILDER", "steps": [
			{"name": "enrich", "type": "CALL_FLOW", "flowId": %q, "input": {"id": "{{ trigger.body.customer }}"}},
			{"name": "use", "type": "SET", "values": {"tier": "{{ steps.enrich.tier }}"}}]}`, child))
		runID := trigger(t, p, parent, `{"customer": "cus_42"}`)
		r := finalRun(t, p, key, parent, runID)
		if r.Status != "SUCCEEDED" || len(r.Steps) != 2 {
			t.Fatalf("parent run = %+v, want SUCCEEDED with 2 steps", r)
		}
		want := fmt.Sprintf(`{"by":%q,"customer":"cus_42","tier":"gold"}`, parent)
		if got := string(r.Steps[0].Output); got != want {
			t.Errorf("enrich output = %s, want the child's RESPOND body %s", got, want)
		}
		if got := string(r.Steps[1].Output); got != `{"tier":"gold"}` {
			t.Errorf("use output = %s, want the child's answer in scope", got)
		}
		kids := runsOf(t, p, key, child)
		if len(kids) != 1 {
			t.Fatalf("child flow has %d runs, want 1", len(kids))
		}
		kid := finalRun(t, p, key, child, kids[0].ID)
		caller, _ := json.Marshal(kid.Trigger.Caller)
		if want := fmt.Sprintf(`{"flowId":%q,"runId":%q}`, parent, runID); string(caller) != want {
			t.Errorf("child's trigger.caller = %s, want %s", caller, want)
		}
		if string(kid.Trigger.Body) != `{"id":"cus_42"}` || kid.Trigger.Method != "CALL_FLOW" || kid.Trigger.Headers["x-flow-depth"] != "1" {
			t.Errorf("child's trigger = %+v, want body {\"id\":\"cus_42\"}, method CALL_FLOW, depth 1", kid.Trigger)
		}
	})

	t.Run("answer a webhook with a sub-flow's answer", func(t *testing.T) {
		createEnabled(t, p, key, fmt.Sprintf(`{"name": "quote", "engine": "WORKFLOW_BUILDER",
			"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "quote", "responseMode": "ON_COMPLETION"}},
			"steps": [
				{"name": "enrich", "type": "CALL_FLOW", "flowId": %q, "input": {"id": "{{ trigger.body.customer }}"}},
				{"name": "reply", "type": "RESPOND", "body": {"quote": "{{ steps.enrich.tier == 'gold' ? 90 : 100 }}"}}]}`, child))
		resp, err := http.Post(p.base+"/webhook/quote", "application/json", strings.NewReader(`{"customer": "cus_1"}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct{ Quote int }
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 || got.Quote != 90 {
			t.Fatalf("ON_COMPLETION answer = %d %+v %v, want 200 with the quote the sub-flow's answer gives (90)", resp.StatusCode, got, err)
		}
	})

	t.Run("last step output without RESPOND", func(t *testing.T) {
		plain := createEnabled(t, p, key, `{"name": "plain", "engine": "FLOW_BUILDER", "steps": [
			{"name": "one", "type": "SET", "values": {"n": 1}},
			{"name": "two", "type": "SET", "values": {"n": 2, "seen": "{{ trigger.body }}"}}]}`)
		parent := createEnabled(t, p, key, fmt.Sprintf(`{"name": "p", "engine": "FLOW_BUILDER", "steps": [
			{"name": "call", "type": "CALL_FLOW", "flowId": %q, "input": "{{ trigger.body.payload }}"}]}`, plain))
		r := finalRun(t, p, key, parent, trigger(t, p, parent, `{"payload": "text"}`))
		if r.Status != "SUCCEEDED" || string(r.Steps[0].Output) != `{"n":2,"seen":"text"}` {
			t.Fatalf("parent run = %+v, want the child's last step output", r)
		}
	})

	t.Run("no wait", func(t *testing.T) {
		before := len(runsOf(t, p, key, child))
		parent := createEnabled(t, p, key, fmt.Sprintf(`{"name": "fire and forget", "engine": "FLOW_BUILDER", "steps": [
			{"name": "start", "type": "CALL_FLOW", "flowId": %q, "input": {"id": "c1"}, "wait": false},
			{"name": "next", "type": "SET", "values": {"child": "{{ steps.start.runId }}"}}]}`, child))
		r := finalRun(t, p, key, parent, trigger(t, p, parent, `{}`))
		var out struct{ RunID string }
		if err := json.Unmarshal(r.Steps[0].Output, &out); err != nil || r.Status != "SUCCEEDED" || out.RunID == "" {
			t.Fatalf("parent run = %+v, want SUCCEEDED with {\"runId\"}", r)
		}
		if keys := strings.Count(string(r.Steps[0].Output), ":"); keys != 1 {
			t.Errorf("start output = %s, want {\"runId\"} alone", r.Steps[0].Output)
		}
		kid := finalRun(t, p, key, child, out.RunID)
		if kid.Status != "SUCCEEDED" || len(runsOf(t, p, key, child)) != before+1 {
			t.Errorf("child run = %+v, want one more run of the child, SUCCEEDED", kid)
		}
	})

	t.Run("failed child fails the step", func(t *testing.T) {
		broken := createEnabled(t, p, key, `{"name": "broken", "engine": "FLOW_BUILDER", "steps": [
			{"name": "boom", "type": "CODE", "code": "throw new Error('no such customer')"}]}`)
		parent := createEnabled(t, p, key, fmt.Sprintf(`{"name": "p2", "engine": "FLOW_BUILDER", "steps": [
			{"name": "enrich", "type": "CALL_FLOW", "flowId": %q},
			{"name": "never", "type": "SET", "values": {"x": 1}}]}`, broken))
		r := finalRun(t, p, key, parent, trigger(t, p, parent, `{}`))
		kids := runsOf(t, p, key, broken)
		if len(kids) != 1 || kids[0].Status != "FAILED" {
			t.Fatalf("child runs = %+v, want one FAILED", kids)
		}
		if r.Status != "FAILED" || r.Steps[0].Status != "FAILED" || r.Steps[1].Status != "SKIPPED" {
			t.Fatalf("parent run = %+v, want FAILED at enrich", r)
		}
		if e := r.Steps[0].Error; !strings.Contains(e, kids[0].ID) || !strings.Contains(e, "FAILED") || !strings.Contains(e, "no such customer") {
			t.Errorf("enrich error = %q, want the child's run ID %s, status and error", e, kids[0].ID)
		}
	})

	t.Run("disabled child", func(t *testing.T) {
		off := createEnabled(t, p, key, `{"name": "off", "engine": "FLOW_BUILDER"}`)
		api(t, p, key, "POST", "/api/v1/flows/"+off+"/disable", "", 200, nil)
		for _, wait := range []string{"true", "false"} {
			parent := createEnabled(t, p, key, fmt.Sprintf(`{"name": "p3", "engine": "FLOW_BUILDER", "steps": [
				{"name": "enrich", "type": "CALL_FLOW", "flowId": %q, "wait": %s}]}`, off, wait))
			r := finalRun(t, p, key, parent, trigger(t, p, parent, `{}`))
			if r.Status != "FAILED" || !strings.Contains(r.Steps[0].Error, off) || !strings.Contains(r.Steps[0].Error, "disabled") {
				t.Errorf("wait %s: parent run = %+v, want FAILED saying %s is disabled", wait, r, off)
			}
		}
		if n := len(runsOf(t, p, key, off)); n != 0 {
			t.Errorf("the disabled flow has %d runs, want none", n)
		}
	})

	t.Run("depth", func(t *testing.T) {
		self := createEnabled(t, p, key, `{"name": "recurse", "engine": "FLOW_BUILDER"}`)
		api(t, p, key, "POST", "/api/v1/flows/"+self, fmt.Sprintf(`{"steps": [
			{"name": "again", "type": "CALL_FLOW", "flowId": %q, "input": {"level": "{{ (trigger.body.level ?? 0) + 1 }}"}}]}`, self), 200, nil)
		top := trigger(t, p, self, `{"level": 0}`)
		r := finalRun(t, p, key, self, top)
		runs := runsOf(t, p, key, self)
		if len(runs) != 6 {
			t.Fatalf("%d runs of the self-calling flow, want 6 (depths 0 to 5)", len(runs))
		}
		var deepest callRun
		for _, x := range runs {
			x = finalRun(t, p, key, self, x.ID)
			if x.Trigger.Headers["x-flow-depth"] == "5" {
				deepest = x
			}
		}
		if deepest.Status != "FAILED" || !strings.Contains(deepest.Steps[0].Error, "calls nest at most 5 deep") {
			t.Fatalf("the run at depth 5 = %+v, want its call (depth 6) FAILED by the depth bound", deepest)
		}
		if r.Status != "FAILED" || !strings.Contains(r.Steps[0].Error, "ended FAILED") {
			t.Errorf("the top run = %+v, want FAILED by its child's failure", r)
		}
	})
}

// TestCallFlowSurvivesKill9 kills flowd (SIGKILL) while a parent run
// waits for its child, whose HTTP step is in flight. After a restart the
// child finishes, its end wakes the parent, and the parent ends with the
// child's answer: the wait was durable, and no second child was started.
func TestCallFlowSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills flowd processes")
	}
	var calls atomic.Int32
	reached := make(chan struct{}, 1)
	hold := make(chan struct{})
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			reached <- struct{}{}
			select { // the first request waits for the kill, and is never answered
			case <-hold:
			case <-r.Context().Done():
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"score": 7}`))
	}))
	defer svc.Close()
	defer close(hold)

	dir := filepath.Join(t.TempDir(), "data")
	env := []string{"FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_RUN_TIMEOUT=10s", "FLOWD_LOG_LEVEL=warn"}
	p := startFlowd(t, dir, env...)
	key := initialKey(t, dir)
	child := createEnabled(t, p, key, fmt.Sprintf(`{"name": "score", "engine": "FLOW_BUILDER", "steps": [
		{"name": "ask", "type": "HTTP", "method": "GET", "url": %q},
		{"name": "answer", "type": "RESPOND", "body": {"score": "{{ steps.ask.body.score }}"}}]}`, svc.URL))
	parent := createEnabled(t, p, key, fmt.Sprintf(`{"name": "lead", "engine": "FLOW_BUILDER", "steps": [
		{"name": "score", "type": "CALL_FLOW", "flowId": %q, "input": {"lead": "{{ trigger.body.lead }}"}}]}`, child))
	runID := trigger(t, p, parent, `{"lead": "l_1"}`)
	select {
	case <-reached:
	case <-time.After(15 * time.Second):
		t.Fatalf("the child never called its service; log: %s", p.stderr)
	}
	var waiting callRun
	api(t, p, key, "GET", "/api/v1/flows/"+parent+"/runs/"+runID, "", 200, &waiting)
	if waiting.Status != "RUNNING" || !strings.Contains(string(waiting.Steps[0].Output), `"waiting":true`) {
		t.Fatalf("parent before the kill = %+v, want RUNNING and waiting for its child", waiting)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited

	p2 := startFlowd(t, dir, env...)
	r := finalRun(t, p2, key, parent, runID)
	if r.Status != "SUCCEEDED" || string(r.Steps[0].Output) != `{"score":7}` {
		t.Fatalf("parent after the restart = %+v, want SUCCEEDED with the child's answer", r)
	}
	kids := runsOf(t, p2, key, child)
	if len(kids) != 1 || kids[0].Status != "SUCCEEDED" {
		t.Fatalf("child runs = %+v, want exactly one, SUCCEEDED", kids)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the child's service saw %d requests, want 2 (the one cut by the kill, and the retry)", n)
	}
}

// TestCallFlowExample runs examples/call-flow-order.json, which calls
// examples/call-flow-enrich.json, on flowd against a local stand-in for the
// CRM and billing services: the order is invoiced with what the sub-flow
// answered.
func TestCallFlowExample(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	invoices := make(chan map[string]any, 4)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == "GET" && r.URL.Path == "/v1/customers/cus_1":
			w.Write([]byte(`{"email": "ana@example.com", "tier": "gold"}`))
		case r.Method == "POST" && r.URL.Path == "/v1/invoices":
			var body map[string]any
			json.NewDecoder(r.Body).Decode(&body)
			invoices <- body
			w.WriteHeader(http.StatusCreated)
			w.Write([]byte(`{"id": "in_1"}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer svc.Close()
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)

	enrich := createEnabled(t, p, key, example(t, "call-flow-enrich", svc.URL))
	order := createEnabled(t, p, key, strings.ReplaceAll(example(t, "call-flow-order", svc.URL), "flw_replace_with_the_enrich_flow_id", enrich))
	r := finalRun(t, p, key, order, trigger(t, p, order, `{"id": "ord_9", "customer": "cus_1"}`))
	if r.Status != "SUCCEEDED" {
		t.Fatalf("order run = %+v, want SUCCEEDED", r)
	}
	want := fmt.Sprintf(`{"calledBy":%q,"customerId":"cus_1","email":"ana@example.com","tier":"gold"}`, order)
	if got := string(r.Steps[0].Output); got != want {
		t.Errorf("customer output = %s, want %s", got, want)
	}
	select {
	case got := <-invoices:
		if got["order"] != "ord_9" || got["email"] != "ana@example.com" || got["discountPercent"] != float64(10) {
			t.Errorf("billing got %v, want order ord_9 for ana@example.com with 10%% off", got)
		}
	default:
		t.Fatal("billing got no invoice, though the run succeeded")
	}
}
