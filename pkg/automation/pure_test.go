package automation_test

// The one-commit path of ON_COMPLETION runs without side effects
// (Service.ReceiveWebhookWithin, RunRuntime.Finished), against the usual
// path: stored first, claimed, executed, finished.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/sqlitestore"
)

// pureSteps is flowbench's sync flow: SET, SET, RESPOND.
const pureSteps = `[{"name":"shape","type":"SET","values":{"n":"{{ trigger.body.n }}"}},
	{"name":"more","type":"SET","values":{"twice":"{{ steps.shape.n }}{{ steps.shape.n }}"}},
	{"name":"reply","type":"RESPOND","statusCode":201,"body":{"n":"{{ steps.shape.n }}","twice":"{{ steps.more.twice }}"}}]`

// writeCounts is what reached the store on the way to a run: the run store
// and the queue as the Service sees them, counting their writes.
type writeCounts struct {
	inserted, enqueued, claimed, finished atomic.Int64
	// failInsert makes InsertFinishedRun fail without writing, as a crash
	// before its commit would leave the store.
	failInsert error
	// holdFinish, when set, blocks FinishRun until it is closed.
	holdFinish chan struct{}
}

type countingRuns struct {
	automation.RunStore
	fr automation.FinishedRuns
	c  *writeCounts
}

func (r *countingRuns) InsertFinishedRun(ctx context.Context, run automation.Run) error {
	if r.c.failInsert != nil {
		return r.c.failInsert
	}
	r.c.inserted.Add(1)
	return r.fr.InsertFinishedRun(ctx, run)
}

func (r *countingRuns) FinishRun(ctx context.Context, run automation.Run) error {
	if r.c.holdFinish != nil {
		<-r.c.holdFinish
	}
	r.c.finished.Add(1)
	return r.RunStore.FinishRun(ctx, run)
}

type countingQueue struct {
	*sqlitestore.Store
	c *writeCounts
}

func (q *countingQueue) Enqueue(ctx context.Context, r automation.Run) error {
	q.c.enqueued.Add(1)
	return q.Store.Enqueue(ctx, r)
}

func (q *countingQueue) EnqueueClaimed(ctx context.Context, r automation.Run, now time.Time, lease time.Duration) (automation.Run, error) {
	q.c.claimed.Add(1)
	return q.Store.EnqueueClaimed(ctx, r, now, lease)
}

// pureEnv is a Service whose store writes are counted; opts.Runs and
// opts.Queue are set here.
type pureEnv struct {
	*flowtest.Env
	c       *writeCounts
	project automation.Project
}

func newPureEnv(t *testing.T, opts flowtest.Options) *pureEnv {
	t.Helper()
	c := &writeCounts{}
	opts.Runs = func(rs automation.RunStore) automation.RunStore {
		fr, _ := rs.(automation.FinishedRuns)
		return &countingRuns{RunStore: rs, fr: fr, c: c}
	}
	opts.Queue = func(s *sqlitestore.Store) automation.RunQueue { return &countingQueue{Store: s, c: c} }
	fe := flowtest.New(t, opts)
	p, _ := fe.Project(t, "pure", automation.PlanEnterprise)
	return &pureEnv{Env: fe, c: c, project: p}
}

