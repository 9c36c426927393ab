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
	t.Helper()
	ctx := context.Background()
	name, eng := "caller", automation.FlowBuilder
	steps := []automation.Step{{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: url,
		Body: json.RawMessage(`{"ref": "{{ trigger.body.ref }}"}`)}}
	f, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = e.svc.EnableFlow(ctx, e.project, f.ID); err != nil {
		t.Fatal(err)
	}
	return f
}

func (e *env) start1(t *testing.T, f automation.Flow) automation.Run {
	t.Helper()
	r, err := e.svc.StartRun(context.Background(), f, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{"ref":"main"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// service answers with the statuses in order, then the last one forever,
// and counts the requests.
func service(t *testing.T, statuses ...int) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1))
		w.WriteHeader(statuses[min(n, len(statuses))-1])
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// TestRedeliveryDoesNotRunTwice executes a finished run again, as a second
// delivery of its queue message would: nothing happens.
func TestRedeliveryDoesNotRunTwice(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	srv, calls := service(t, 200)
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
	srv, _ := service(t, 200)
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
