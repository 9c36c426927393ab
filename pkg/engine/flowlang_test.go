package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"flowservice/pkg/automation"
)

// recorder is a fake external service that keeps every request body, with
// an optional status per path.
type recorder struct {
	*httptest.Server
	mu     sync.Mutex
	bodies map[string][]string // path -> bodies, in arrival order
	status atomic.Int64        // answer for /fail; 0 = 500
	inside atomic.Int64        // requests being served now
	most   atomic.Int64        // the most served at once
	gate   chan struct{}       // when set, /slow waits on it
}

func newRecorder(t *testing.T) *recorder {
	rec := &recorder{bodies: map[string][]string{}}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := rec.inside.Add(1)
		defer rec.inside.Add(-1)
		for m := rec.most.Load(); n > m && !rec.most.CompareAndSwap(m, n); m = rec.most.Load() {
		}
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			k, err := r.Body.Read(buf)
			b.Write(buf[:k])
			if err != nil {
				break
			}
		}
		rec.mu.Lock()
		rec.bodies[r.URL.Path] = append(rec.bodies[r.URL.Path], b.String())
		rec.mu.Unlock()
		if r.URL.Path == "/slow" && rec.gate != nil {
			<-rec.gate
		}
		if r.URL.Path == "/fail" {
			code := int(rec.status.Load())
			if code == 0 {
				code = http.StatusBadRequest
			}
			w.WriteHeader(code)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"path":%q,"got":%s}`, r.URL.Path, jsonOr(b.String()))
	}))
	t.Cleanup(rec.Close)
	return rec
}

func jsonOr(s string) string {
	if json.Valid([]byte(s)) && s != "" {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b)
}

func (rec *recorder) got(path string) []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]string(nil), rec.bodies[path]...)
}

func post(name, url, body string) automation.Step {
	return automation.Step{Name: name, Type: automation.StepHTTP, Method: "POST", URL: url, Body: raw(body)}
}

// A Stripe-style router: the first matching case runs, the others are
// absent from the run and from steps.<name>.
func TestSwitchRunsTheFirstMatchingCase(t *testing.T) {
	ext := newRecorder(t)
	route := automation.Step{Name: "route", Type: automation.StepSwitch,
		Cases: []automation.Case{
			{When: "trigger.body.type == 'invoice.paid'", Steps: []automation.Step{post("billing", ext.URL+"/billing", `{"id":"{{ trigger.body.id }}"}`)}},
			{When: "trigger.body.type startsWith 'customer.'", Steps: []automation.Step{post("crm", ext.URL+"/crm", `{"id":"{{ trigger.body.id }}"}`)}},
		},
		Default: []automation.Step{{Name: "ignored", Type: automation.StepSet, Values: raw(`{"why":"unhandled"}`)}},
	}
	after := automation.Step{Name: "after", Type: automation.StepSet, Values: raw(`{"billing": "{{ 'billing' in steps }}", "crm": "{{ 'crm' in steps }}", "case": "{{ steps.route.case }}"}`)}
	e := newEngine(t, nil, true)
	tests := []struct {
		body, wantCase, wantPaths string
		billing, crm              bool
	}{
		{`{"type":"invoice.paid","id":"in_1"}`, "0", "/billing", true, false},
		{`{"type":"customer.created","id":"cus_1"}`, "1", "/crm", false, true},
		{`{"type":"charge.refunded","id":"ch_1"}`, "default", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.wantCase, func(t *testing.T) {
			before := len(ext.got("/billing")) + len(ext.got("/crm"))
			r := e.Execute(context.Background(), flowOf(route, after), runOf(tt.body)).Run
			if r.Status != automation.RunSucceeded {
				t.Fatalf("run %s: %s", r.Status, r.Error)
			}
			if got := fmt.Sprint(output(t, r, 0)["case"]); got != tt.wantCase {
				t.Errorf("case = %s, want %s", got, tt.wantCase)
			}
			out := output(t, r, 1)
			if out["billing"] != tt.billing || out["crm"] != tt.crm || fmt.Sprint(out["case"]) != tt.wantCase {
				t.Errorf("later step saw %v", out)
			}
			calls := len(ext.got("/billing")) + len(ext.got("/crm")) - before
			if (tt.wantPaths == "") != (calls == 0) || calls > 1 {
				t.Errorf("%d calls for %s", calls, tt.wantCase)
			}
			if tt.wantPaths != "" {
				if len(r.Steps[0].Steps) != 1 || r.Steps[0].Steps[0].Status != automation.StepSucceeded {
					t.Errorf("branch results %+v", r.Steps[0].Steps)
				}
			}
		})
	}
}

// FOR_EACH runs its steps per item with item and index in scope, and its
// output lists the items' outputs in item order, whatever the concurrency.
func TestForEachOrderedOutputsAndConcurrency(t *testing.T) {
	for _, conc := range []int{1, 4} {
		t.Run(fmt.Sprint("concurrency ", conc), func(t *testing.T) {
			ext := newRecorder(t)
			each := automation.Step{Name: "each", Type: automation.StepForEach, Items: raw(`"trigger.body.lines"`), Concurrency: conc,
				Steps: []automation.Step{
					{Name: "line", Type: automation.StepSet, Values: raw(`{"sku": "{{ item.sku }}", "n": "{{ index }}"}`)},
					post("call", ext.URL+"/crm", `{"sku":"{{ steps.line.sku }}","i":"{{ index }}","order":"{{ trigger.body.order }}"}`),
				}}
			var lines []string
			for i := range 12 {
				lines = append(lines, fmt.Sprintf(`{"sku":"s%d"}`, i))
			}
			r := newEngine(t, nil, true).Execute(context.Background(), flowOf(each), runOf(`{"order":"o1","lines":[`+strings.Join(lines, ",")+`]}`)).Run
			if r.Status != automation.RunSucceeded {
				t.Fatalf("run %s: %s", r.Status, r.Error)
			}
			if n := len(ext.got("/crm")); n != 12 {
				t.Fatalf("%d calls, want 12", n)
			}
			var out struct {
				Items []struct {
					Line struct {
						Sku string
						N   any
					}
					Call struct {
						Body struct{ Got map[string]any }
					}
				}
			}
			if err := json.Unmarshal(r.Steps[0].Output, &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Items) != 12 {
				t.Fatalf("%d items in the output", len(out.Items))
			}
			for i, it := range out.Items {
				want := fmt.Sprintf("s%d", i)
				if it.Line.Sku != want || fmt.Sprint(it.Line.N) != fmt.Sprint(i) || it.Call.Body.Got["sku"] != want || fmt.Sprint(it.Call.Body.Got["i"]) != fmt.Sprint(i) || it.Call.Body.Got["order"] != "o1" {
					t.Errorf("item %d = %+v", i, it)
				}
			}
			its := r.Steps[0].Iterations
			if len(its) != 12 || its[11].Index != 11 || its[11].Status != automation.StepSucceeded || its[11].Steps[1].Name != "call" {
				t.Errorf("iterations %+v", its)
			}
		})
	}
}

// Concurrency bounds how many items run at once.
func TestForEachConcurrencyIsBounded(t *testing.T) {
	ext := newRecorder(t)
	ext.gate = make(chan struct{})
	each := automation.Step{Name: "each", Type: automation.StepForEach, Items: raw(`[1,2,3,4,5,6,7,8]`), Concurrency: 3,
		Steps: []automation.Step{post("call", ext.URL+"/slow", `{"i":"{{ item }}"}`)}}
	done := make(chan automation.Run)
	go func() {
		done <- newEngine(t, nil, true).Execute(context.Background(), flowOf(each), runOf(`{}`)).Run
	}()
	// Three requests arrive and wait; let them go one at a time.
	for range 8 {
		for ext.inside.Load() == 0 {
			runtimeGosched()
		}
		ext.gate <- struct{}{}
	}
	r := <-done
	if r.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	if m := ext.most.Load(); m > 3 || m < 1 {
		t.Errorf("at most %d requests at once, want 1 to 3", m)
	}
}

// A failed item fails the loop with an error naming the item and the step;
// the run's error follows.
func TestForEachFailedItemFailsTheStep(t *testing.T) {
	ext := newRecorder(t)
	each := automation.Step{Name: "each", Type: automation.StepForEach, Items: raw(`"trigger.body.xs"`),
		Steps: []automation.Step{{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: ext.URL + "/{{ item }}", Body: raw(`{}`)}}}
	r := newEngine(t, nil, true).Execute(context.Background(), flowOf(each), runOf(`{"xs":["ok","fail","ok"]}`)).Run
	if r.Status != automation.RunFailed || !strings.Contains(r.Error, "step each: item 1: step call: ") {
		t.Fatalf("run %s: %q", r.Status, r.Error)
	}
	its := r.Steps[0].Iterations
	if its[0].Status != automation.StepSucceeded || its[1].Status != automation.StepFailed || its[2].Status != automation.StepSkipped {
		t.Errorf("iteration statuses %s %s %s", its[0].Status, its[1].Status, its[2].Status)
	}
	if len(ext.got("/ok")) != 1 {
		t.Errorf("the loop went on after the failed item: %d calls to /ok", len(ext.got("/ok")))
	}
}

// More than MaxForEachItems items, or something other than a list, fails
// the step clearly at run time.
func TestForEachItemLimits(t *testing.T) {
	many := "[" + strings.TrimSuffix(strings.Repeat("1,", automation.MaxForEachItems+1), ",") + "]"
	tests := []struct{ body, want string }{
		{`{"xs":` + many + `}`, "items has 1001 entries; FOR_EACH runs over at most 1000"},
		{`{"xs":"abc"}`, "items must be a list, got string"},
	}
	for _, tt := range tests {
		each := automation.Step{Name: "each", Type: automation.StepForEach, Items: raw(`"trigger.body.xs"`),
			Steps: []automation.Step{{Name: "s", Type: automation.StepSet, Values: raw(`{}`)}}}
		r := newEngine(t, nil, true).Execute(context.Background(), flowOf(each), runOf(tt.body)).Run
		if r.Status != automation.RunFailed || r.Steps[0].Status != automation.StepFailed || !strings.Contains(r.Steps[0].Error, tt.want) {
			t.Errorf("run %s, step error %q, want %q", r.Status, r.Steps[0].Error, tt.want)
		}
	}
	// No items: the loop succeeds with an empty list.
	each := automation.Step{Name: "each", Type: automation.StepForEach, Items: raw(`"trigger.body.none"`),
		Steps: []automation.Step{{Name: "s", Type: automation.StepSet, Values: raw(`{}`)}}}
	r := newEngine(t, nil, true).Execute(context.Background(), flowOf(each), runOf(`{}`)).Run
	if r.Status != automation.RunSucceeded || string(r.Steps[0].Output) != `{"items":[]}` {
		t.Errorf("empty loop: %s %s", r.Status, r.Steps[0].Output)
	}
}

// The evaluation budget applies per step inside a loop: each item's step
// gets its own, so a loop of modest steps is not cut short, while one
// step over its budget fails.
func TestForEachBudgetsPerStep(t *testing.T) {
	each := automation.Step{Name: "each", Type: automation.StepForEach, Items: raw(`"1..30"`),
		Steps: []automation.Step{{Name: "s", Type: automation.StepSet, Values: raw(`{"n": "{{ len(filter(1..40000, # % 2 == 0)) }}"}`)}}}
	r := newEngine(t, nil, true).Execute(context.Background(), flowOf(each), runOf(`{}`)).Run
	if r.Status != automation.RunSucceeded {
		t.Fatalf("30 items of 40,000 iterations each (more than one step's budget together): %s %s", r.Status, r.Error)
	}
	over := automation.Step{Name: "each", Type: automation.StepForEach, Items: raw(`[1]`),
		Steps: []automation.Step{{Name: "s", Type: automation.StepSet, Values: raw(fmt.Sprintf(`{"n": "{{ len(filter(1..%d, true)) }}"}`, MaxLoopIterations+10))}}}
	r = newEngine(t, nil, true).Execute(context.Background(), flowOf(over), runOf(`{}`)).Run
	if r.Status != automation.RunFailed || !strings.Contains(r.Error, "budget") && !strings.Contains(r.Error, "loop iterations") {
		t.Errorf("over-budget step in a loop: %s %q", r.Status, r.Error)
	}
}

// `when` false skips a step: SKIPPED, absent from steps.<name>; a FILTER
// that is false inside a loop ends that item only.
func TestWhenSkipsAndFilterInLoop(t *testing.T) {
	steps := []automation.Step{
		{Name: "maybe", Type: automation.StepSet, When: "trigger.body.go == true", Values: raw(`{"ran": true}`)},
		{Name: "each", Type: automation.StepForEach, Items: raw(`[1,2,3,4]`), Steps: []automation.Step{
			{Name: "even", Type: automation.StepFilter, Condition: "int(item) % 2 == 0"},
			{Name: "keep", Type: automation.StepSet, Values: raw(`{"v": "{{ item }}"}`)},
		}},
		{Name: "after", Type: automation.StepSet, Values: raw(`{"saw": "{{ 'maybe' in steps }}"}`)},
	}
	r := newEngine(t, nil, true).Execute(context.Background(), flowOf(steps...), runOf(`{"go":false}`)).Run
	if r.Status != automation.RunSucceeded || statuses(r) != "SKIPPED,SUCCEEDED,SUCCEEDED" {
		t.Fatalf("run %s %s: %s", r.Status, statuses(r), r.Error)
	}
	if r.Steps[0].StartedAt != nil || r.Steps[0].Output != nil {
		t.Errorf("skipped step recorded as run: %+v", r.Steps[0])
	}
	if output(t, r, 2)["saw"] != false {
		t.Errorf("a skipped step is visible in steps: %v", output(t, r, 2))
	}
	want := `{"items":[{"even":{"passed":false}},{"even":{"passed":true},"keep":{"v":2}},{"even":{"passed":false}},{"even":{"passed":true},"keep":{"v":4}}]}`
	if string(r.Steps[1].Output) != want {
		t.Errorf("loop output\n%s\nwant\n%s", r.Steps[1].Output, want)
	}
	if r.StoppedAt != "" {
		t.Errorf("a FILTER inside a loop stopped the run at %s", r.StoppedAt)
	}
	r = newEngine(t, nil, true).Execute(context.Background(), flowOf(steps...), runOf(`{"go":true}`)).Run
	if statuses(r) != "SUCCEEDED,SUCCEEDED,SUCCEEDED" || output(t, r, 2)["saw"] != true {
		t.Errorf("when true: %s %v", statuses(r), output(t, r, 2))
	}
}

// Nested loops and switches: item is the innermost loop's, and a resumed
// run skips the nested steps with side effects that were journaled,
// per item.
func TestNestedStepsResumeFromTheJournal(t *testing.T) {
	ext := newRecorder(t)
	f := flowOf(automation.Step{Name: "orders", Type: automation.StepForEach, Items: raw(`"trigger.body.orders"`), Steps: []automation.Step{
		{Name: "kind", Type: automation.StepSwitch, Cases: []automation.Case{
			{When: "item.rush", Steps: []automation.Step{post("rush", ext.URL+"/rush", `{"o":"{{ item.id }}"}`)}},
		}, Default: []automation.Step{post("normal", ext.URL+"/normal", `{"o":"{{ item.id }}"}`)}},
		{Name: "fail_third", Type: automation.StepHTTP, Method: "POST", URL: ext.URL + "/{{ index == 2 ? 'fail' : 'ok' }}", Body: raw(`{}`)},
	}})
	body := `{"orders":[{"id":"a","rush":true},{"id":"b","rush":false},{"id":"c","rush":false}]}`
	ext.status.Store(503) // transient: the run is worth another attempt
	var journal []automation.StepResult
	e := newEngine(t, nil, true)
	res := e.ExecuteJournaled(context.Background(), f, runOf(body), func(_ context.Context, steps []automation.StepResult) error {
		journal = steps
		return nil
	})
	if res.Run.Status != automation.RunFailed || !res.Retryable {
		t.Fatalf("first attempt: %s retryable=%v %s", res.Run.Status, res.Retryable, res.Run.Error)
	}
	if len(ext.got("/rush")) != 1 || len(ext.got("/normal")) != 2 || len(ext.got("/ok")) != 2 {
		t.Fatalf("first attempt calls: rush %d normal %d ok %d", len(ext.got("/rush")), len(ext.got("/normal")), len(ext.got("/ok")))
	}
	// The second attempt starts from the journal; the service recovered.
	ext.status.Store(200)
	r := runOf(body)
	r.Steps = journal
	res = e.ExecuteJournaled(context.Background(), f, r, nil)
	if res.Run.Status != automation.RunSucceeded {
		t.Fatalf("resumed: %s %s", res.Run.Status, res.Run.Error)
	}
	if len(ext.got("/rush")) != 1 || len(ext.got("/normal")) != 2 || len(ext.got("/ok")) != 2 || len(ext.got("/fail")) != 2 {
		t.Errorf("resumed attempt repeated calls: rush %d normal %d ok %d fail %d",
			len(ext.got("/rush")), len(ext.got("/normal")), len(ext.got("/ok")), len(ext.got("/fail")))
	}
	var out struct{ Items []map[string]any }
	if err := json.Unmarshal(res.Run.Steps[0].Output, &out); err != nil || len(out.Items) != 3 || out.Items[0]["rush"] == nil || out.Items[2]["normal"] == nil {
		t.Errorf("resumed output %s", res.Run.Steps[0].Output)
	}
}

func runtimeGosched() { runtime.Gosched() }

// onError steps see the failure and the run's data; their results are
// kept apart and the run's status stays.
func TestRunOnError(t *testing.T) {
	ext := newRecorder(t)
	f := flowOf(
		automation.Step{Name: "prep", Type: automation.StepSet, Values: raw(`{"order": "{{ trigger.body.order }}"}`)},
		automation.Step{Name: "charge", Type: automation.StepHTTP, Method: "POST", URL: ext.URL + "/fail", Body: raw(`{}`)},
	)
	f.OnError = []automation.Step{post("alert", ext.URL+"/alert", `{"text": "{{ error.step }} failed: {{ error.message }} (order {{ steps.prep.order }})"}`)}
	e := newEngine(t, nil, true)
	r := e.Execute(context.Background(), f, runOf(`{"order":"o-7"}`)).Run
	if r.Status != automation.RunFailed || len(r.OnErrorSteps) != 0 {
		t.Fatalf("run %s, onError %v", r.Status, r.OnErrorSteps)
	}
	got := e.RunOnError(context.Background(), f, r, nil)
	if got.Status != automation.RunFailed || got.Error != r.Error {
		t.Errorf("onError changed the run: %s %q", got.Status, got.Error)
	}
	if len(got.OnErrorSteps) != 1 || got.OnErrorSteps[0].Status != automation.StepSucceeded {
		t.Fatalf("onError steps %+v", got.OnErrorSteps)
	}
	alerts := ext.got("/alert")
	if len(alerts) != 1 || !strings.Contains(alerts[0], `"charge failed: POST http://`) || !strings.Contains(alerts[0], `answered 400`) || !strings.Contains(alerts[0], "(order o-7)") {
		t.Errorf("alert sent %v", alerts)
	}
	// A flow without onError is left alone.
	f.OnError = nil
	if again := e.RunOnError(context.Background(), f, r, nil); again.OnErrorSteps != nil {
		t.Errorf("onError results without onError steps: %v", again.OnErrorSteps)
	}
}

