package automation_test

// Domain rules of runs, tested through the Service on the real SQLite store
// and the real engine (pkg/flowtest): what holds here holds on every
// transport and every worker.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// env is a Service over a fresh data directory with one ENTERPRISE project.
type env struct {
	*flowtest.Env
	svc     *automation.Service
	project automation.Project
}

func newEnv(t *testing.T, policy automation.RunPolicy, clock ...func() time.Time) *env {
	t.Helper()
	opts := flowtest.Options{Policy: policy}
	if len(clock) > 0 {
		opts.Clock = clock[0]
	}
	fe := flowtest.New(t, opts)
	p, _ := fe.Project(t, "test", automation.PlanEnterprise)
	return &env{Env: fe, svc: fe.Svc, project: p}
}

// flowCalling makes an ACTIVE flow builder flow with one HTTP step to url.
func (e *env) flowCalling(t *testing.T, url string) automation.Flow {
	return e.ActiveFlow(t, e.project, "caller", flowtest.CallStep(url))
}

func (e *env) start1(t *testing.T, f automation.Flow) automation.Run { return e.StartRef(t, f) }

// TestRedeliveryDoesNotRunTwice executes a finished run again, as a second
// delivery of its queue message would: nothing happens.
func TestRedeliveryDoesNotRunTwice(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	srv, calls := flowtest.StatusServer(t, 200)
	r := e.start1(t, e.flowCalling(t, srv.URL))
	ctx := context.Background()
	first, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || first.Run.Status != automation.RunSucceeded || first.Outcome != automation.OutcomeFinished {
		t.Fatalf("first execution = %s (%v), %v", first.Run.Status, first.Outcome, err)
	}
	if again, err := e.svc.ExecuteRun(ctx, r.Project, r.ID); err != nil || again.Outcome != automation.OutcomeFinished {
		t.Fatalf("second execution: %v, %v", again.Outcome, err)
	}
	if calls.Load() != 1 {
		t.Fatalf("the external service was called %d times, want 1", calls.Load())
	}
	if got, _ := e.svc.Run(ctx, e.project, r.FlowID, r.ID); got.Attempts != 1 {
		t.Fatalf("attempts = %d, want 1", got.Attempts)
	}
}

