package pgstore

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// dueChannel is the NOTIFY channel an enqueue announces a due run on. A
// notification is only a hint: the workers also poll, so a node that
// missed one (its listener was reconnecting) takes the run at its next
// poll.
const dueChannel = "flowd_run_due"

// changesChannel is the NOTIFY channel a write announces, at its commit,
// a change to what the nodes keep in memory on: every node's listener
// (including the writer's own) drops or updates its copy. The payloads:
//
//	subscriptions           alert subscriptions changed (alerts.go)
//	flows                   flows, routes or a capture's arming changed (flowcache.go)
//	flows stop <id> <time>  the flow was disabled at <time> (flowstop.go)
//	flows drop <id>         the flow was deleted
//
// Channels are database-wide, not per schema: installations sharing a
// database in several schemas drop each other's caches now and then,
// which costs a reload and nothing else.
const changesChannel = "flowd_changes"

// notifyDue announces, at the commit of tx, that a run is due. PostgreSQL
// folds the same notification of one transaction into one.
func notifyDue(ctx context.Context, tx *txn) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_notify('`+dueChannel+`', '')`)
	return err
}

// notifyChange announces payload on changesChannel at the commit of tx,
// and only if it commits.
func notifyChange(ctx context.Context, tx *txn, payload string) error {
	_, err := tx.ExecContext(ctx, `SELECT pg_notify('`+changesChannel+`', ?)`, payload)
	return err
}

// listenRetry is how long the listener waits before it connects again
// after its connection failed.
const listenRetry = time.Second

// listenCheck is how often an idle listener proves its connection alive
// (a round trip within the same time): a connection that died without a
// reset (a half-open TCP connection, a failed-over database) would
// otherwise leave the caches trusted while their invalidations are lost.
const listenCheck = 5 * time.Second

// wakeState is the store's one listener connection: it takes both
// channels, calls the ListenDue callbacks for due runs, and keeps the
// caches coherent with changes made on every node.
type wakeState struct {
	mu     sync.Mutex
	onDue  map[int]func()
	nextID int
	// up is true while the listener holds a connection that has LISTENed
	// since the caches were last dropped: only then may a cache keep
	// what it reads (a change made while it is down would go unseen).
	up     atomic.Bool
	seen   atomic.Uint64 // change notifications handled (tests)
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startListener starts the listener; Close stops it.
func (s *Store) startListener() {
	ctx, cancel := context.WithCancel(context.Background())
	s.wake.cancel = cancel
	s.wake.wg.Go(func() {
		for ctx.Err() == nil {
			s.listenOnce(ctx)
			select {
			case <-ctx.Done():
			case <-time.After(listenRetry):
			}
		}
	})
}

func (w *wakeState) stop() {
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
}

// ListenDue calls onDue whenever any node enqueues a run, until ctx ends or
// the store closes, and once when it begins (or when the listener
// connects): runs enqueued while nobody listened are due already. onDue
// must not block: the worker pool's waker only nudges an idle worker.
func (s *Store) ListenDue(ctx context.Context, onDue func()) {
	s.wake.mu.Lock()
	if s.wake.onDue == nil {
		s.wake.onDue = map[int]func(){}
	}
	id := s.wake.nextID
	s.wake.nextID++
	s.wake.onDue[id] = onDue
	up := s.wake.up.Load()
	s.wake.mu.Unlock()
	if up {
		onDue()
	}
	context.AfterFunc(ctx, func() {
		s.wake.mu.Lock()
		delete(s.wake.onDue, id)
		s.wake.mu.Unlock()
	})
}

// due calls every ListenDue callback.
func (s *Store) due() {
	s.wake.mu.Lock()
	fns := make([]func(), 0, len(s.wake.onDue))
	for _, f := range s.wake.onDue {
		fns = append(fns, f)
	}
	s.wake.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

// dropCaches forgets everything cached from the database.
func (s *Store) dropCaches() {
	s.forgetSubscriptions()
	s.cache.invalidate()
}

func (s *Store) listenOnce(ctx context.Context) {
	conn, err := pgx.Connect(ctx, s.url)
	if err != nil {
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range []string{dueChannel, changesChannel} {
		if _, err := conn.Exec(ctx, `LISTEN `+ch); err != nil {
			return
		}
	}
	// Every change from now on arrives here; what changed before is read
	// again: the stops from the flows, the caches at their next use.
	if err := s.loadStops(ctx); err != nil {
		return
	}
	s.wake.mu.Lock()
	s.wake.up.Store(true)
	s.wake.mu.Unlock()
	defer func() {
		s.wake.up.Store(false)
		s.dropCaches()
	}()
	s.dropCaches()
	s.due()
	for {
		wctx, cancel := context.WithTimeout(ctx, listenCheck)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil && wctx.Err() != nil:
			// Idle for listenCheck: prove the connection answers.
			pctx, cancel := context.WithTimeout(ctx, listenCheck)
			_, err := conn.Exec(pctx, `SELECT 1`)
			cancel()
			if err != nil {
				return
			}
		case err != nil:
			return
		case n.Channel == dueChannel:
			s.due()
		case n.Channel == changesChannel:
			s.changed(n.Payload)
			s.wake.seen.Add(1)
		}
	}
}

// changed applies one change notification.
func (s *Store) changed(payload string) {
	f := strings.Fields(payload)
	if len(f) == 0 {
		return
	}
	switch f[0] {
	case "subscriptions":
		s.forgetSubscriptions()
	case "flows":
		s.cache.invalidate()
		switch {
		case len(f) == 4 && f[1] == "stop":
			if at, err := parseTime(f[3]); err == nil {
				s.stops.set(f[2], &at)
			}
		case len(f) == 3 && f[1] == "drop":
			s.stops.drop(f[2])
		}
	default:
		// A newer node's change this one does not know: drop everything.
		s.dropCaches()
	}
}