// onError steps are journaled as the run's are: a resumed RunOnError,
// given the onError results an interrupted one journaled, skips the
// onError steps that finished and executes the rest.
func TestRunOnErrorResumesFromTheJournal(t *testing.T) {
	ext := newRecorder(t)
	f := flowOf(post("charge", ext.URL+"/charge", `{}`))
	f.OnError = []automation.Step{
		post("slack", ext.URL+"/slack", `{"text": "{{ error.step }} failed"}`),
		post("pager", ext.URL+"/fail", `{"run": "{{ run.id }}"}`),
	}
	e := newEngine(t, nil, true)
	r := runOf(`{}`)
	r.Status, r.Error = automation.RunFailed, "step charge: declined"
	r.Steps = []automation.StepResult{{Name: "charge", Type: automation.StepHTTP, Status: automation.StepFailed, Error: "declined"}}
	var journaled [][]automation.StepResult
	ext.status.Store(503) // the pager is down: the onError steps end at it
	first := e.RunOnError(context.Background(), f, r, func(_ context.Context, steps []automation.StepResult) error {
		journaled = append(journaled, steps)
		return nil
	})
	if len(journaled) != 1 || len(journaled[0]) != 2 || journaled[0][0].Status != automation.StepSucceeded ||
		journaled[0][1].Status != automation.StepSkipped {
		t.Fatalf("journal after the first onError step: %+v", journaled)
	}
	if first.OnErrorSteps[1].Status != automation.StepFailed || first.Status != automation.RunFailed {
		t.Fatalf("first attempt: run %s, onError %+v", first.Status, first.OnErrorSteps)
	}
	// The next attempt starts from the journal; the pager is back.
	ext.status.Store(200)
	r.OnErrorSteps = journaled[0]
	got := e.RunOnError(context.Background(), f, r, nil)
	if len(ext.got("/slack")) != 1 || len(ext.got("/fail")) != 2 {
		t.Fatalf("slack saw %d requests and the pager %d; want 1 and 2", len(ext.got("/slack")), len(ext.got("/fail")))
	}
	if got.OnErrorSteps[0].Status != automation.StepSucceeded || got.OnErrorSteps[1].Status != automation.StepSucceeded ||
		string(got.OnErrorSteps[0].Output) != string(journaled[0][0].Output) {
		t.Fatalf("resumed onError steps %+v", got.OnErrorSteps)
	}
	if got.Status != automation.RunFailed || got.Error != r.Error {
		t.Errorf("onError changed the run: %s %q", got.Status, got.Error)
	}
}