// flow makes an ACTIVE workflow builder flow on POST path, with the
// webhook fields and flow fields given as JSON fragments, and returns it as
// the receiver finds it (RouteFlow: secrets revealed).
func (e *pureEnv) flow(t *testing.T, path, webhook, steps, onError string) automation.Flow {
	t.Helper()
	if onError == "" {
		onError = "null"
	}
	var in automation.FlowInput
	doc := fmt.Sprintf(`{"name":"pure","engine":"WORKFLOW_BUILDER","steps":%s,"onError":%s,
		"trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST","path":%q%s}}}`, steps, onError, path, webhook)
	if err := json.Unmarshal([]byte(doc), &in); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f, err := e.Svc.CreateFlow(ctx, e.project, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.EnableFlow(ctx, e.project, f.ID); err != nil {
		t.Fatal(err)
	}
	rf, err := e.Svc.RouteFlow(ctx, path, "POST")
	if err != nil {
		t.Fatal(err)
	}
	return rf
}

const onCompletion = `,"responseMode":"ON_COMPLETION"`

func delivery(body string, headers ...string) automation.TriggerData {
	h := map[string]string{"content-type": "application/json"}
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	return automation.TriggerData{Method: "POST", Headers: h, Query: map[string]string{}, Body: json.RawMessage(body)}
}

// receive is what the workflow builder receiver does with an ON_COMPLETION
// delivery: accept it within wait, then wait for the outcome.
func (e *pureEnv) receive(t *testing.T, f automation.Flow, td automation.TriggerData, wait time.Duration) (accepted, answered automation.Run) {
	t.Helper()
	ctx := context.Background()
	accepted, err := e.Svc.ReceiveWebhookWithin(ctx, f, td, wait)
	if err != nil {
		t.Fatalf("ReceiveWebhookWithin: %v", err)
	}
	answered, err = e.Svc.AwaitRun(ctx, accepted, wait)
	if err != nil {
		t.Fatalf("AwaitRun: %v", err)
	}
	return accepted, answered
}

func (e *pureEnv) stored(t *testing.T, r automation.Run) automation.Run {
	t.Helper()
	got, err := e.Store.Run(context.Background(), r.Project, r.FlowID, r.ID)
	if err != nil {
		t.Fatalf("stored run %s: %v", r.ID, err)
	}
	return got
}

func (e *pureEnv) queueEmpty(t *testing.T) {
	t.Helper()
	pending, parked, err := e.Store.QueueStats(context.Background())
	if err != nil || pending != 0 || parked != 0 {
		t.Fatalf("queue: %d pending, %d parked, %v; want empty", pending, parked, err)
	}
}

func TestPureFlow(t *testing.T) {
	step := func(typ automation.StepType, inner ...automation.Step) automation.Step {
		s := automation.Step{Name: string(typ), Type: typ}
		switch typ {
		case automation.StepSwitch:
			s.Cases = []automation.Case{{When: "true", Steps: inner}}
		case automation.StepForEach:
			s.Steps = inner
		}
		return s
	}
	set, respond := step(automation.StepSet), step(automation.StepRespond)
	for _, tc := range []struct {
		name    string
		steps   []automation.Step
		onError []automation.Step
		pure    bool
	}{
		{"SET SET RESPOND", []automation.Step{set, set, respond}, nil, true},
		{"FILTER VERIFY_SIGNATURE", []automation.Step{step(automation.StepFilter), step(automation.StepVerifySignature)}, []automation.Step{set}, true},
		{"nested pure", []automation.Step{step(automation.StepSwitch, step(automation.StepForEach, set)), respond}, nil, true},
		{"no steps", nil, nil, true},
		{"HTTP", []automation.Step{set, step(automation.StepHTTP)}, nil, false},
		{"CODE", []automation.Step{step(automation.StepCode)}, nil, false},
		{"STORE", []automation.Step{step(automation.StepStore)}, nil, false},
		{"WAIT", []automation.Step{step(automation.StepWait)}, nil, false},
		{"HTTP in a SWITCH case", []automation.Step{step(automation.StepSwitch, set, step(automation.StepHTTP))}, nil, false},
		{"CODE in a FOR_EACH", []automation.Step{step(automation.StepForEach, step(automation.StepCode))}, nil, false},
		{"HTTP in a SWITCH default", []automation.Step{{Name: "route", Type: automation.StepSwitch, Default: []automation.Step{step(automation.StepHTTP)}}}, nil, false},
		{"HTTP in onError", []automation.Step{set}, []automation.Step{step(automation.StepHTTP)}, false},
		{"unknown type", []automation.Step{step("LATER")}, nil, false},
	} {
		f := automation.Flow{Steps: tc.steps, OnError: tc.onError}
		if got := automation.PureFlow(f); got != tc.pure {
			t.Errorf("%s: PureFlow = %v, want %v", tc.name, got, tc.pure)
		}
	}
}

// TestPureRunOneCommit: the run of a flow without side effects comes back
// final from the receiver's accept, stored in one write (no queue entry,
// no claim, no finish), answered with its RESPOND step, and counted in
// the flow's stats.
func TestPureRunOneCommit(t *testing.T) {
	e := newPureEnv(t, flowtest.Options{})
	f := e.flow(t, "pure/once", onCompletion, pureSteps, "")
	accepted, answered := e.receive(t, f, delivery(`{"n":"7"}`), 10*time.Second)
	if accepted.Status != automation.RunSucceeded || answered.ID != accepted.ID {
		t.Fatalf("accepted %s, answered %s; want the run final at once", accepted.Status, answered.ID)
	}
	if r := answered.Response; r == nil || r.StatusCode != 201 || !jsonEqual(r.Body, `{"n":"7","twice":"77"}`) {
		t.Fatalf("answer = %+v; want 201 from the RESPOND step", r)
	}
	if n, q, c, fin := e.c.inserted.Load(), e.c.enqueued.Load(), e.c.claimed.Load(), e.c.finished.Load(); n != 1 || q != 0 || c != 0 || fin != 0 {
		t.Fatalf("writes: %d finished inserts, %d enqueues, %d claimed enqueues, %d finishes; want one insert only", n, q, c, fin)
	}
	got := e.stored(t, answered)
	if got.Status != automation.RunSucceeded || got.Attempts != 1 || len(got.Steps) != 3 || got.DurationMs == nil {
		t.Fatalf("stored run = %+v; want SUCCEEDED after 1 attempt with its 3 steps", got)
	}
	e.queueEmpty(t)
	fl, err := e.Svc.Flow(context.Background(), e.project, f.ID)
	if err != nil || fl.RunCount != 1 || fl.SuccessRate != 100 || fl.LastRun == nil {
		t.Fatalf("flow stats = runCount %d, successRate %v, lastRun %v, %v; want the run counted", fl.RunCount, fl.SuccessRate, fl.LastRun, err)
	}
	// A flow with a side effect, and an IMMEDIATE flow, keep their paths.
	sink := flowtest.CallStep("http://127.0.0.1:1/")
	callJSON, _ := json.Marshal([]automation.Step{sink})
	impure := e.flow(t, "pure/not", onCompletion, string(callJSON), "")
	r, err := e.Svc.ReceiveWebhookWithin(context.Background(), impure, delivery(`{}`), time.Second)
	if err != nil || r.Status != automation.RunRunning || r.LeaseToken == "" || e.c.claimed.Load() != 1 {
		t.Fatalf("flow with an HTTP step = %s token %q, %v, %d claimed enqueues; want it stored claimed", r.Status, r.LeaseToken, err, e.c.claimed.Load())
	}
	immediate := e.flow(t, "pure/immediate", `,"responseMode":"IMMEDIATE"`, pureSteps, "")
	r, err = e.Svc.ReceiveWebhookWithin(context.Background(), immediate, delivery(`{}`), time.Second)
	if err != nil || r.Status != automation.RunRunning || r.LeaseToken != "" || e.c.enqueued.Load() != 1 {
		t.Fatalf("IMMEDIATE flow = %s token %q, %v, %d enqueues; want it queued", r.Status, r.LeaseToken, err, e.c.enqueued.Load())
	}
	if e.c.inserted.Load() != 1 {
		t.Fatalf("%d finished inserts; want only the pure ON_COMPLETION run's", e.c.inserted.Load())
	}
}

func jsonEqual(raw json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(raw, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && cmp.Equal(a, b)
}

// sameShape compares runs field by field, times and durations by presence
// only (two executions differ in when), IDs not at all.
var sameShape = []cmp.Option{
	cmp.Comparer(func(a, b *time.Time) bool { return (a == nil) == (b == nil) }),
	cmp.Comparer(func(a, b *int64) bool { return (a == nil) == (b == nil) }),
	cmp.Comparer(func(a, b time.Time) bool { return a.IsZero() == b.IsZero() }),
	cmp.Comparer(func(a, b json.RawMessage) bool {
		var x, y any
		return (len(a) == 0) == (len(b) == 0) && (len(a) == 0 || (json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && cmp.Equal(x, y)))
	}),
	cmp.FilterPath(func(p cmp.Path) bool {
		switch p.Last().String() {
		case ".ID", ".FlowID", ".Project", ".LeaseToken", ".Interrupted":
			return true
		case ".DurationMs": // a step's, in whole milliseconds; the run's is a pointer, compared above
			return p.Last().Type().Kind() == reflect.Int64
		}
		return false
	}, cmp.Ignore()),
}

// TestPureRunSameRecordAsUsualPath: for each kind of outcome (succeeded,
// stopped by a FILTER, failed with onError steps, an expression error),
// the one-commit path stores and answers the same run as the usual path
// (stored claimed, executed, finished), and counts it the same.
func TestPureRunSameRecordAsUsualPath(t *testing.T) {
	verify := `[{"name":"v","type":"VERIFY_SIGNATURE","signature":{"header":"X-Sig","prefix":"sha256=","secret":"s3cret"}},` +
		`{"name":"after","type":"SET","values":{"x":1}}]`
	cases := []struct {
		name, steps, onError string
		status               automation.RunStatus
	}{
		{"succeeded", pureSteps, "", automation.RunSucceeded},
		{"filtered", `[{"name":"shape","type":"SET","values":{"n":"{{ trigger.body.n }}"}},
			{"name":"gate","type":"FILTER","condition":"trigger.body.n == 'other'"},
			{"name":"reply","type":"RESPOND","body":{"n":"never"}}]`, "", automation.RunSucceeded},
		{"signature fails, onError runs", verify, `[{"name":"note","type":"SET","values":{"why":"{{ error.message }}"}}]`, automation.RunFailed},
		{"expression error", `[{"name":"gate","type":"FILTER","condition":"trigger.body.n.nope.deeper > 1"}]`, "", automation.RunFailed},
		{"switch and for each", `[{"name":"route","type":"SWITCH","cases":[{"when":"trigger.body.n == '7'","steps":[
			{"name":"each","type":"FOR_EACH","items":"[1, 2]","steps":[{"name":"inner","type":"SET","values":{"i":"{{ item }}"}}]}]}]},
			{"name":"reply","type":"RESPOND","body":{"items":"{{ steps.each.items }}"}}]`, "", automation.RunSucceeded},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pure, usual := newPureEnv(t, flowtest.Options{}), newPureEnv(t, flowtest.Options{NoFinishedRuns: true})
			path := fmt.Sprintf("same/%d", i)
			td := delivery(`{"n":"7"}`)
			_, a := pure.receive(t, pure.flow(t, path, onCompletion, tc.steps, tc.onError), td, 10*time.Second)
			_, b := usual.receive(t, usual.flow(t, path, onCompletion, tc.steps, tc.onError), td, 10*time.Second)
			if pure.c.inserted.Load() != 1 || usual.c.inserted.Load() != 0 || usual.c.claimed.Load() != 1 {
				t.Fatalf("paths: pure %d inserts, usual %d inserts and %d claimed enqueues; want one each way",
					pure.c.inserted.Load(), usual.c.inserted.Load(), usual.c.claimed.Load())
			}
			if a.Status != tc.status {
				t.Fatalf("status = %s (%s), want %s", a.Status, a.Error, tc.status)
			}
			if tc.name == "filtered" && a.StoppedAt != "gate" {
				t.Fatalf("stoppedAt = %q, want gate", a.StoppedAt)
			}
			if tc.onError != "" && (len(a.OnErrorSteps) != 1 || a.OnErrorSteps[0].Status != automation.StepSucceeded) {
				t.Fatalf("onErrorSteps = %+v, want the onError step run", a.OnErrorSteps)
			}
			if d := cmp.Diff(b, a, sameShape...); d != "" {
				t.Errorf("answered run, usual (-) vs one commit (+):\n%s", d)
			}
			if d := cmp.Diff(usual.stored(t, b), pure.stored(t, a), sameShape...); d != "" {
				t.Errorf("stored run, usual (-) vs one commit (+):\n%s", d)
			}
			pure.queueEmpty(t)
			usual.queueEmpty(t)
			ctx := context.Background()
			fa, _ := pure.Svc.Flow(ctx, pure.project, a.FlowID)
			fb, _ := usual.Svc.Flow(ctx, usual.project, b.FlowID)
			if d := cmp.Diff(fb.Stats, fa.Stats, sameShape...); d != "" || fa.Stats.Finished != 1 {
				t.Errorf("flow stats, usual (-) vs one commit (+), want one run counted:\n%s", d)
			}
		})
	}
}

