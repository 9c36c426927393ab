package automation_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/sqlitestore"
)

// onError runs once, when the run has failed for good (after its
// retries), records its results under onErrorSteps and leaves the run's
// status as it was.
func TestOnErrorRunsOnceAfterRetries(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{MaxAttempts: 2})
	down, downCalls := flowtest.StatusServer(t, 503)
	alert, alertCalls := flowtest.StatusServer(t, 200)
	ctx := context.Background()
	name, eng := "fails", automation.FlowBuilder
	steps := []automation.Step{{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: down.URL, Body: json.RawMessage(`{}`)}}
	onError := []automation.Step{{Name: "alert", Type: automation.StepHTTP, Method: "POST", URL: alert.URL,
		Body: json.RawMessage(`{"text": "{{ error.step }}: {{ error.message }}"}`)}}
	f, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps, OnError: &onError})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = e.svc.EnableFlow(ctx, e.project, f.ID); err != nil {
		t.Fatal(err)
	}
	r := e.start1(t, f)
	if at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID); at.Outcome != automation.OutcomeRetry {
		t.Fatalf("first attempt = %v, %v; want a retry", at.Outcome, err)
	}
	if alertCalls.Load() != 0 {
		t.Fatalf("onError ran before the run's last attempt")
	}
	if got, err := e.svc.Run(ctx, e.project, f.ID, r.ID); err != nil || got.WaitingFor != automation.WaitingRetry || got.NextAttemptAt == nil {
		t.Fatalf("run between attempts: waiting for %q next %v, %v; want RETRY", got.WaitingFor, got.NextAttemptAt, err)
	}
	e.svc.ExecuteRun(ctx, r.Project, r.ID)
	got, err := e.svc.Run(ctx, e.project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != automation.RunFailed || downCalls.Load() != 2 || alertCalls.Load() != 1 {
		t.Fatalf("run %s after %d calls, %d alerts; want FAILED, 2, 1", got.Status, downCalls.Load(), alertCalls.Load())
	}
	if len(got.OnErrorSteps) != 1 || got.OnErrorSteps[0].Name != "alert" || got.OnErrorSteps[0].Status != automation.StepSucceeded {
		t.Fatalf("onErrorSteps = %+v", got.OnErrorSteps)
	}
	if !strings.Contains(got.Error, "gave up after 2 attempts") {
		t.Errorf("run error %q", got.Error)
	}
	// A run that succeeds runs no onError.
	up, _ := flowtest.StatusServer(t, 200)
	steps[0].URL = up.URL
	if f, err = e.svc.UpdateFlow(ctx, e.project, f.ID, automation.FlowInput{Steps: &steps}); err != nil {
		t.Fatal(err)
	}
	r = e.start1(t, f)
	if at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID); err != nil || at.Run.Status != automation.RunSucceeded || alertCalls.Load() != 1 {
		t.Fatalf("succeeding run: %s %v, %d alerts", at.Run.Status, err, alertCalls.Load())
	}
}