// Inside FOR_EACH each item's POST carries its own Idempotency-Key.
func TestForEachIdempotencyKeyPerItem(t *testing.T) {
	ext := newExternal(t)
	each := automation.Step{Name: "each", Type: automation.StepForEach, Items: raw(`[1,2]`),
		Steps: []automation.Step{post("call", ext.URL+"/echo", `{}`)}}
	r := newEngine(t, nil, true).Execute(context.Background(), flowOf(each), runOf(`{}`)).Run
	if r.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	var out struct {
		Items []struct {
			Call struct {
				Body struct{ Headers map[string][]string }
			}
		}
	}
	if err := json.Unmarshal(r.Steps[0].Output, &out); err != nil {
		t.Fatal(err)
	}
	for i, it := range out.Items {
		if got, want := it.Call.Body.Headers["Idempotency-Key"], fmt.Sprintf("run_1.call.%d", i); len(got) != 1 || got[0] != want {
			t.Errorf("item %d Idempotency-Key %v, want %s", i, got, want)
		}
	}
}

// scopeEcho is a CodeRunner that answers with the item and index the
// script would see: what the engine hands the sandbox.
type scopeEcho struct{}

func (scopeEcho) RunCode(_ context.Context, req automation.CodeRequest) (automation.CodeResult, error) {
	var scope struct {
		Item  any `json:"item"`
		Index int `json:"index"`
	}
	if err := json.Unmarshal(req.Scope, &scope); err != nil {
		return automation.CodeResult{}, err
	}
	out, _ := json.Marshal(map[string]any{"item": scope.Item, "index": scope.Index})
	return automation.CodeResult{Output: out, Logs: []string{fmt.Sprintf("item %v", scope.Item)}}, nil
}

