package runworker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/runworker"
	"flowservice/pkg/sqlitestore"
)

// env is a Service on a real SQLite store with the real engine, and a pool
// that is not yet running.
type env struct {
	fe      *flowtest.Env
	svc     *automation.Service
	store   *sqlitestore.Store
	pool    *runworker.Pool
	project automation.Project
}

func newEnv(t *testing.T, policy automation.RunPolicy) *env {
	t.Helper()
	policy.BaseBackoff, policy.MaxBackoff = 10*time.Millisecond, 40*time.Millisecond
	var pool *runworker.Pool
	fe := flowtest.New(t, flowtest.Options{Policy: policy, Queue: func(s *sqlitestore.Store) automation.RunQueue {
		pool = runworker.New(s, runworker.Config{Workers: 2, Poll: 20 * time.Millisecond, Policy: policy})
		return pool.Notifying(s)
	}})
	p, _ := fe.Project(t, "test", automation.PlanEnterprise)
	return &env{fe: fe, svc: fe.Svc, store: fe.Store, pool: pool, project: p}
}

// start runs the pool until the test ends.
func (e *env) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.pool.Run(ctx, e.svc); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

// flowCalling makes an ACTIVE flow builder flow with one HTTP step to url.
func (e *env) flowCalling(t *testing.T, url string) automation.Flow {
	return e.fe.ActiveFlow(t, e.project, "caller", flowtest.CallStep(url))
}

func (e *env) start1(t *testing.T, f automation.Flow) automation.Run { return e.fe.StartRef(t, f) }

// waitFinal polls the run until it is final.
func (e *env) waitFinal(t *testing.T, r automation.Run) automation.Run {
	t.Helper()
	var got automation.Run
	testwait.Event(t, "run "+r.ID+" to end", func() bool {
		var err error
		if got, err = e.svc.Run(context.Background(), e.project, r.FlowID, r.ID); err != nil {
			t.Fatal(err)
		}
		return got.Status.Final()
	})
	return got
}

func TestTransientFailuresAreRetried(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{MaxAttempts: 5})
	srv, calls := flowtest.StatusServer(t, 503, 502, 200)
	e.start(t)
	r := e.waitFinal(t, e.start1(t, e.flowCalling(t, srv.URL)))
	if r.Status != automation.RunSucceeded || r.Attempts != 3 || calls.Load() != 3 {
		t.Fatalf("run = %s after %d attempts, %d calls; want SUCCEEDED after 3", r.Status, r.Attempts, calls.Load())
	}
	f, _ := e.svc.Flow(context.Background(), e.project, r.FlowID)
	if f.RunCount != 1 || f.SuccessRate != 100 || f.LastRun == nil {
		t.Fatalf("flow stats = %d runs, %v%%, last %v", f.RunCount, f.SuccessRate, f.LastRun)
	}
	// The run is final before its worker acknowledges the entry: wait for
	// the acknowledgement rather than race it.
	testwait.Event(t, "the queue to be empty after success", func() bool {
		pending, parked, err := e.store.QueueStats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return pending+parked == 0
	})
}

func TestExhaustedRunIsFailedAndParked(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{MaxAttempts: 3})
	srv, calls := flowtest.StatusServer(t, 503)
	e.start(t)
	r := e.waitFinal(t, e.start1(t, e.flowCalling(t, srv.URL)))
	if r.Status != automation.RunFailed || r.Attempts != 3 || calls.Load() != 3 {
		t.Fatalf("run = %s after %d attempts, %d calls; want FAILED after 3", r.Status, r.Attempts, calls.Load())
	}
	if !strings.Contains(r.Error, "gave up after 3 attempts") || !strings.Contains(r.Error, "503") {
		t.Fatalf("error = %q, want the reason", r.Error)
	}
	testwait.Event(t, "the entry to be parked, none pending", func() bool {
		pending, parked, err := e.store.QueueStats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return pending == 0 && parked == 1
	})
	f, _ := e.svc.Flow(context.Background(), e.project, r.FlowID)
	if f.RunCount != 1 || f.SuccessRate != 0 {
		t.Fatalf("flow stats = %d runs, %v%%", f.RunCount, f.SuccessRate)
	}
}

func TestPermanentFailureIsNotRetried(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{MaxAttempts: 5})
	srv, calls := flowtest.StatusServer(t, 400)
	e.start(t)
	r := e.waitFinal(t, e.start1(t, e.flowCalling(t, srv.URL)))
	if r.Status != automation.RunFailed || r.Attempts != 1 || calls.Load() != 1 {
		t.Fatalf("run = %s after %d attempts, %d calls; want FAILED after 1", r.Status, r.Attempts, calls.Load())
	}
}
