package runworker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/runworker"
	"flowservice/pkg/sqlitestore"
)

// sizedQueue is the store's work queue with every entry said to be
// entryBytes large, and the bytes under way (claimed, attempt not yet
// returned) at each claim recorded.
type sizedQueue struct {
	*sqlitestore.Store
	mu       sync.Mutex
	inFlight int64
	atClaim  []int64
}

const entryBytes = 1000

func (q *sizedQueue) ClaimDueBatch(ctx context.Context, now time.Time, lease time.Duration, max int) ([]automation.QueueEntry, error) {
	q.mu.Lock()
	q.atClaim = append(q.atClaim, q.inFlight)
	q.mu.Unlock()
	es, err := q.Store.ClaimDueBatch(ctx, now, lease, max)
	for i := range es {
		es[i].Bytes = entryBytes
	}
	q.mu.Lock()
	q.inFlight += int64(len(es)) * entryBytes
	q.mu.Unlock()
	return es, err
}

// doneCounting gives an attempt's bytes back to q when it returns, before
// the pool does.
type doneCounting struct {
	runworker.Executor
	q *sizedQueue
}

func (d doneCounting) ExecuteClaimed(ctx context.Context, r automation.Run) (automation.Attempt, error) {
	defer d.release()
	return d.Executor.ExecuteClaimed(ctx, r)
}

func (d doneCounting) ExecuteRun(ctx context.Context, project, id string) (automation.Attempt, error) {
	defer d.release()
	return d.Executor.ExecuteRun(ctx, project, id)
}

func (d doneCounting) release() {
	d.q.mu.Lock()
	d.q.inFlight -= entryBytes
	d.q.mu.Unlock()
}

// TestPoolBudgetsRunBytes: idle workers claim nothing while the runs under
// way hold Config.MaxBytes of documents, and every run still executes.
func TestPoolBudgetsRunBytes(t *testing.T) {
	const workers, runs, budget = 8, 24, 2500
	var q *sizedQueue
	var pool *runworker.Pool
	fe := flowtest.New(t, flowtest.Options{Queue: func(s *sqlitestore.Store) automation.RunQueue {
		q = &sizedQueue{Store: s}
		pool = runworker.New(q, runworker.Config{Workers: workers, Poll: 10 * time.Millisecond, MaxBytes: budget})
		return pool.Notifying(s)
	}})
	p, _ := fe.Project(t, "budget", automation.PlanEnterprise)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A sender slow on purpose, so that attempts overlap and claims are
		// made with bytes under way; no event can stand in for a slow peer.
		time.Sleep(5 * time.Millisecond)
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(sink.Close)
	f := fe.ActiveFlow(t, p, "budget", flowtest.CallStep(sink.URL))
	started := make([]automation.Run, runs)
	for i := range started {
		started[i] = fe.StartRef(t, f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { pool.Run(ctx, doneCounting{Executor: fe.Svc, q: q}); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	for _, r := range started {
		var got automation.Run
		testwait.Event(t, "run "+r.ID+" to end", func() bool {
			var err error
			if got, err = fe.Store.Run(context.Background(), p.ID, f.ID, r.ID); err != nil {
				t.Fatal(err)
			}
			return got.Status.Final()
		})
		if got.Status != automation.RunSucceeded {
			t.Fatalf("run %s = %s; want SUCCEEDED", r.ID, got.Status)
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, b := range q.atClaim {
		if b >= budget {
			t.Fatalf("claim %d was made with %d bytes under way, budget %d (all: %v)", i, b, budget, q.atClaim)
		}
	}
}