// CODE inside FOR_EACH gets item and index in its scope, and its logs are
// kept per item.
func TestCodeInsideLoopSeesItem(t *testing.T) {
	e := New(Config{Code: scopeEcho{}})
	each := automation.Step{Name: "each", Type: automation.StepForEach, Items: raw(`["x","y"]`),
		Steps: []automation.Step{{Name: "js", Type: automation.StepCode, Code: "return {item, index}"}}}
	r := e.Execute(context.Background(), flowOf(each), runOf(`{}`)).Run
	if r.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	want := `{"items":[{"js":{"index":0,"item":"x"}},{"js":{"index":1,"item":"y"}}]}`
	if string(r.Steps[0].Output) != want {
		t.Errorf("output %s, want %s", r.Steps[0].Output, want)
	}
	if logs := r.Steps[0].Iterations[1].Steps[0].Logs; len(logs) != 1 || logs[0] != "item y" {
		t.Errorf("logs of item 1: %v", logs)
	}
}

// memState is a flow state in memory.
type memState struct {
	mu sync.Mutex
	m  map[string]any
}

func (s *memState) FlowState(context.Context, string, string) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]any{}
	for k, v := range s.m {
		out[k] = v
	}
	return out, nil
}

func (s *memState) StoreFlowState(_ context.Context, _, _ string, set map[string]any, del []string) (map[string]any, error) {
	s.mu.Lock()
	for _, k := range del {
		delete(s.m, k)
	}
	for k, v := range set {
		s.m[k] = v
	}
	s.mu.Unlock()
	return s.FlowState(context.Background(), "", "")
}

