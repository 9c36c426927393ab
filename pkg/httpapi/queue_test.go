package httpapi

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/sqlitestore"
)

// testQueue is the SQLite run queue with two test hooks: it counts the runs
// it accepted, so that a test can assert that a refused delivery made none,
// and it can fail on demand, to stand for a queue outage.
type testQueue struct {
	store    *sqlitestore.Store
	fail     atomic.Bool
	enqueued atomic.Int64
}

var _ automation.RunQueue = (*testQueue)(nil)

func (q *testQueue) Enqueue(ctx context.Context, r automation.Run) error {
	if q.fail.Load() {
		return errors.New("testqueue: queue unavailable")
	}
	if err := q.store.Enqueue(ctx, r); err != nil {
		return err
	}
	q.enqueued.Add(1)
	return nil
}

var _ automation.InlineQueue = (*testQueue)(nil)

// EnqueueClaimed is the store's ON_COMPLETION fast path, counted and
// failing on demand as Enqueue is.
func (q *testQueue) EnqueueClaimed(ctx context.Context, r automation.Run, now time.Time, lease time.Duration) (automation.Run, error) {
	if q.fail.Load() {
		return automation.Run{}, errors.New("testqueue: queue unavailable")
	}
	c, err := q.store.EnqueueClaimed(ctx, r, now, lease)
	if err != nil {
		return c, err
	}
	q.enqueued.Add(1)
	return c, nil
}

func (q *testQueue) Ack(ctx context.Context, runID string) error { return q.store.Ack(ctx, runID) }
func (q *testQueue) Retry(ctx context.Context, runID string, at time.Time) error {
	return q.store.Retry(ctx, runID, at)
}
func (q *testQueue) Park(ctx context.Context, runID, reason string) error {
	return q.store.Park(ctx, runID, reason)
}

// count is how many runs were made.
func (q *testQueue) count() int { return int(q.enqueued.Load()) }

// queued is one claimed queue entry; run is its run when the claim took
// it too (QueueEntry.Run), as the worker pool's claims do.
type queued struct {
	runID, project string
	run            *automation.Run
}

// claim takes up to n due entries off the queue, as a worker would.
func (q *testQueue) claim(t *testing.T, n int) []queued {
	t.Helper()
	var out []queued
	for len(out) < n {
		e, ok, err := q.store.ClaimDue(context.Background(), time.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		out = append(out, queued{e.RunID, e.Project, e.Run})
	}
	return out
}

// execute makes one attempt at the entry's run, as a worker does: the run
// the claim took, or (when it took none) a claim of its own.
func (e queued) execute(svc *automation.Service) (automation.Attempt, error) {
	if e.run != nil {
		return svc.ExecuteClaimed(context.Background(), *e.run)
	}
	return svc.ExecuteRun(context.Background(), e.project, e.runID)
}

// drain executes every due run once and acknowledges it, as the worker
// pool (pkg/runworker) does in flowd.
func drain(t *testing.T, svc *automation.Service, q *testQueue) {
	t.Helper()
	for _, e := range q.claim(t, 1000) {
		if _, err := e.execute(svc); err != nil {
			t.Logf("execute run %s: %v", e.runID, err)
		}
		if err := q.store.Ack(context.Background(), e.runID); err != nil {
			t.Fatal(err)
		}
	}
}