// TestPureRunOverBudget: a run that does not finish within the budget is
// dropped from memory and takes the usual path: stored claimed, executed
// again (safe: nothing outside saw it) and finished, recorded like any.
// Within a wait shorter than the budget, the wait is the budget.
func TestPureRunOverBudget(t *testing.T) {
	e := newPureEnv(t, flowtest.Options{PureBudget: time.Nanosecond})
	f := e.flow(t, "pure/slow", onCompletion, pureSteps, "")
	accepted, answered := e.receive(t, f, delivery(`{"n":"3"}`), 10*time.Second)
	if accepted.Status != automation.RunRunning || accepted.LeaseToken == "" {
		t.Fatalf("accepted = %s token %q; want the run stored claimed, RUNNING", accepted.Status, accepted.LeaseToken)
	}
	if answered.Status != automation.RunSucceeded || answered.Response == nil || !jsonEqual(answered.Response.Body, `{"n":"3","twice":"33"}`) {
		t.Fatalf("answered = %s %+v; want the usual path's answer", answered.Status, answered.Response)
	}
	if n, c, fin := e.c.inserted.Load(), e.c.claimed.Load(), e.c.finished.Load(); n != 0 || c != 1 || fin != 1 {
		t.Fatalf("writes: %d finished inserts, %d claimed enqueues, %d finishes; want the usual path's", n, c, fin)
	}
	if got := e.stored(t, answered); got.Status != automation.RunSucceeded || got.Attempts != 1 {
		t.Fatalf("stored = %s after %d attempts; want SUCCEEDED after 1", got.Status, got.Attempts)
	}
	e.queueEmpty(t)

	// The default budget, under a wait of a nanosecond: the usual path,
	// and the run goes on recorded after the wait.
	short := newPureEnv(t, flowtest.Options{})
	f = short.flow(t, "pure/short", onCompletion, pureSteps, "")
	r, err := short.Svc.ReceiveWebhookWithin(context.Background(), f, delivery(`{"n":"4"}`), time.Nanosecond)
	if err != nil || r.Status != automation.RunRunning || r.LeaseToken == "" || short.c.inserted.Load() != 0 {
		t.Fatalf("accepted within 1ns = %s token %q, %v, %d inserts; want it stored claimed", r.Status, r.LeaseToken, err, short.c.inserted.Load())
	}
	if _, err := short.Svc.AwaitRun(context.Background(), r, time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, testwait.Hang, "run "+r.ID+" to finish after the answer", func() bool {
		return short.stored(t, r).Status.Final()
	})
	if got := short.stored(t, r); got.Status != automation.RunSucceeded || got.Attempts != 1 {
		t.Fatalf("run after the answer = %s after %d attempts; want SUCCEEDED after 1", got.Status, got.Attempts)
	}
}