// A resumed attempt keeps what the earlier one decided, though the state
// it reads has changed since: outputs of finished steps, the SWITCH case,
// the steps a `when` skipped.
func TestResumeKeepsDecisions(t *testing.T) {
	ext := newRecorder(t)
	ext.status.Store(503)
	st := &memState{m: map[string]any{}}
	e := New(Config{Env: automation.ExecEnv{State: st}, AllowPrivateNetworks: true})
	f := flowOf(
		automation.Step{Name: "before", Type: automation.StepSet, Values: raw(`{"prev": "{{ state.n ?? 0 }}"}`)},
		automation.Step{Name: "first_time", Type: automation.StepSet, When: "state.n == nil", Values: raw(`{}`)},
		automation.Step{Name: "later_time", Type: automation.StepSet, When: "state.n != nil", Values: raw(`{}`)},
		automation.Step{Name: "route", Type: automation.StepSwitch, Cases: []automation.Case{
			{When: "state.n == nil", Steps: []automation.Step{
				{Name: "count", Type: automation.StepStore, Set: raw(`{"n": 1}`)},
				{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: ext.URL + "/fail", Body: raw(`{}`)}}}},
			Default: []automation.Step{{Name: "other", Type: automation.StepSet, Values: raw(`{}`)}}},
	)
	journal := failFirstAttempt(t, e, f)
	ext.status.Store(200)
	r := runOf(`{}`)
	r.Steps = journal
	got := e.ExecuteJournaled(context.Background(), f, r, nil).Run
	if got.Status != automation.RunSucceeded {
		t.Fatalf("resumed %s: %s", got.Status, got.Error)
	}
	if string(got.Steps[0].Output) != `{"prev":0}` || statuses(got) != "SUCCEEDED,SUCCEEDED,SKIPPED,SUCCEEDED" ||
		string(got.Steps[3].Output) != `{"case":0}` || len(got.Steps[3].Steps) != 2 {
		b, _ := json.Marshal(got.Steps)
		t.Errorf("resumed run changed its decisions: %s", b)
	}
	if n := len(ext.got("/fail")); n != 2 {
		t.Errorf("%d calls, want the failed one and its retry", n)
	}
}

