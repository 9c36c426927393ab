package pgstore

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// dueChannel is the NOTIFY channel an enqueue announces a due run on. A
// notification is only a hint: the workers also poll, so a node that
// missed one (its listener was reconnecting) takes the run at its next
// poll.
const dueChannel = "flowd_run_due"

// notifyDue announces, at the commit of tx, that a run is due. PostgreSQL
// folds the same notification of one transaction into one.
func notifyDue(ctx context.Context, tx *txn) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_notify('`+dueChannel+`', '')`)
	return err
}

type wakeState struct {
	mu     sync.Mutex
	cancel []context.CancelFunc
	wg     sync.WaitGroup
}

func (w *wakeState) init() {}

func (w *wakeState) stop() {
	w.mu.Lock()
	for _, c := range w.cancel {
		c()
	}
	w.cancel = nil
	w.mu.Unlock()
	w.wg.Wait()
}

// listenRetry is how long a listener waits before it connects again after
// its connection failed.
const listenRetry = time.Second

// ListenDue calls onDue whenever any node enqueues a run, until ctx ends or
// the store closes, on a connection of its own (one per call). onDue must
// not block: the worker pool's waker only nudges an idle worker.
func (s *Store) ListenDue(ctx context.Context, onDue func()) {
	ctx, cancel := context.WithCancel(ctx)
	s.wake.mu.Lock()
	s.wake.cancel = append(s.wake.cancel, cancel)
	s.wake.mu.Unlock()
	s.wake.wg.Go(func() {
		for ctx.Err() == nil {
			s.listenOnce(ctx, onDue)
			select {
			case <-ctx.Done():
			case <-time.After(listenRetry):
			}
		}
	})
}

func (s *Store) listenOnce(ctx context.Context, onDue func()) {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+dueChannel); err != nil {
		return
	}
	// Runs enqueued while the listener was away are due already.
	onDue()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return
		}
		onDue()
	}
}
