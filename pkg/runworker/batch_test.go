package runworker_test

import (
	"context"
	"net/http"
	"net/http/httptest"
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

// recordingQueue is the store's work queue, recording each batch claim: how
// many entries the pool asked for and how many it got.
type recordingQueue struct {
	*sqlitestore.Store
	mu     sync.Mutex
	claims [][2]int // {asked, got}
}

func (q *recordingQueue) ClaimDueBatch(ctx context.Context, now time.Time, lease time.Duration, max int) ([]automation.QueueEntry, error) {
	es, err := q.Store.ClaimDueBatch(ctx, now, lease, max)
	q.mu.Lock()
	q.claims = append(q.claims, [2]int{max, len(es)})
	q.mu.Unlock()
	return es, err
}

// TestPoolClaimsForIdleWorkersAtOnce: runs queued before the pool starts
// are claimed for all idle workers in one claim, never more attempts run at
// once than there are workers, and every run is executed exactly once.
func TestPoolClaimsForIdleWorkersAtOnce(t *testing.T) {
	const workers, runs = 8, 40
	var q *recordingQueue
	var pool *runworker.Pool
	fe := flowtest.New(t, flowtest.Options{Queue: func(s *sqlitestore.Store) automation.RunQueue {
		q = &recordingQueue{Store: s}
		pool = runworker.New(q, runworker.Config{Workers: workers, Poll: 10 * time.Millisecond})
		return pool.Notifying(s)
	}})
	p, _ := fe.Project(t, "batch", automation.PlanEnterprise)
	var inflight, most atomic.Int32
	var calls sync.Map // Idempotency-Key -> calls
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		c, _ := calls.LoadOrStore(r.Header.Get("Idempotency-Key"), new(atomic.Int32))
		c.(*atomic.Int32).Add(1)
		// A sender slow on purpose, so that attempts overlap and the bound on
		// attempts at once is tested; no event can stand in for a slow peer.
		time.Sleep(2 * time.Millisecond)
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(sink.Close)
	f := fe.ActiveFlow(t, p, "batch", flowtest.CallStep(sink.URL))
	started := make([]automation.Run, runs)
	for i := range started {
		started[i] = fe.StartRef(t, f)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { pool.Run(ctx, fe.Svc); close(done) }()
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
		if got.Status != automation.RunSucceeded || got.Attempts != 1 {
			t.Fatalf("run %s = %s after %d attempts; want SUCCEEDED after 1", r.ID, got.Status, got.Attempts)
		}
		if c, ok := calls.Load(r.ID + ".call"); !ok || c.(*atomic.Int32).Load() != 1 {
			t.Fatalf("run %s called the sink %v times, want once", r.ID, c)
		}
	}
	if m := most.Load(); m > workers {
		t.Fatalf("%d attempts ran at once with %d workers", m, workers)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.claims) == 0 || q.claims[0] != [2]int{workers, workers} {
		t.Fatalf("first claim (asked, got) = %v; want one claim of %d for the idle pool", q.claims[:min(len(q.claims), 1)], workers)
	}
	total := 0
	for _, c := range q.claims {
		if c[0] > workers || c[1] > c[0] {
			t.Fatalf("claim (asked, got) = %v with %d workers", c, workers)
		}
		total += c[1]
	}
	if total != runs {
		t.Fatalf("claims took %d entries for %d runs, want each once", total, runs)
	}
}