// A resumed FOR_EACH iterates the list the earlier attempt journaled, not
// what its expression says now: the state it reads changed in between.
func TestResumedForEachKeepsItsList(t *testing.T) {
	ext := newRecorder(t)
	ext.status.Store(503)
	st := &memState{m: map[string]any{"list": []any{"a", "b", "c"}}}
	e := New(Config{Env: automation.ExecEnv{State: st}, AllowPrivateNetworks: true})
	f := flowOf(automation.Step{Name: "each", Type: automation.StepForEach, Items: raw(`"state.list"`), Steps: []automation.Step{
		{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: ext.URL + "/{{ index == 1 ? 'fail' : 'ok' }}", Body: raw(`{"item": "{{ item }}"}`)},
	}})
	journal := failFirstAttempt(t, e, f)
	if j := journal[0].ItemsJournal; j == nil || j.Count != 3 || string(j.Items) != `["a","b","c"]` {
		t.Fatalf("journaled list %+v", j)
	}
	st.m["list"] = []any{"x", "y"}
	ext.status.Store(200)
	r := runOf(`{}`)
	r.Steps = journal
	got := e.ExecuteJournaled(context.Background(), f, r, nil).Run
	if got.Status != automation.RunSucceeded {
		t.Fatalf("resumed %s: %s", got.Status, got.Error)
	}
	if ok, failed := ext.got("/ok"), ext.got("/fail"); len(ok) != 2 || !strings.Contains(ok[0], `"a"`) || !strings.Contains(ok[1], `"c"`) ||
		len(failed) != 2 || !strings.Contains(failed[1], `"b"`) {
		t.Fatalf("calls: ok %v, fail %v; want a, c and b twice", ok, failed)
	}
	var out struct{ Items []map[string]any }
	if err := json.Unmarshal(got.Steps[0].Output, &out); err != nil || len(out.Items) != 3 {
		t.Fatalf("resumed output %s", got.Steps[0].Output)
	}
	if got.Steps[0].ItemsJournal != nil {
		t.Errorf("a finished loop keeps its list: %+v", got.Steps[0].ItemsJournal)
	}
}