// TestIdempotentDeliveries: a flow that names an idempotency header gets one
// run per header value within the window, however often it is delivered.
func TestIdempotentDeliveries(t *testing.T) {
	now := time.Now()
	e := newEnv(t, automation.RunPolicy{}, func() time.Time { return now })
	ctx := context.Background()
	name, eng := "dedup", automation.FlowBuilder
	trig := automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{IdempotencyHeader: "X-GitHub-Delivery"}}
	f, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Engine: &eng, Trigger: &trig})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(id string) automation.Run {
		t.Helper()
		td := automation.TriggerData{Method: "POST", Headers: map[string]string{}, Body: json.RawMessage(`{}`)}
		if id != "" {
			td.Headers["x-github-delivery"] = id
		}
		r, err := e.svc.StartRun(ctx, f, td)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a1, a2, b := deliver("d-1"), deliver("d-1"), deliver("d-2")
	if a1.ID != a2.ID || a1.ID == b.ID {
		t.Fatalf("runs %s, %s, %s: want the repeat to get the first run and d-2 its own", a1.ID, a2.ID, b.ID)
	}
	if n1, n2 := deliver(""), deliver(""); n1.ID == n2.ID {
		t.Fatal("deliveries without the header were deduplicated")
	}
	now = now.Add(automation.IdempotencyWindow + time.Minute)
	if late := deliver("d-1"); late.ID == a1.ID {
		t.Fatal("a repeat past the window got the first run back")
	}
	page, err := e.svc.ListRuns(ctx, e.project, f.ID, automation.PageRequest{Limit: "100"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 5 {
		t.Fatalf("%d runs recorded, want 5 (d-1, d-2, two without the header, d-1 past the window)", len(page.Data))
	}
}

// TestRetentionPurge: runs older than the retention period go, younger ones
// stay, and the flow's stats are kept.
func TestRetentionPurge(t *testing.T) {
	now := time.Now()
	e := newEnv(t, automation.RunPolicy{Retention: 48 * time.Hour}, func() time.Time { return now })
	srv, _ := flowtest.StatusServer(t, 200)
	f := e.flowCalling(t, srv.URL)
	ctx := context.Background()
	old := e.start1(t, f)
	if _, err := e.svc.ExecuteRun(ctx, old.Project, old.ID); err != nil {
		t.Fatal(err)
	}
	now = now.Add(24 * time.Hour)
	young := e.start1(t, f)
	now = now.Add(25 * time.Hour) // old is 49 h old, young 25 h
	n, err := e.svc.PurgeRuns(ctx)
	if err != nil || n != 1 {
		t.Fatalf("PurgeRuns = %d, %v; want 1", n, err)
	}
	if _, err := e.svc.Run(ctx, e.project, f.ID, old.ID); !errors.Is(err, automation.ErrNotFound) {
		t.Fatalf("the expired run: err = %v, want not found", err)
	}
	if _, err := e.svc.Run(ctx, e.project, f.ID, young.ID); err != nil {
		t.Fatalf("the young run: %v", err)
	}
	if got, _ := e.svc.Flow(ctx, e.project, f.ID); got.RunCount != 1 {
		t.Fatalf("runCount after the purge = %d, want 1 (stats outlive records)", got.RunCount)
	}
}

// TestRepeatedCrashesStopTheRun: a run whose attempts die with their
// process (claimed, never released or finished) MaxCrashes times is
// finished FAILED at the next claim instead of executed again, so that a
// flow that kills its executor cannot do so at every restart. The crashes
// are claims on the real store that never end, as a killed flowd leaves.
func TestRepeatedCrashesStopTheRun(t *testing.T) {
	e, r, calls := crashedRun(t, automation.DefaultMaxCrashes)
	ctx := context.Background()
	at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Outcome != automation.OutcomeFinished {
		t.Fatalf("ExecuteRun = %v, %v; want the run finished", at.Outcome, err)
	}
	got, err := e.svc.Run(ctx, e.project, r.FlowID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != automation.RunFailed || !strings.Contains(got.Error, "stopped after repeated crashes") {
		t.Fatalf("run = %s %q, want FAILED, stopped after repeated crashes", got.Status, got.Error)
	}
	if got.Attempts != automation.DefaultMaxCrashes+1 || calls.Load() != 0 {
		t.Fatalf("attempts %d, %d calls to the flow's service; want %d attempts recorded and no execution",
			got.Attempts, calls.Load(), automation.DefaultMaxCrashes+1)
	}
}

// TestFewerCrashesStillRun: below MaxCrashes, an interrupted run is
// executed again, and an attempt that ended (released) is no crash.
func TestFewerCrashesStillRun(t *testing.T) {
	e, r, calls := crashedRun(t, automation.DefaultMaxCrashes-1)
	at, err := e.svc.ExecuteRun(context.Background(), r.Project, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded || calls.Load() != 1 {
		t.Fatalf("ExecuteRun = %s (%v), %v, %d calls; want SUCCEEDED after one call", at.Run.Status, at.Outcome, err, calls.Load())
	}
}

// crashedRun starts a run of a flow calling a counting service, then claims
// it crashes times on the store without ending the attempts, as killed
// processes leave it; the Service's clock then stands past the last lease.
func crashedRun(t *testing.T, crashes int) (*env, automation.Run, *atomic.Int32) {
	t.Helper()
	now := time.Now()
	e := newEnv(t, automation.RunPolicy{}, func() time.Time { return now })
	srv, calls := flowtest.StatusServer(t, 200)
	r := e.start1(t, e.flowCalling(t, srv.URL))
	lease := automation.RunPolicy{}.Lease()
	for range crashes {
		if _, err := e.Store.ClaimRun(context.Background(), r.Project, r.ID, now, lease); err != nil {
			t.Fatal(err)
		}
		now = now.Add(lease + time.Second) // the process died; its lease ran out
	}
	return e, r, calls
}

// TestStaleAttemptCannotOverwrite: the frozen attempt through the Service.
// An attempt that lost its lease while it executed finds its result
// refused: the live attempt's run stands, and the stale one ends without an
// error (the run is final: nothing left to do).
func TestStaleAttemptCannotOverwrite(t *testing.T) {
	now := time.Now()
	var second automation.Run
	lease := automation.RunPolicy{}.Lease()
	reached, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached <- struct{}{} // the stale attempt holds the run and is in its step
		<-release
		w.Write([]byte(`{"from":"stale"}`))
	}))
	t.Cleanup(srv.Close)
	e := newEnv(t, automation.RunPolicy{}, func() time.Time { return now })
	r := e.start1(t, e.flowCalling(t, srv.URL))
	ctx := context.Background()
	done := make(chan automation.Attempt, 1)
	go func() {
		at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID)
		done <- at
	}()
	// Wait until the stale attempt holds the run, then let its lease lapse
	// and have another attempt claim and finish it.
	<-reached
	c, err := e.Store.ClaimRun(ctx, r.Project, r.ID, now.Add(lease+time.Second), lease)
	if err != nil {
		t.Fatal(err)
	}
	c.Status, c.Error = automation.RunSucceeded, ""
	if err := e.Store.FinishRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	second = c
	close(release)
	at := <-done
	if at.Outcome != automation.OutcomeFinished && at.Outcome != automation.OutcomeClaimed {
		t.Fatalf("stale attempt outcome = %v, want finished or claimed", at.Outcome)
	}
	got, err := e.svc.Run(ctx, e.project, r.FlowID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != automation.RunSucceeded || len(got.Steps) != len(second.Steps) || got.Attempts != 2 {
		t.Fatalf("run = %s with %d steps after %d attempts; want the live attempt's result", got.Status, len(got.Steps), got.Attempts)
	}
}

// failingFinishes is a run store whose FinishRun fails while fail > 0, as a
// locked or full database would.
type failingFinishes struct {
	automation.RunStore
	fail atomic.Int32
}

func (s *failingFinishes) FinishRun(ctx context.Context, r automation.Run) error {
	if s.fail.Add(-1) >= 0 {
		return errors.New("database is locked")
	}
	return s.RunStore.FinishRun(ctx, r)
}

// TestUnsavedFinishIsRetriedSoon: an attempt whose final state cannot be
// saved gives the run back (its lease dropped), so that the next attempt
// can claim it at once instead of after the whole lease.
func TestUnsavedFinishIsRetriedSoon(t *testing.T) {
	now := time.Now()
	runs := &failingFinishes{}
	fe := flowtest.New(t, flowtest.Options{Clock: func() time.Time { return now },
		Runs: func(s automation.RunStore) automation.RunStore { runs.RunStore = s; return runs }})
	p, _ := fe.Project(t, "test", automation.PlanEnterprise)
	e := &env{Env: fe, svc: fe.Svc, project: p}
	srv, _ := flowtest.StatusServer(t, 200)
	r := e.start1(t, e.flowCalling(t, srv.URL))
	ctx := context.Background()

	runs.fail.Store(100)
	at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if !errors.Is(err, automation.ErrRetry) || at.Outcome != automation.OutcomeRetry {
		t.Fatalf("ExecuteRun with finishes failing = %v, %v; want a retry", at.Outcome, err)
	}
	runs.fail.Store(0)
	// Same instant: the lease the failed attempt took must be gone.
	at, err = e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Outcome != automation.OutcomeFinished || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("next attempt = %v %s, %v; want it to claim at once and succeed", at.Outcome, at.Run.Status, err)
	}
	if got, _ := e.svc.Run(ctx, p, r.FlowID, r.ID); got.Attempts != 2 || got.Status != automation.RunSucceeded {
		t.Fatalf("run = %s after %d attempts, want SUCCEEDED after 2", got.Status, got.Attempts)
	}
}