// onError steps follow the step journal: when the attempt running them
// dies after the first (an HTTP post to Slack) and before the second
// answered, the attempt that takes the run over executes neither the
// run's steps nor the first onError step again, only the second.
func TestOnErrorResumesAfterACrash(t *testing.T) {
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	e := newEnv(t, automation.RunPolicy{}, func() time.Time { return *now.Load() })
	charge, chargeCalls := flowtest.StatusServer(t, 402) // a 4xx: failed for good
	slack, slackCalls := flowtest.StatusServer(t, 200)
	var pagerCalls atomic.Int32
	reached, hold := make(chan struct{}, 1), make(chan struct{})
	pager := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pagerCalls.Add(1) == 1 {
			reached <- struct{}{}
			<-hold // the attempt that sent it "dies" waiting
		}
		w.Write([]byte(`{"paged":true}`))
	}))
	t.Cleanup(pager.Close)
	t.Cleanup(func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	})
	ctx := context.Background()
	name, eng := "charge", automation.FlowBuilder
	steps := []automation.Step{{Name: "charge", Type: automation.StepHTTP, Method: "POST", URL: charge.URL, Body: json.RawMessage(`{}`)}}
	onError := []automation.Step{
		{Name: "slack", Type: automation.StepHTTP, Method: "POST", URL: slack.URL, Body: json.RawMessage(`{"text": "{{ error.step }} failed"}`)},
		{Name: "pager", Type: automation.StepHTTP, Method: "POST", URL: pager.URL, Body: json.RawMessage(`{}`)},
	}
	f, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps, OnError: &onError})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = e.svc.EnableFlow(ctx, e.project, f.ID); err != nil {
		t.Fatal(err)
	}
	r := e.start1(t, f)
	first := make(chan automation.Attempt, 1)
	go func() {
		at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID)
		first <- at
	}()
	<-reached
	// The journal holds the run's outcome and the first onError step; the
	// API shows the run RUNNING with its error, never the internal field.
	stored, err := e.Store.Run(ctx, r.Project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Status != automation.RunRunning || stored.OnErrorOf != automation.RunFailed || len(stored.OnErrorSteps) != 2 ||
		stored.OnErrorSteps[0].Status != automation.StepSucceeded || stored.OnErrorSteps[1].Status != automation.StepSkipped {
		t.Fatalf("journal while the pager is called: %s onErrorOf=%q %+v", stored.Status, stored.OnErrorOf, stored.OnErrorSteps)
	}
	shown, err := e.svc.Run(ctx, e.project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(shown); strings.Contains(string(b), "onErrorOf") {
		t.Errorf("the API shows the internal field: %s", b)
	}
	// The first attempt's process is gone: its lease runs out and another
	// attempt takes the run over.
	later := start.Add(automation.RunPolicy{}.Lease() + time.Second)
	now.Store(&later)
	at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Outcome != automation.OutcomeFinished {
		t.Fatalf("resumed attempt = %v, %v; want the run finished", at.Outcome, err)
	}
	if chargeCalls.Load() != 1 || slackCalls.Load() != 1 || pagerCalls.Load() != 2 {
		t.Fatalf("charge saw %d requests, slack %d, pager %d; want 1, 1, 2", chargeCalls.Load(), slackCalls.Load(), pagerCalls.Load())
	}
	got, err := e.svc.Run(ctx, e.project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != automation.RunFailed || !strings.Contains(got.Error, "step charge") || got.OnErrorOf != "" ||
		len(got.OnErrorSteps) != 2 || got.OnErrorSteps[0].Status != automation.StepSucceeded || got.OnErrorSteps[1].Status != automation.StepSucceeded {
		t.Fatalf("run = %s %q onErrorOf=%q, onError %+v", got.Status, got.Error, got.OnErrorOf, got.OnErrorSteps)
	}
	// The first attempt comes back to life: it can change nothing.
	close(hold)
	if at := <-first; at.Outcome != automation.OutcomeFinished && at.Outcome != automation.OutcomeClaimed {
		t.Fatalf("stale attempt outcome = %v", at.Outcome)
	}
	if again, _ := e.svc.Run(ctx, e.project, f.ID, r.ID); again.Status != automation.RunFailed || again.OnErrorSteps[1].Status != automation.StepSucceeded {
		t.Fatalf("after the stale attempt: %s %+v", again.Status, again.OnErrorSteps)
	}
}

// A WAIT ends the attempt with the run RUNNING and nextAttemptAt set; an
// attempt before that time waits on without repeating a step; after it,
// the run resumes at the step after the WAIT.
func TestWaitPausesAndResumes(t *testing.T) {
	clock := newTestClock()
	e := newEnv(t, automation.RunPolicy{}, clock.now)
	before, beforeCalls := flowtest.StatusServer(t, 200)
	after, afterCalls := flowtest.StatusServer(t, 200)
	ctx := context.Background()
	name := "waits"
	steps := []automation.Step{
		{Name: "first", Type: automation.StepHTTP, Method: "POST", URL: before.URL, Body: json.RawMessage(`{}`)},
		{Name: "later", Type: automation.StepWait, Duration: "1s"},
		{Name: "second", Type: automation.StepHTTP, Method: "POST", URL: after.URL, Body: json.RawMessage(`{"w": "{{ steps.later.until }}"}`)},
	}
	f := e.ActiveFlow(t, e.project, name, steps...)
	r := e.start1(t, f)
	at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if at.Outcome != automation.OutcomeRetry || at.RetryAt.IsZero() {
		t.Fatalf("first attempt = %v at %v; want the run given back until the WAIT ends", at.Outcome, at.RetryAt)
	}
	got, err := e.svc.Run(ctx, e.project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != automation.RunRunning || got.NextAttemptAt == nil || !got.NextAttemptAt.Equal(at.RetryAt) ||
		got.WaitingFor != automation.WaitingWait ||
		got.Steps[1].Status != automation.StepSucceeded || got.Steps[2].Status != automation.StepPending {
		t.Fatalf("waiting run: %s (waiting for %q) next %v steps %+v", got.Status, got.WaitingFor, got.NextAttemptAt, got.Steps)
	}
	// Too early (a redelivery): still waiting, nothing repeated.
	if at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID); at.Outcome != automation.OutcomeRetry {
		t.Fatalf("early attempt = %v", at.Outcome)
	}
	if beforeCalls.Load() != 1 || afterCalls.Load() != 0 {
		t.Fatalf("calls before %d after %d while waiting", beforeCalls.Load(), afterCalls.Load())
	}
	clock.set(*got.NextAttemptAt) // the WAIT's time has come
	at, err = e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("resumed = %s, %v", at.Run.Status, err)
	}
	if beforeCalls.Load() != 1 || afterCalls.Load() != 1 {
		t.Errorf("calls before %d after %d; want 1 and 1", beforeCalls.Load(), afterCalls.Load())
	}
	if got, _ := e.svc.Run(ctx, e.project, f.ID, r.ID); got.NextAttemptAt != nil || got.WaitingFor != "" {
		t.Errorf("finished run keeps nextAttemptAt %v, waitingFor %q", got.NextAttemptAt, got.WaitingFor)
	}
}

// delayingQueue is the embedded queue with a Delayer, as SQS is.
type delayingQueue struct {
	automation.RunQueue
	mu    sync.Mutex
	until []time.Time
}

func (q *delayingQueue) EnqueueAfter(_ context.Context, r automation.Run, until time.Time) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.until = append(q.until, until)
	return nil
}