// A list too long to keep is journaled by its digest: a resumed loop goes
// on over the same list, and fails, for good, over another one.
func TestResumedForEachChecksALongList(t *testing.T) {
	ext := newRecorder(t)
	long := make([]any, 300)
	for i := range long {
		long[i] = fmt.Sprintf("%03d-%s", i, strings.Repeat("x", 300))
	}
	st := &memState{m: map[string]any{"list": long}}
	e := New(Config{Env: automation.ExecEnv{State: st}, AllowPrivateNetworks: true})
	f := flowOf(automation.Step{Name: "each", Type: automation.StepForEach, Items: raw(`"state.list"`), Steps: []automation.Step{
		{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: ext.URL + "/{{ index == 1 ? 'fail' : 'ok' }}", Body: raw(`{}`)},
	}})
	ext.status.Store(503)
	journal := failFirstAttempt(t, e, f)
	if j := journal[0].ItemsJournal; j == nil || j.Count != 300 || len(j.SHA256) != 64 || j.Items != nil {
		t.Fatalf("journaled list of a long list: %+v", j)
	}
	// Another list: the loop does not go on over it.
	changed := slices.Clone(long)
	changed[2] = "other"
	st.m["list"] = changed
	r := runOf(`{}`)
	r.Steps = journal
	res := e.ExecuteJournaled(context.Background(), f, r, nil)
	if res.Run.Status != automation.RunFailed || res.Retryable || !strings.Contains(res.Run.Error, "items changed since an earlier attempt") {
		t.Fatalf("resumed over another list: %s retryable=%v %q", res.Run.Status, res.Retryable, res.Run.Error)
	}
	if len(ext.got("/ok")) != 1 || len(ext.got("/fail")) != 1 {
		t.Fatalf("resumed over another list called: ok %d, fail %d", len(ext.got("/ok")), len(ext.got("/fail")))
	}
	// The same list: it goes on where it stopped.
	st.m["list"] = long
	ext.status.Store(200)
	res = e.ExecuteJournaled(context.Background(), f, r, nil)
	if res.Run.Status != automation.RunSucceeded {
		t.Fatalf("resumed over the same list: %s %s", res.Run.Status, res.Run.Error)
	}
	if len(ext.got("/ok")) != 299 || len(ext.got("/fail")) != 2 {
		t.Fatalf("calls: ok %d, fail %d; want 299 and 2", len(ext.got("/ok")), len(ext.got("/fail")))
	}
}

// failFirstAttempt executes f's first attempt on an empty trigger, which
// must fail and be retryable, and returns the steps it journaled.
func failFirstAttempt(t *testing.T, e *Engine, f automation.Flow) []automation.StepResult {
	t.Helper()
	var journal []automation.StepResult
	res := e.ExecuteJournaled(context.Background(), f, runOf(`{}`), func(_ context.Context, s []automation.StepResult) error {
		journal = s
		return nil
	})
	if res.Run.Status != automation.RunFailed || !res.Retryable {
		t.Fatalf("first attempt %s retryable=%v %s", res.Run.Status, res.Retryable, res.Run.Error)
	}
	return journal
}