// TestFlakySecondStepDoesNotRepeatTheFirst is the repro of the step
// journal: two HTTP steps, the second fails once with 503. The run
// succeeds on its second attempt, which resumes at the second step with
// the first step's journaled output: the first service saw one request.
func TestFlakySecondStepDoesNotRepeatTheFirst(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	pay, payCalls := flowtest.StatusServer(t, 201)
	notify, notifyCalls := flowtest.StatusServer(t, 503, 200)
	ctx := context.Background()
	name := "pay-then-notify"
	steps := []automation.Step{
		{Name: "pay", Type: automation.StepHTTP, Method: "POST", URL: pay.URL, Body: json.RawMessage(`{"amount": 5}`)},
		{Name: "notify", Type: automation.StepHTTP, Method: "POST", URL: notify.URL,
			Body: json.RawMessage(`{"paid": "{{ steps.pay.status }}"}`)},
	}
	f := e.ActiveFlow(t, e.project, name, steps...)
	r := e.start1(t, f)
	if at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID); at.Outcome != automation.OutcomeRetry {
		t.Fatalf("first attempt = %v, %v; want a retry after the 503", at.Outcome, err)
	}
	at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("second attempt = %s, %v; want SUCCEEDED", at.Run.Status, err)
	}
	if payCalls.Load() != 1 || notifyCalls.Load() != 2 {
		t.Fatalf("pay saw %d requests, notify %d; want 1 and 2", payCalls.Load(), notifyCalls.Load())
	}
	got, err := e.svc.Run(ctx, e.project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Steps) != 2 || got.Steps[0].Status != automation.StepSucceeded || got.Steps[1].Status != automation.StepSucceeded ||
		!strings.Contains(string(got.Steps[0].Output), `"status":201`) {
		t.Fatalf("steps = %+v", got.Steps)
	}
}