// TestPureRunUnstoredIsUnanswered: when the one write does not happen (a
// store that fails, as a crash before the commit), the receiver gets an
// error to answer with, not a run, and nothing is recorded: the sender,
// not answered 200, sends again.
func TestPureRunUnstoredIsUnanswered(t *testing.T) {
	e := newPureEnv(t, flowtest.Options{})
	e.c.failInsert = automation.Unavailable("STORE_UNAVAILABLE", "the store is gone")
	f := e.flow(t, "pure/lost", onCompletion, pureSteps, "")
	r, err := e.Svc.ReceiveWebhookWithin(context.Background(), f, delivery(`{"n":"1"}`), 10*time.Second)
	if err == nil || !errors.Is(err, automation.ErrUnavailable) {
		t.Fatalf("ReceiveWebhookWithin with the store failing = %s, %v; want the store's error", r.Status, err)
	}
	page, lerr := e.Svc.ListRuns(context.Background(), e.project, f.ID, automation.PageRequest{Limit: "10"})
	if lerr != nil || len(page.Data) != 0 {
		t.Fatalf("runs after the failed write = %d, %v; want none", len(page.Data), lerr)
	}
	if e.c.enqueued.Load()+e.c.claimed.Load()+e.c.finished.Load() != 0 {
		t.Fatal("a failed one-commit write fell back to another write")
	}
	e.queueEmpty(t)
}

