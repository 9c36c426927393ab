package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/runworker"
	"flowservice/pkg/sqlitestore"
)

// inlineEnv is flowd's run path in small: the workflow builder receiver and
// a worker pool over one SQLite store, the Service's queue being the pool's
// Notifying (which keeps the store's ON_COMPLETION fast path).
type inlineEnv struct {
	fe      *flowtest.Env
	api     *testServer
	hook    *testServer
	key     string
	pool    *runworker.Pool
	worker  *countingExecutor
	sink    *httptest.Server
	calls   sync.Map // Idempotency-Key -> *atomic.Int64: the sink's calls by run and step
	project automation.Project
}

// countingExecutor is the Service as the pool sees it, counting the attempts
// the workers make.
type countingExecutor struct {
	svc      *automation.Service
	attempts atomic.Int64
}

func (c *countingExecutor) ExecuteRun(ctx context.Context, project, runID string) (automation.Attempt, error) {
	c.attempts.Add(1)
	return c.svc.ExecuteRun(ctx, project, runID)
}

func (c *countingExecutor) ExecuteClaimed(ctx context.Context, r automation.Run) (automation.Attempt, error) {
	c.attempts.Add(1)
	return c.svc.ExecuteClaimed(ctx, r)
}

func newInlineEnv(t *testing.T, policy automation.RunPolicy) *inlineEnv {
	t.Helper()
	e := &inlineEnv{}
	e.fe = flowtest.New(t, flowtest.Options{Policy: policy, Queue: func(s *sqlitestore.Store) automation.RunQueue {
		e.pool = runworker.New(s, runworker.Config{Workers: 4, Poll: 5 * time.Millisecond, Policy: policy})
		return e.pool.Notifying(s)
	}})
	e.project, e.key = e.fe.Project(t, "inline", automation.PlanEnterprise)
	e.worker = &countingExecutor{svc: e.fe.Svc}
	e.api = serve(t, NewAPI(e.fe.Svc, slog.New(slog.DiscardHandler)))
	e.hook = serve(t, NewWorkflowHook(e.fe.Svc, HookConfig{SyncTimeout: 10 * time.Second}))
	e.sink = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := e.calls.LoadOrStore(r.Header.Get("Idempotency-Key"), new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/refuse" {
			w.WriteHeader(http.StatusBadRequest)
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(e.sink.Close)
	return e
}

// startWorkers runs the pool until the test ends.
func (e *inlineEnv) startWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.pool.Run(ctx, e.worker); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// syncFlow makes an ACTIVE ON_COMPLETION flow on path that posts to the sink
// (a step with side effects, journaled) and answers with the sink's reply.
func (e *inlineEnv) syncFlow(t *testing.T, path string) string {
	return e.syncFlowTo(t, path, e.sink.URL)
}

// syncFlowTo is syncFlow posting to url.
func (e *inlineEnv) syncFlowTo(t *testing.T, path, url string) string {
	t.Helper()
	f := createFlow(t, e.api, e.key, workflowFlow(path, "POST", `,"responseMode":"ON_COMPLETION"`, fmt.Sprintf(
		`[{"name":"post","type":"HTTP","method":"POST","url":%q,"body":{"n":"{{ trigger.body.n }}"}},
		  {"name":"reply","type":"RESPOND","body":{"n":"{{ trigger.body.n }}","sink":"{{ steps.post.body.ok }}"}}]`, url)))
	call(t, e.api, "POST", "/api/v1/flows/"+f.ID+"/enable", e.key, "").into(t, 200, &flowView{})
	return f.ID
}

// sinkCalls is how many times the sink saw the run's step "post".
func (e *inlineEnv) sinkCalls(runID string) int64 {
	n, ok := e.calls.Load(runID + ".post")
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// TestOnCompletionRunHasOneExecutor: while workers poll the queue, every
// ON_COMPLETION delivery is executed by its receiver alone (docs/architecture.md,
// "Exactly one executor"): the workers make no attempt at these runs, each run has one
// attempt, the sink sees each run's call once, and no queue entry is left.
func TestOnCompletionRunHasOneExecutor(t *testing.T) {
	e := newInlineEnv(t, automation.RunPolicy{})
	e.startWorkers(t)
	flowID := e.syncFlow(t, "inline/once")

	const senders, each = 8, 6
	type answer struct {
		status int
		runID  string
		body   string
		err    error
	}
	answers := make(chan answer, senders*each)
	var wg sync.WaitGroup
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				n := s*each + i
				resp, err := http.Post(e.hook.URL+"/webhook/inline/once", "application/json", strings.NewReader(fmt.Sprintf(`{"n":"%d"}`, n)))
				if err != nil {
					answers <- answer{err: err}
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				answers <- answer{resp.StatusCode, resp.Header.Get("X-Run-Id"), fmt.Sprintf("%d|%s", n, b), err}
			}
		})
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		if a.err != nil {
			t.Fatal(a.err)
		}
		n, body, _ := strings.Cut(a.body, "|")
		var got map[string]any
		if a.status != 200 || json.Unmarshal([]byte(body), &got) != nil || got["n"] != n || got["sink"] != true {
			t.Fatalf("delivery %s: %d %s; want 200 with the run's answer", n, a.status, body)
		}
		r := e.fe.Store
		run, err := r.Run(context.Background(), e.project.ID, flowID, a.runID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != automation.RunSucceeded || run.Attempts != 1 {
			t.Fatalf("run %s: %s after %d attempts; want SUCCEEDED after 1", a.runID, run.Status, run.Attempts)
		}
		if c := e.sinkCalls(a.runID); c != 1 {
			t.Fatalf("run %s called the sink %d times, want once", a.runID, c)
		}
	}
	if n := e.worker.attempts.Load(); n != 0 {
		t.Fatalf("workers made %d attempts at ON_COMPLETION runs; want none (the receiver executes them)", n)
	}
	pending, parked, err := e.fe.Store.QueueStats(context.Background())
	if err != nil || pending != 0 || parked != 0 {
		t.Fatalf("queue after the deliveries: %d pending, %d parked, %v; want empty", pending, parked, err)
	}
}