// TestInlineAttemptStopsAtTheAnswer: with StopInlineAtAnswer (the Lambda
// receiver), an ON_COMPLETION attempt that outlives the receiver's wait is
// cut short and gives the run back before AwaitRun returns: no attempt is
// left holding the run, and the next attempt claims it at once.
func TestInlineAttemptStopsAtTheAnswer(t *testing.T) {
	fe := flowtest.New(t, flowtest.Options{StopInlineAtAnswer: true})
	p, _ := fe.Project(t, "test", automation.PlanEnterprise)
	e := &env{Env: fe, svc: fe.Svc, project: p}
	hold := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(hold) }) // first: the handler returns
	r := e.start1(t, e.flowCalling(t, slow.URL))
	ctx := context.Background()
	got, err := e.svc.AwaitRun(ctx, r, 300*time.Millisecond)
	if err != nil || got.Status != automation.RunRunning {
		t.Fatalf("AwaitRun = %s, %v; want the run still RUNNING after the wait", got.Status, err)
	}
	c, err := e.Store.ClaimRun(ctx, r.Project, r.ID, time.Now(), time.Minute)
	if err != nil {
		t.Fatalf("claim right after the answer: %v; want the inline attempt to have let go", err)
	}
	if c.Attempts != 2 || c.Interrupted != 0 {
		t.Fatalf("claim after the answer: attempts %d, interrupted %d; want 2 and 0 (the inline attempt ended)", c.Attempts, c.Interrupted)
	}
}

// TestRunFieldsAcrossAttempts: a run waiting between attempts shows when
// it tries again (nextAttemptAt) and no finish time or run error; once
// final, it started when its first attempt started, durationMs covers all
// attempts, and each step says how often it was executed.
func TestRunFieldsAcrossAttempts(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, automation.RunPolicy{}, func() time.Time { return now })
	srv, _ := flowtest.StatusServer(t, 503, 200)
	r := e.start1(t, e.flowCalling(t, srv.URL))
	ctx := context.Background()
	first, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if first.Outcome != automation.OutcomeRetry || first.RetryAt.IsZero() {
		t.Fatalf("first attempt = %v, retry at %v", first.Outcome, first.RetryAt)
	}
	waiting, err := e.svc.Run(ctx, e.project, r.FlowID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if waiting.Status != automation.RunRunning || waiting.NextAttemptAt == nil || !waiting.NextAttemptAt.Equal(first.RetryAt) ||
		waiting.Finished != nil || waiting.Error != "" || waiting.Steps[0].Error == "" || waiting.Steps[0].Attempts != 1 {
		t.Fatalf("waiting run = %+v; want RUNNING with nextAttemptAt %v, no finish time or run error, the step's error kept", waiting, first.RetryAt)
	}
	firstStart := *waiting.Started
	now = now.Add(time.Minute)
	if _, err := e.svc.ExecuteRun(ctx, r.Project, r.ID); err != nil {
		t.Fatal(err)
	}
	done, _ := e.svc.Run(ctx, e.project, r.FlowID, r.ID)
	if done.Status != automation.RunSucceeded || done.NextAttemptAt != nil || done.Started == nil || !done.Started.Equal(firstStart) ||
		done.DurationMs == nil || done.Attempts != 2 || done.Steps[0].Attempts != 1 {
		t.Fatalf("finished run = %+v; want SUCCEEDED, started at the first attempt (%v), durationMs set, 2 attempts", done, firstStart)
	}
}

// TestStoppedAtNamesTheFilter: a FILTER that ends a run is named in
// stoppedAt.
func TestStoppedAtNamesTheFilter(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	name := "filtered"
	steps := []automation.Step{{Name: "only_main", Type: automation.StepFilter, Condition: `trigger.body.ref == "other"`}}
	f := e.ActiveFlow(t, e.project, name, steps...)
	at, err := e.svc.ExecuteRun(ctx, e.project.ID, e.start1(t, f).ID)
	if err != nil || at.Run.Status != automation.RunSucceeded || at.Run.StoppedAt != "only_main" {
		t.Fatalf("run = %s stopped at %q, %v; want SUCCEEDED stopped at only_main", at.Run.Status, at.Run.StoppedAt, err)
	}
}

// recorder is a fake service that answers with the statuses in order (then
// the last forever), with headers, and keeps each request's headers.
type recorder struct {
	*httptest.Server
	mu       sync.Mutex
	requests []http.Header
}

func newRecorder(t *testing.T, answers ...func(w http.ResponseWriter)) *recorder {
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.mu.Lock()
		rec.requests = append(rec.requests, r.Header.Clone())
		n := len(rec.requests)
		rec.mu.Unlock()
		answers[min(n, len(answers))-1](w)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (rec *recorder) seen() []http.Header {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.requests)
}