// Where the queue is a Delayer (SQS), a WAIT sends the run's message again
// with a delay, and the message that ran the attempt is settled.
func TestWaitOnADelayingQueue(t *testing.T) {
	dq := &delayingQueue{}
	fe := flowtest.New(t, flowtest.Options{Queue: func(s *sqlitestore.Store) automation.RunQueue {
		dq.RunQueue = s
		return dq
	}})
	p, _ := fe.Project(t, "test", automation.PlanEnterprise)
	ctx := context.Background()
	name, eng := "waits", automation.FlowBuilder
	steps := []automation.Step{{Name: "later", Type: automation.StepWait, Duration: "20m"}}
	f, err := fe.Svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = fe.Svc.EnableFlow(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	r, err := fe.Svc.StartRun(ctx, f, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	at, err := fe.Svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Outcome != automation.OutcomeFinished {
		t.Fatalf("attempt = %v, %v; want the message settled", at.Outcome, err)
	}
	got, err := fe.Svc.Run(ctx, p, f.ID, r.ID)
	if err != nil || got.Status != automation.RunRunning || got.NextAttemptAt == nil {
		t.Fatalf("run %s next %v, %v", got.Status, got.NextAttemptAt, err)
	}
	if len(dq.until) != 1 || !dq.until[0].Equal(*got.NextAttemptAt) {
		t.Fatalf("sent again until %v, want the run's nextAttemptAt %v", dq.until, got.NextAttemptAt)
	}
	// An early delivery (SQS delays at most 15 minutes) is sent on without
	// claiming the run: its attempts stay.
	msg, _ := json.Marshal(automation.QueueMessage{Kind: automation.MessageRun, Project: r.Project, RunID: r.ID, NotBefore: got.NextAttemptAt})
	if err := fe.Svc.HandleMessage(ctx, msg); err != nil {
		t.Fatalf("early message: %v", err)
	}
	again, _ := fe.Svc.Run(ctx, p, f.ID, r.ID)
	if len(dq.until) != 2 || !dq.until[1].Equal(*got.NextAttemptAt) || again.Attempts != got.Attempts {
		t.Errorf("early delivery: sent %v, attempts %d -> %d", dq.until, got.Attempts, again.Attempts)
	}
}

// dueRuns is a run store with a RunDueReader whose answer the test sets,
// counting its reads.
type dueRuns struct {
	automation.RunStore
	mu     sync.Mutex
	reads  int
	status automation.RunStatus
	next   *time.Time
	err    error
}

func (d *dueRuns) RunDue(context.Context, string, string) (automation.RunStatus, *time.Time, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reads++
	return d.status, d.next, d.err
}

func (d *dueRuns) set(status automation.RunStatus, next *time.Time, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status, d.next, d.err = status, next, err
}

// An early delivery of a parked run's message reads the run's due time
// once (RunRuntime.DueReader): not due, or not readable, it is sent on as
// before; ended or gone, it is done with; made due meanwhile (a decision
// whose wake-up message was lost), the run is executed. A message that is
// not early reads nothing.
func TestEarlyMessageReadsDueTime(t *testing.T) {
	dq := &delayingQueue{}
	dr := &dueRuns{}
	fe := flowtest.New(t, flowtest.Options{
		Queue: func(s *sqlitestore.Store) automation.RunQueue { dq.RunQueue = s; return dq },
		Runs:  func(rs automation.RunStore) automation.RunStore { dr.RunStore = rs; return dr },
	})
	p, _ := fe.Project(t, "test", automation.PlanEnterprise)
	ctx := context.Background()
	name, eng := "waits", automation.FlowBuilder
	steps := []automation.Step{{Name: "later", Type: automation.StepWait, Duration: "20m"}}
	f, err := fe.Svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = fe.Svc.EnableFlow(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	r, err := fe.Svc.StartRun(ctx, f, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	// Not early: executed (and parked by its WAIT), no read.
	plain, _ := json.Marshal(automation.QueueMessage{Kind: automation.MessageRun, Project: r.Project, RunID: r.ID})
	if err := fe.Svc.HandleMessage(ctx, plain); err != nil {
		t.Fatal(err)
	}
	parked, err := fe.Svc.Run(ctx, p, f.ID, r.ID)
	if err != nil || parked.NextAttemptAt == nil || len(dq.until) != 1 || dr.reads != 0 {
		t.Fatalf("after the first message: next %v, sent %v, %d reads, %v; want parked, sent once, no read",
			parked.NextAttemptAt, dq.until, dr.reads, err)
	}
	early, _ := json.Marshal(automation.QueueMessage{Kind: automation.MessageRun, Project: r.Project, RunID: r.ID, NotBefore: parked.NextAttemptAt})
	// A second back: the Service's clock keeps whole milliseconds.
	now := time.Now().Add(-time.Second)
	for i, c := range []struct {
		why    string
		status automation.RunStatus
		next   *time.Time
		err    error
		sent   bool
	}{
		{"not due", automation.RunRunning, parked.NextAttemptAt, nil, true},
		{"executing", automation.RunRunning, nil, nil, true},
		{"read failed", "", nil, context.DeadlineExceeded, true},
		{"finished", automation.RunFailed, nil, nil, false},
		{"gone", "", nil, automation.NotFound("run", r.ID), false},
	} {
		dr.set(c.status, c.next, c.err)
		sent := len(dq.until)
		if err := fe.Svc.HandleMessage(ctx, early); err != nil {
			t.Fatalf("%s: %v", c.why, err)
		}
		again, _ := fe.Svc.Run(ctx, p, f.ID, r.ID)
		if (len(dq.until) > sent) != c.sent || dr.reads != i+1 || again.Attempts != parked.Attempts {
			t.Errorf("%s: sent on %v (want %v), %d reads (want %d), attempts %d -> %d",
				c.why, len(dq.until) > sent, c.sent, dr.reads, i+1, parked.Attempts, again.Attempts)
		}
	}
	// Made due meanwhile: claimed and executed now, not sent on unread.
	dr.set(automation.RunRunning, &now, nil)
	reads := dr.reads
	if err := fe.Svc.HandleMessage(ctx, early); err != nil {
		t.Fatalf("due run: %v", err)
	}
	again, _ := fe.Svc.Run(ctx, p, f.ID, r.ID)
	if again.Attempts != parked.Attempts+1 || dr.reads != reads+1 {
		t.Errorf("due run: attempts %d -> %d, %d reads; want executed after one read", parked.Attempts, again.Attempts, dr.reads-reads)
	}
}

// A claim that resumes a run after a WAIT is not a retry: a flaky step
// after two WAITs still gets its retries.
func TestWaitsDoNotSpendRetries(t *testing.T) {
	clock := newTestClock()
	e := newEnv(t, automation.RunPolicy{MaxAttempts: 2}, clock.now)
	flaky, calls := flowtest.StatusServer(t, 503, 200)
	ctx := context.Background()
	name := "two waits"
	steps := []automation.Step{
		{Name: "w1", Type: automation.StepWait, Duration: "1ms"},
		{Name: "w2", Type: automation.StepWait, Duration: "1ms"},
		{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: flaky.URL, Body: json.RawMessage(`{}`)},
	}
	f := e.ActiveFlow(t, e.project, name, steps...)
	r := e.start1(t, f)
	var at automation.Attempt
	for i := 0; i < 6; i++ {
		clock.advance(time.Millisecond) // past each 1ms WAIT
		at, _ = e.svc.ExecuteRun(ctx, r.Project, r.ID)
		if at.Outcome == automation.OutcomeFinished {
			break
		}
	}
	if at.Run.Status != automation.RunSucceeded || calls.Load() != 2 {
		t.Fatalf("run %s (%s) after %d calls; want SUCCEEDED on the call's retry", at.Run.Status, at.Run.Error, calls.Load())
	}
}

// testClock is a clock the test moves, for the Service and its engine: a
// WAIT ends when the test says, not after a sleep.
type testClock struct{ t atomic.Pointer[time.Time] }

func newTestClock() *testClock {
	c := &testClock{}
	c.set(time.Now())
	return c
}

func (c *testClock) now() time.Time          { return *c.t.Load() }
func (c *testClock) set(t time.Time)         { c.t.Store(&t) }
func (c *testClock) advance(d time.Duration) { c.set(c.now().Add(d)) }