// TestPureRunIdempotent: a repeated delivery (same idempotency header)
// gets the first run back, final, and no second run or count; the first
// run has the ID the usual path would give it.
func TestPureRunIdempotent(t *testing.T) {
	e := newPureEnv(t, flowtest.Options{})
	f := e.flow(t, "pure/dedup", onCompletion+`,"idempotencyHeader":"Idempotency-Key"`, pureSteps, "")
	_, first := e.receive(t, f, delivery(`{"n":"1"}`, "idempotency-key", "evt_1"), 10*time.Second)
	_, again := e.receive(t, f, delivery(`{"n": "1"}`, "idempotency-key", "evt_1"), 10*time.Second)
	if again.ID != first.ID || again.Status != automation.RunSucceeded || !jsonEqual(again.Response.Body, `{"n":"1","twice":"11"}`) {
		t.Fatalf("repeat = %s %s %+v; want the first run %s and its answer", again.ID, again.Status, again.Response, first.ID)
	}
	// The same key with another body (another sender who guessed or
	// reused it) gets neither the run nor its answer.
	stranger, err := e.Svc.ReceiveWebhookWithin(context.Background(), f, delivery(`{"n":"2"}`, "idempotency-key", "evt_1"), 10*time.Second)
	if !errors.Is(err, automation.ErrConflict) || !strings.Contains(err.Error(), "another body") || stranger.Response != nil || stranger.ID != "" {
		t.Fatalf("same key, another body = %s %+v, %v; want 409 DUPLICATE_DELIVERY and nothing of the first", stranger.ID, stranger.Response, err)
	}
	usual := newPureEnv(t, flowtest.Options{NoFinishedRuns: true})
	uf := usual.flow(t, "pure/dedup", onCompletion+`,"idempotencyHeader":"Idempotency-Key"`, pureSteps, "")
	// Another flow ID, so another run ID: the derivation is the same, not the ID.
	_, other := usual.receive(t, uf, delivery(`{"n":"1"}`, "idempotency-key", "evt_1"), 10*time.Second)
	_, otherAgain := usual.receive(t, uf, delivery(`{"n":"1"}`, "idempotency-key", "evt_1"), 10*time.Second)
	if other.ID != otherAgain.ID || other.ID == first.ID {
		t.Fatalf("usual path IDs %s, %s; want one derived ID, not the other flow's %s", other.ID, otherAgain.ID, first.ID)
	}
	if n := e.c.inserted.Load(); n != 1 {
		t.Fatalf("%d finished inserts; want 1", n)
	}
	fl, err := e.Svc.Flow(context.Background(), e.project, f.ID)
	if err != nil || fl.RunCount != 1 {
		t.Fatalf("runCount = %d, %v; want 1", fl.RunCount, err)
	}
	// A different key is a new run.
	_, next := e.receive(t, f, delivery(`{"n":"3"}`, "idempotency-key", "evt_2"), 10*time.Second)
	if next.ID == first.ID || e.c.inserted.Load() != 2 {
		t.Fatalf("another key = run %s, %d inserts; want a new run", next.ID, e.c.inserted.Load())
	}
}