func status(code int, header ...string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
		w.Write([]byte(`{}`))
	}
}

// flowOf makes an ACTIVE flow builder flow with the steps.
func (e *env) flowOf(t *testing.T, steps ...automation.Step) automation.Flow {
	return e.ActiveFlow(t, e.project, "steps", steps...)
}

// TestStepRetry: a step with a retry policy is retried alone, within one
// attempt of the run, on 5xx and 429 (honouring Retry-After), and not on
// other 4xx answers; its result counts its executions.
func TestStepRetry(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	retry := &automation.StepRetry{Attempts: 4, Backoff: "1ms", MaxBackoff: "5ms"}
	tests := []struct {
		name       string
		answers    []func(http.ResponseWriter)
		wantStatus automation.RunStatus
		wantCalls  int
	}{
		{"5xx then success", []func(http.ResponseWriter){status(503), status(502), status(200)}, automation.RunSucceeded, 3},
		{"429 with Retry-After", []func(http.ResponseWriter){status(429, "Retry-After", "1"), status(200)}, automation.RunSucceeded, 2},
		{"408 is transient", []func(http.ResponseWriter){status(408), status(200)}, automation.RunSucceeded, 2},
		{"4xx is permanent", []func(http.ResponseWriter){status(404)}, automation.RunFailed, 1},
		{"gives up after its attempts", []func(http.ResponseWriter){status(500)}, automation.RunFailed, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t, tt.answers...)
			f := e.flowOf(t, automation.Step{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: rec.URL, Retry: retry})
			at, _ := e.svc.ExecuteRun(ctx, e.project.ID, e.start1(t, f).ID)
			got := at.Run
			if tt.wantStatus == automation.RunFailed && at.Outcome == automation.OutcomeRetry {
				got.Status = automation.RunFailed // the run will try again, later: this attempt failed
			}
			if got.Status != tt.wantStatus || len(rec.seen()) != tt.wantCalls || got.Steps[0].Attempts != tt.wantCalls {
				t.Fatalf("run %s, %d calls, step attempts %d; want %s after %d", got.Status, len(rec.seen()), got.Steps[0].Attempts,
					tt.wantStatus, tt.wantCalls)
			}
		})
	}
	bad := []automation.Step{{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: "https://example.com",
		Retry: &automation.StepRetry{Attempts: 11}}}
	name, eng := "bad", automation.FlowBuilder
	if _, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Engine: &eng, Steps: &bad}); !errors.Is(err, automation.ErrInvalid) {
		t.Fatalf("retry.attempts 11: err = %v, want a 400", err)
	}
	bad[0].Retry = &automation.StepRetry{Attempts: 2, Backoff: "soon"}
	if _, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Engine: &eng, Steps: &bad}); !errors.Is(err, automation.ErrInvalid) {
		t.Fatalf("retry.backoff soon: err = %v, want a 400", err)
	}
}

// TestIdempotencyKey: non-GET/HEAD HTTP steps send Idempotency-Key
// <runId>.<stepName>, the same on every attempt of the run; the step's own
// header wins; "idempotencyKey": false and GET send none.
func TestIdempotencyKey(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	rec := newRecorder(t, status(200))
	payRec := newRecorder(t, status(503), status(200))
	off := false
	f := e.flowOf(t,
		automation.Step{Name: "get", Type: automation.StepHTTP, Method: "GET", URL: rec.URL},
		automation.Step{Name: "own", Type: automation.StepHTTP, Method: "PUT", URL: rec.URL, Headers: map[string]string{"Idempotency-Key": "mine"}},
		automation.Step{Name: "off", Type: automation.StepHTTP, Method: "POST", URL: rec.URL, IdempotencyKey: &off},
		automation.Step{Name: "pay", Type: automation.StepHTTP, Method: "POST", URL: payRec.URL},
	)
	r := e.start1(t, f)
	// pay gets a 503: the run is retried, and pay sends the same key again.
	if at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID); at.Outcome != automation.OutcomeRetry {
		t.Fatalf("first attempt = %v, want a retry", at.Outcome)
	}
	if at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID); err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("second attempt = %s, %v", at.Run.Status, err)
	}
	check := func(what string, seen []http.Header, want []string) {
		t.Helper()
		if len(seen) != len(want) {
			t.Fatalf("%s: %d requests, want %d", what, len(seen), len(want))
		}
		for i, w := range want {
			if got := seen[i].Get("Idempotency-Key"); got != w {
				t.Errorf("%s request %d: Idempotency-Key %q, want %q", what, i, got, w)
			}
		}
	}
	check("get, own, off", rec.seen(), []string{"", "mine", ""})
	check("pay", payRec.seen(), []string{r.ID + ".pay", r.ID + ".pay"})
}