// TestOnCompletionRunOutlivesItsReceiver: a receiver that stored its run
// claimed and then died (it never executes the run) leaves it to the
// workers, which take it up once the receiver's lease has run out, and
// only then: the run succeeds with the dead attempt counted.
func TestOnCompletionRunOutlivesItsReceiver(t *testing.T) {
	// A short run timeout makes a short lease (RunPolicy.Lease).
	policy := automation.RunPolicy{Timeout: 400 * time.Millisecond}
	e := newInlineEnv(t, policy)
	flowID := e.syncFlow(t, "inline/crash")
	ctx := context.Background()

	f, err := e.fe.Svc.RouteFlow(ctx, "inline/crash", "POST")
	if err != nil {
		t.Fatal(err)
	}
	// What the receiver's acceptance does before it executes: the run is
	// durable and claimed by the receiver's attempt, in one write. The
	// receiver then dies.
	claimedAt := time.Now().Truncate(time.Millisecond) // leases are whole milliseconds
	r, err := e.fe.Store.EnqueueClaimed(ctx, automation.Run{ID: "run_deadreceiver", Project: f.Project, FlowID: f.ID,
		Status: automation.RunRunning, Steps: []automation.StepResult{}, Created: claimedAt,
		Trigger: automation.TriggerData{Method: "POST", Headers: map[string]string{}, Query: map[string]string{},
			Body: json.RawMessage(`{"n":"7"}`)}}, claimedAt, policy.Lease())
	if err != nil {
		t.Fatal(err)
	}
	if r.LeaseToken == "" || r.Attempts != 1 {
		t.Fatalf("EnqueueClaimed = attempts %d, token %q; want the run claimed", r.Attempts, r.LeaseToken)
	}
	e.startWorkers(t)

	var got automation.Run
	testwait.For(t, testwait.Hang, "a worker to take up run "+r.ID+" after the dead receiver's lease", func() bool {
		if got, err = e.fe.Store.Run(ctx, e.project.ID, flowID, r.ID); err != nil {
			t.Fatal(err)
		}
		return got.Status.Final()
	})
	if got.Status != automation.RunSucceeded || got.Attempts != 2 {
		t.Fatalf("run = %s after %d attempts; want SUCCEEDED after 2 (the dead receiver's and a worker's)", got.Status, got.Attempts)
	}
	if got.Started == nil || got.Started.Before(claimedAt.Add(policy.Lease())) {
		t.Fatalf("the worker's attempt started at %v, before the receiver's lease ran out at %v", got.Started, claimedAt.Add(policy.Lease()))
	}
	if c := e.sinkCalls(r.ID); c != 1 {
		t.Fatalf("the sink saw the run %d times, want once", c)
	}
	if n := e.worker.attempts.Load(); n != 1 {
		t.Fatalf("workers made %d attempts, want 1", n)
	}
}

// TestOnCompletionFailureSettlesItsEntry: an inline attempt that fails for
// good (a 4xx is permanent) answers 500 with the run's error and settles
// its queue entry itself: nothing is left for a worker.
func TestOnCompletionFailureSettlesItsEntry(t *testing.T) {
	e := newInlineEnv(t, automation.RunPolicy{})
	e.startWorkers(t)
	flowID := e.syncFlowTo(t, "inline/refused", e.sink.URL+"/refuse")
	resp, err := http.Post(e.hook.URL+"/webhook/inline/refused", "application/json", strings.NewReader(`{"n":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 500 || !strings.Contains(string(b), "RUN_FAILED") {
		t.Fatalf("delivery = %d %s; want 500 RUN_FAILED", resp.StatusCode, b)
	}
	runID := resp.Header.Get("X-Run-Id")
	run, err := e.fe.Store.Run(context.Background(), e.project.ID, flowID, runID)
	if err != nil || run.Status != automation.RunFailed || run.Attempts != 1 {
		t.Fatalf("run = %s after %d attempts, %v; want FAILED after 1", run.Status, run.Attempts, err)
	}
	pending, parked, err := e.fe.Store.QueueStats(context.Background())
	if err != nil || pending != 0 || parked != 0 {
		t.Fatalf("queue after a failed inline run: %d pending, %d parked, %v; want empty", pending, parked, err)
	}
	if n := e.worker.attempts.Load(); n != 0 {
		t.Fatalf("workers made %d attempts, want none", n)
	}
}
