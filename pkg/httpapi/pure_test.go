package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/runworker"
	"flowservice/pkg/sqlitestore"
)

// pureSyncSteps is flowbench's ON_COMPLETION flow: SET, SET, RESPOND, no
// side effects.
const pureSyncSteps = `[{"name":"shape","type":"SET","values":{"n":"{{ trigger.body.n }}"}},
	{"name":"more","type":"SET","values":{"twice":"{{ steps.shape.n }}{{ steps.shape.n }}"}},
	{"name":"reply","type":"RESPOND","statusCode":201,"body":{"n":"{{ steps.shape.n }}","twice":"{{ steps.more.twice }}"}}]`

// gatedRuns is the run store as the receiver sees it, with its writes
// counted and, on demand, held: insertEntered is told when the one-commit
// write starts, which waits for insertGo before it goes to the store;
// finishGo, when set, holds FinishRun (the usual path's last write).
type gatedRuns struct {
	automation.RunStore
	fr                 automation.FinishedRuns
	inserts, finishes  atomic.Int64
	insertEntered      chan struct{}
	insertGo, finishGo chan struct{}
	insertErr          error
	claimedEnqueues    *atomic.Int64
	enqueues           *atomic.Int64
}

func (g *gatedRuns) InsertFinishedRun(ctx context.Context, r automation.Run) error {
	if g.insertEntered != nil {
		g.insertEntered <- struct{}{}
		<-g.insertGo
	}
	if g.insertErr != nil {
		return g.insertErr
	}
	g.inserts.Add(1)
	return g.fr.InsertFinishedRun(ctx, r)
}

func (g *gatedRuns) FinishRun(ctx context.Context, r automation.Run) error {
	if g.finishGo != nil {
		<-g.finishGo
	}
	g.finishes.Add(1)
	return g.RunStore.FinishRun(ctx, r)
}

// countedQueue is the pool's queue (which keeps the store's ON_COMPLETION
// fast path), with its enqueues counted.
type countedQueue struct {
	automation.RunQueue
	automation.InlineQueue
	g *gatedRuns
}

func (q *countedQueue) Enqueue(ctx context.Context, r automation.Run) error {
	q.g.enqueues.Add(1)
	return q.RunQueue.Enqueue(ctx, r)
}

func (q *countedQueue) EnqueueClaimed(ctx context.Context, r automation.Run, now time.Time, lease time.Duration) (automation.Run, error) {
	q.g.claimedEnqueues.Add(1)
	return q.InlineQueue.EnqueueClaimed(ctx, r, now, lease)
}

// pureEnv is inlineEnv's path (workflow builder receiver, worker pool,
// one SQLite store) with the run store gated.
type pureEnv struct {
	*inlineEnv
	g *gatedRuns
}

func newPureEnv(t *testing.T, opts flowtest.Options, hook HookConfig) *pureEnv {
	t.Helper()
	g := &gatedRuns{claimedEnqueues: new(atomic.Int64), enqueues: new(atomic.Int64)}
	e := &inlineEnv{}
	opts.Runs = func(rs automation.RunStore) automation.RunStore {
		g.RunStore = rs
		g.fr, _ = rs.(automation.FinishedRuns)
		return g
	}
	opts.Queue = func(s *sqlitestore.Store) automation.RunQueue {
		e.pool = runworker.New(s, runworker.Config{Workers: 2, Poll: 5 * time.Millisecond, Policy: opts.Policy})
		n := e.pool.Notifying(s)
		return &countedQueue{RunQueue: n, InlineQueue: n.(automation.InlineQueue), g: g}
	}
	e.fe = flowtest.New(t, opts)
	e.project, e.key = e.fe.Project(t, "pure", automation.PlanEnterprise)
	e.worker = &countingExecutor{svc: e.fe.Svc}
	e.api = serve(t, NewAPI(e.fe.Svc, slog.New(slog.DiscardHandler)))
	if hook.SyncTimeout == 0 {
		hook.SyncTimeout = 10 * time.Second
	}
	e.hook = serve(t, NewWorkflowHook(e.fe.Svc, hook))
	e.startWorkers(t)
	return &pureEnv{inlineEnv: e, g: g}
}

// flow makes an ACTIVE workflow builder flow on POST path.
func (e *pureEnv) flow(t *testing.T, path, webhook, steps string) string {
	t.Helper()
	f := createFlow(t, e.api, e.key, workflowFlow(path, "POST", webhook, steps))
	call(t, e.api, "POST", "/api/v1/flows/"+f.ID+"/enable", e.key, "").into(t, 200, &flowView{})
	return f.ID
}

type hookAnswer struct {
	status int
	runID  string
	body   string
}