// TestRetryFromFailedStep: a retry from the failed step is a new run that
// resumes the earlier one: the steps that succeeded are not executed again
// (their outputs stand), the failed one is, and resumedFrom names the
// earlier run, whose key the failed step's Idempotency-Key keeps.
func TestRetryFromFailedStep(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	pay := newRecorder(t, status(201))
	notify := newRecorder(t, status(400), status(200))
	f := e.flowOf(t,
		automation.Step{Name: "pay", Type: automation.StepHTTP, Method: "POST", URL: pay.URL},
		automation.Step{Name: "notify", Type: automation.StepHTTP, Method: "POST", URL: notify.URL},
	)
	old := e.start1(t, f)
	if at, err := e.svc.ExecuteRun(ctx, old.Project, old.ID); err != nil || at.Run.Status != automation.RunFailed {
		t.Fatalf("first run = %s, %v; want FAILED on the 400", at.Run.Status, err)
	}
	for _, bad := range []automation.RetryRequest{
		{From: "MIDDLE"},
		{From: automation.RetryFromFailedStep, Trigger: &automation.RetryTrigger{Body: json.RawMessage(`{}`)}},
		{Trigger: &automation.RetryTrigger{Body: json.RawMessage(`{not json`)}},
	} {
		if _, err := e.svc.RetryRun(ctx, e.project, f.ID, old.ID, bad); !errors.Is(err, automation.ErrInvalid) {
			t.Errorf("retry %+v: err = %v, want a 400", bad, err)
		}
	}
	r, err := e.svc.RetryRun(ctx, e.project, f.ID, old.ID, automation.RetryRequest{From: automation.RetryFromFailedStep})
	if err != nil || r.ResumedFrom != old.ID || len(r.Steps) != 1 || r.ID == old.ID {
		t.Fatalf("retry = %+v, %v; want a new run resumed from %s with the pay step", r, err, old.ID)
	}
	at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("resumed run = %s, %v", at.Run.Status, err)
	}
	if len(pay.seen()) != 1 || len(notify.seen()) != 2 {
		t.Fatalf("pay saw %d requests, notify %d; want 1 and 2", len(pay.seen()), len(notify.seen()))
	}
	if k := notify.seen()[1].Get("Idempotency-Key"); k != old.ID+".notify" {
		t.Errorf("resumed notify sent Idempotency-Key %q, want %q", k, old.ID+".notify")
	}
	done, _ := e.svc.Run(ctx, e.project, f.ID, r.ID)
	if _, err := e.svc.RetryRun(ctx, e.project, f.ID, done.ID, automation.RetryRequest{From: automation.RetryFromFailedStep}); !automation.HasCode(err, "RUN_NOT_FAILED") {
		t.Errorf("retry from the failed step of a SUCCEEDED run: err = %v, want RUN_NOT_FAILED", err)
	}
	// From START with an edited body.
	edited, err := e.svc.RetryRun(ctx, e.project, f.ID, old.ID, automation.RetryRequest{Trigger: &automation.RetryTrigger{Body: json.RawMessage(`{"ref":"edited"}`)}})
	if err != nil || string(edited.Trigger.Body) != `{"ref":"edited"}` || len(edited.Steps) != 0 || edited.ResumedFrom != "" {
		t.Fatalf("retry from START with a body = %+v, %v", edited, err)
	}
}

// TestReplayAndSearch: replay starts a retry from START for every FAILED
// run of the flow in the window, and the search finds runs across the
// project by status.
func TestReplayAndSearch(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, automation.RunPolicy{}, func() time.Time { return now })
	ctx := context.Background()
	svc := newRecorder(t, status(400))
	f := e.flowOf(t, automation.Step{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: svc.URL})
	for range 3 {
		r := e.start1(t, f)
		if at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID); at.Run.Status != automation.RunFailed {
			t.Fatalf("run = %s, want FAILED", at.Run.Status)
		}
		now = now.Add(time.Minute)
	}
	e.start1(t, f) // RUNNING: not replayed
	if _, err := e.svc.ReplayRuns(ctx, e.project, automation.ReplayRequest{Status: "SUCCEEDED"}); !errors.Is(err, automation.ErrInvalid) {
		t.Fatalf("replay of SUCCEEDED runs: err = %v, want a 400", err)
	}
	if _, err := e.svc.SearchRuns(ctx, e.project, automation.RunSearch{Since: "yesterday"}); !errors.Is(err, automation.ErrInvalid) {
		t.Fatalf("search since yesterday: err = %v, want a 400", err)
	}
	n, err := e.svc.ReplayRuns(ctx, e.project, automation.ReplayRequest{FlowID: f.ID, Status: "FAILED",
		Since: "2026-05-01T12:01:00Z", Until: "2026-05-01T13:00:00Z"})
	if err != nil || n.Replayed != 2 {
		t.Fatalf("replay = %+v, %v; want the 2 FAILED runs of the window", n, err)
	}
	running, err := e.svc.SearchRuns(ctx, e.project, automation.RunSearch{PageRequest: automation.PageRequest{Status: "RUNNING"}})
	if err != nil || len(running.Data) != 3 {
		t.Fatalf("RUNNING runs = %d, %v; want the unexecuted one and 2 replays", len(running.Data), err)
	}
	// The replays fail too, inside the window: replaying it again starts
	// the 2 originals again, never the replays (which would double it).
	for _, r := range running.Data {
		full, _ := e.svc.Run(ctx, e.project, f.ID, r.ID)
		if full.RetryOf == "" {
			continue
		}
		if at, _ := e.svc.ExecuteRun(ctx, e.project.ID, r.ID); at.Run.Status != automation.RunFailed {
			t.Fatalf("replayed run = %s, want FAILED", at.Run.Status)
		}
	}
	again, err := e.svc.ReplayRuns(ctx, e.project, automation.ReplayRequest{FlowID: f.ID, Status: "FAILED",
		Since: "2026-05-01T12:01:00Z", Until: "2026-05-01T13:00:00Z"})
	if err != nil || again.Replayed != 2 {
		t.Fatalf("second replay = %+v, %v; want the 2 originals, not their 2 replays", again, err)
	}
}

// TestMessageRetryLater: the runner's contract. A message whose run failed
// transiently comes back at the run's nextAttemptAt, and one whose run
// another attempt holds comes back when that lease would lapse: both as a
// RetryLater, never an exhausted run.
func TestMessageRetryLater(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, automation.RunPolicy{}, func() time.Time { return now })
	srv, _ := flowtest.StatusServer(t, 503)
	r := e.start1(t, e.flowCalling(t, srv.URL))
	ctx := context.Background()
	msg := []byte(`{"kind":"run","project":"` + r.Project + `","runId":"` + r.ID + `"}`)
	var later *automation.RetryLater
	err := e.svc.HandleMessage(ctx, msg)
	if !errors.As(err, &later) || !errors.Is(err, automation.ErrRetry) {
		t.Fatalf("HandleMessage after a 503 = %v, want RetryLater wrapping ErrRetry", err)
	}
	got, _ := e.svc.Run(ctx, e.project, r.FlowID, r.ID)
	if got.NextAttemptAt == nil || !later.At.Equal(*got.NextAttemptAt) {
		t.Fatalf("retry at %v, run's nextAttemptAt %v: want the same", later.At, got.NextAttemptAt)
	}
	lease := automation.RunPolicy{}.Lease()
	if _, err := e.Store.ClaimRun(ctx, r.Project, r.ID, now, lease); err != nil {
		t.Fatal(err)
	}
	err = e.svc.HandleMessage(ctx, msg)
	if !errors.As(err, &later) || !automation.IsRunClaimed(err) || !later.At.Equal(now.Add(lease)) {
		t.Fatalf("HandleMessage while another attempt holds the run = %v, want RetryLater at the lease's end", err)
	}
}