func (e *pureEnv) post(t *testing.T, path, body string) hookAnswer {
	t.Helper()
	resp, err := http.Post(e.hook.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return hookAnswer{resp.StatusCode, resp.Header.Get("X-Run-Id"), string(b)}
}

func (e *pureEnv) run(t *testing.T, flowID, runID string) automation.Run {
	t.Helper()
	r, err := e.fe.Store.Run(context.Background(), e.project.ID, flowID, runID)
	if err != nil {
		t.Fatalf("run %s: %v", runID, err)
	}
	return r
}

// TestPureOnCompletionOneCommit: over HTTP, with workers polling, an
// ON_COMPLETION flow without side effects answers with its RESPOND step
// from one store write: no queue entry, no claim, no finish, no worker.
// A failing run answers 500 RUN_FAILED as on the usual path, recorded
// FAILED.
func TestPureOnCompletionOneCommit(t *testing.T) {
	e := newPureEnv(t, flowtest.Options{}, HookConfig{})
	flowID := e.flow(t, "pure/ok", `,"responseMode":"ON_COMPLETION"`, pureSyncSteps)
	for _, n := range []string{"1", "2", "3"} {
		a := e.post(t, "/webhook/pure/ok", `{"n":"`+n+`"}`)
		var got map[string]string
		if a.status != 201 || json.Unmarshal([]byte(a.body), &got) != nil || got["n"] != n || got["twice"] != n+n || a.runID == "" {
			t.Fatalf("delivery %s = %d %s (run %q); want 201 from the RESPOND step", n, a.status, a.body, a.runID)
		}
		if r := e.run(t, flowID, a.runID); r.Status != automation.RunSucceeded || r.Attempts != 1 || len(r.Steps) != 3 {
			t.Fatalf("run %s = %s after %d attempts, %d steps; want SUCCEEDED after 1 with 3 steps", a.runID, r.Status, r.Attempts, len(r.Steps))
		}
	}
	if i, c, q, f := e.g.inserts.Load(), e.g.claimedEnqueues.Load(), e.g.enqueues.Load(), e.g.finishes.Load(); i != 3 || c+q+f != 0 {
		t.Fatalf("writes: %d one-commit inserts, %d claimed enqueues, %d enqueues, %d finishes; want 3 inserts only", i, c, q, f)
	}
	if n := e.worker.attempts.Load(); n != 0 {
		t.Fatalf("workers made %d attempts; want none", n)
	}

	failing := e.flow(t, "pure/fails", `,"responseMode":"ON_COMPLETION"`,
		`[{"name":"v","type":"VERIFY_SIGNATURE","signature":{"header":"X-Sig","prefix":"sha256=","secret":"s3cret"}}]`)
	a := e.post(t, "/webhook/pure/fails", `{"n":"1"}`)
	if a.status != 500 || !strings.Contains(a.body, "RUN_FAILED") || a.runID == "" {
		t.Fatalf("unsigned delivery = %d %s; want 500 RUN_FAILED naming the run", a.status, a.body)
	}
	if r := e.run(t, failing, a.runID); r.Status != automation.RunFailed || r.Attempts != 1 || !strings.Contains(a.body, r.Error) {
		t.Fatalf("failed run = %s after %d attempts (%q); want FAILED after 1, its error in the answer", r.Status, r.Attempts, r.Error)
	}
	pending, parked, err := e.fe.Store.QueueStats(context.Background())
	if err != nil || pending != 0 || parked != 0 {
		t.Fatalf("queue: %d pending, %d parked, %v; want empty", pending, parked, err)
	}
}

// TestPureAnswerAfterCommit: the answer waits for the one write; when the
// receiver reads it, the run is durable in the store. A write that fails
// (as a crash before the commit would) is answered with no run and no 2xx,
// and leaves no record: the sender tries again.
func TestPureAnswerAfterCommit(t *testing.T) {
	e := newPureEnv(t, flowtest.Options{}, HookConfig{})
	flowID := e.flow(t, "pure/durable", `,"responseMode":"ON_COMPLETION"`, pureSyncSteps)
	e.g.insertEntered, e.g.insertGo = make(chan struct{}), make(chan struct{})
	answered := make(chan hookAnswer, 1)
	go func() {
		resp, err := http.Post(e.hook.URL+"/webhook/pure/durable", "application/json", strings.NewReader(`{"n":"5"}`))
		if err != nil {
			answered <- hookAnswer{status: -1, body: err.Error()}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answered <- hookAnswer{resp.StatusCode, resp.Header.Get("X-Run-Id"), string(b)}
	}()
	<-e.g.insertEntered
	select {
	case a := <-answered:
		t.Fatalf("answered %d %s before the run's write", a.status, a.body)
	default:
	}
	page := call(t, e.api, "GET", "/api/v1/flows/"+flowID+"/runs", e.key, "")
	var runs struct {
		Data []automation.Run `json:"data"`
	}
	page.into(t, 200, &runs)
	if len(runs.Data) != 0 {
		t.Fatalf("%d runs listed before the run's write; want none", len(runs.Data))
	}
	close(e.g.insertGo)
	a := <-answered
	if a.status != 201 {
		t.Fatalf("answer after the write = %d %s; want 201", a.status, a.body)
	}
	if r := e.run(t, flowID, a.runID); r.Status != automation.RunSucceeded {
		t.Fatalf("run when answered = %s; want SUCCEEDED, stored", r.Status)
	}

	e.g.insertEntered, e.g.insertErr = nil, automation.Unavailable("STORE_UNAVAILABLE", "the store is gone")
	a = e.post(t, "/webhook/pure/durable", `{"n":"6"}`)
	if a.status != http.StatusServiceUnavailable || a.runID != "" {
		t.Fatalf("delivery whose write failed = %d %s (run %q); want 503 and no run", a.status, a.body, a.runID)
	}
	call(t, e.api, "GET", "/api/v1/flows/"+flowID+"/runs", e.key, "").into(t, 200, &runs)
	if len(runs.Data) != 1 {
		t.Fatalf("%d runs after a failed write; want only the first", len(runs.Data))
	}
}

// TestPureOverBudgetAnswers504: a run over its in-memory budget takes the
// usual path, and a run that then outlasts the receiver's timeout is
// answered 504 RUN_TIMEOUT, named, and goes on recorded.
func TestPureOverBudgetAnswers504(t *testing.T) {
	e := newPureEnv(t, flowtest.Options{PureBudget: time.Nanosecond}, HookConfig{SyncTimeout: 200 * time.Millisecond})
	flowID := e.flow(t, "pure/late", `,"responseMode":"ON_COMPLETION"`, pureSyncSteps)
	e.g.finishGo = make(chan struct{})
	a := e.post(t, "/webhook/pure/late", `{"n":"8"}`)
	close(e.g.finishGo)
	if a.status != http.StatusGatewayTimeout || !strings.Contains(a.body, "RUN_TIMEOUT") || a.runID == "" {
		t.Fatalf("delivery over budget and timeout = %d %s; want 504 RUN_TIMEOUT naming the run", a.status, a.body)
	}
	testwait.For(t, testwait.Hang, "run "+a.runID+" to finish after the 504", func() bool {
		return e.run(t, flowID, a.runID).Status.Final()
	})
	if r := e.run(t, flowID, a.runID); r.Status != automation.RunSucceeded || r.Attempts != 1 {
		t.Fatalf("run after the 504 = %s after %d attempts; want SUCCEEDED after 1", r.Status, r.Attempts)
	}
	if i, c := e.g.inserts.Load(), e.g.claimedEnqueues.Load(); i != 0 || c != 1 {
		t.Fatalf("writes: %d one-commit inserts, %d claimed enqueues; want the usual path", i, c)
	}
}

// TestPureTestTriggerAndImmediateKeepTheirPaths: a delivery to the test URL
// and an IMMEDIATE flow's delivery do not take the one-commit path.
func TestPureTestTriggerAndImmediateKeepTheirPaths(t *testing.T) {
	e := newPureEnv(t, flowtest.Options{}, HookConfig{})
	flowID := e.flow(t, "pure/test", `,"responseMode":"ON_COMPLETION"`, pureSyncSteps)
	call(t, e.api, "POST", "/api/v1/flows/"+flowID+"/webhook/test", e.key, "").into(t, 200, &map[string]any{})
	a := e.post(t, "/webhook-test/pure/test", `{"n":"9"}`)
	if a.status != 201 || !strings.Contains(a.body, `"99"`) {
		t.Fatalf("test URL delivery = %d %s; want the run's answer", a.status, a.body)
	}
	if i, c := e.g.inserts.Load(), e.g.claimedEnqueues.Load(); i != 0 || c != 1 {
		t.Fatalf("test URL writes: %d one-commit inserts, %d claimed enqueues; want the usual path", i, c)
	}
	e.flow(t, "pure/immediate", `,"responseMode":"IMMEDIATE"`, pureSyncSteps)
	a = e.post(t, "/webhook/pure/immediate", `{"n":"1"}`)
	if a.status != 200 || !strings.Contains(a.body, `"RUNNING"`) {
		t.Fatalf("IMMEDIATE delivery = %d %s; want 200 RUNNING", a.status, a.body)
	}
	if i, q := e.g.inserts.Load(), e.g.enqueues.Load(); i != 0 || q != 1 {
		t.Fatalf("IMMEDIATE writes: %d one-commit inserts, %d enqueues; want it queued", i, q)
	}
}