// TestCaptureRules: the Test Trigger's domain rules on the real store. An
// INACTIVE flow builder flow accepts exactly the one delivery that takes an
// armed capture, which becomes its sample and starts a run; the next is a
// 404; the capture window expires; re-arming keeps the sample.
func TestCaptureRules(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, automation.RunPolicy{}, func() time.Time { return now })
	ctx := context.Background()
	name, eng := "capture", automation.FlowBuilder
	f, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Engine: &eng})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(body string) (automation.Run, error) {
		wf, err := e.svc.WebhookFlow(ctx, f.ID)
		if err != nil {
			return automation.Run{}, err
		}
		return e.svc.ReceiveWebhook(ctx, wf, automation.TriggerData{Method: "POST", Headers: map[string]string{},
			Query: map[string]string{}, Body: json.RawMessage(body)})
	}
	if _, err := deliver(`{"n":0}`); !automation.IsNotFound(err) {
		t.Fatalf("delivery to an unarmed INACTIVE flow: err = %v, want 404", err)
	}
	if _, err := e.svc.WebhookSample(ctx, e.project, f.ID); !automation.IsNotFound(err) {
		t.Fatalf("sample before any capture: err = %v, want 404", err)
	}
	armed, err := e.svc.ArmWebhookTest(ctx, e.project, f.ID)
	if err != nil || !armed.ExpiresAt.Equal(now.Add(automation.CaptureWindow)) || armed.TestURL != "http://engine.test/api/v1/webhooks/"+f.ID {
		t.Fatalf("arm = %+v, %v", armed, err)
	}
	r, err := deliver(`{"n":1}`)
	if err != nil || r.Status != automation.RunRunning {
		t.Fatalf("the captured delivery = %+v, %v; want a run", r, err)
	}
	if _, err := deliver(`{"n":2}`); !automation.IsNotFound(err) {
		t.Fatalf("a second delivery to the INACTIVE flow: err = %v, want 404 (one delivery per arming)", err)
	}
	s, err := e.svc.WebhookSample(ctx, e.project, f.ID)
	if err != nil || s.Armed || string(s.Trigger.Body) != `{"n":1}` {
		t.Fatalf("sample = %+v, %v; want the first delivery, disarmed", s, err)
	}
	if _, err := e.svc.ArmWebhookTest(ctx, e.project, f.ID); err != nil {
		t.Fatal(err)
	}
	now = now.Add(automation.CaptureWindow + time.Second)
	if _, err := deliver(`{"n":3}`); !automation.IsNotFound(err) {
		t.Fatalf("a delivery after the window: err = %v, want 404", err)
	}
	if s, err := e.svc.WebhookSample(ctx, e.project, f.ID); err != nil || s.Armed || string(s.Trigger.Body) != `{"n":1}` {
		t.Fatalf("sample after re-arming and expiry = %+v, %v; want the kept sample", s, err)
	}
}

// TestInlineRunStopsAtTheAnswer: an ON_COMPLETION run stored claimed by its
// receiver (RunRuntime.Inline), whose inline attempt outlives the wait on a
// receiver that must not outlive its answer (StopInlineAtAnswer): the
// attempt gives the run back and makes its queue entry due at the retry
// time before AwaitRun returns, so that a worker takes it up then, not
// after the lease.
func TestInlineRunStopsAtTheAnswer(t *testing.T) {
	fe := flowtest.New(t, flowtest.Options{StopInlineAtAnswer: true})
	p, _ := fe.Project(t, "test", automation.PlanEnterprise)
	hold := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(hold) })
	ctx := context.Background()
	name, eng := "sync", automation.WorkflowBuilder
	steps := []automation.Step{flowtest.CallStep(slow.URL)}
	f, err := fe.Svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps,
		Trigger: &automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{
			HTTPMethod: "POST", Path: "slow/sync", ResponseMode: automation.RespondOnCompletion}}})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = fe.Svc.EnableFlow(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	rf, err := fe.Svc.RouteFlow(ctx, "slow/sync", "POST")
	if err != nil {
		t.Fatal(err)
	}
	r, err := fe.Svc.ReceiveWebhook(ctx, rf, automation.TriggerData{Method: "POST", Headers: map[string]string{},
		Query: map[string]string{}, Body: json.RawMessage(`{"ref":"main"}`)})
	if err != nil || r.LeaseToken == "" {
		t.Fatalf("ReceiveWebhook = token %q, %v; want the run claimed for the receiver", r.LeaseToken, err)
	}
	if _, ok, err := fe.Store.ClaimDue(ctx, time.Now(), time.Minute); err != nil || ok {
		t.Fatalf("ClaimDue while the receiver holds the run = %v, %v; want nothing due", ok, err)
	}
	got, err := fe.Svc.AwaitRun(ctx, r, 300*time.Millisecond)
	if err != nil || got.Status != automation.RunRunning {
		t.Fatalf("AwaitRun = %s, %v; want the run still RUNNING after the wait", got.Status, err)
	}
	stored, err := fe.Store.Run(ctx, p.ID, f.ID, r.ID)
	if err != nil || stored.NextAttemptAt == nil {
		t.Fatalf("run after the answer = %+v, %v; want it given back with nextAttemptAt", stored, err)
	}
	e, ok, err := fe.Store.ClaimDue(ctx, stored.NextAttemptAt.Add(time.Millisecond), time.Minute)
	if err != nil || !ok || e.RunID != r.ID || e.Run == nil || e.Run.Attempts != 2 || e.Run.Interrupted != 0 {
		t.Fatalf("ClaimDue at the retry time = %+v %v %v; want the run, attempt 2, none interrupted", e, ok, err)
	}
}
