// Package runworker is flowd's worker pool: it takes due entries from the
// embedded run queue, has the Service execute them, and acknowledges,
// reschedules or parks each entry by the outcome. (On AWS, SQS and the
// runner Lambda play this part.)
package runworker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"flowservice/pkg/automation"
)

// Entry is one queued run, claimed for a while.
type Entry struct {
	RunID    string
	Project  string
	Attempts int // claims so far, this one included
}

// Queue is the embedded run queue (sqlitestore implements it). Entries are
// named by their run's ID.
type Queue interface {
	// ClaimDue takes the oldest due entry that no live lease holds, leasing
	// it until now+lease and counting the claim in attempts; ok is false
	// when none is due.
	ClaimDue(ctx context.Context, now time.Time, lease time.Duration) (runID, project string, attempts int, ok bool, err error)
	// Ack removes a settled entry.
	Ack(ctx context.Context, runID string) error
	// Retry makes the entry due again at the given time.
	Retry(ctx context.Context, runID string, at time.Time) error
	// Park sets an entry aside for good, with the reason, for inspection.
	Park(ctx context.Context, runID, reason string) error
}

// Executor executes one attempt at a run: *automation.Service.
type Executor interface {
	ExecuteRun(ctx context.Context, project, runID string) (automation.Run, error)
}

// Config tunes a Pool. Zero fields take the defaults.
type Config struct {
	Workers     int           // default 4
	Lease       time.Duration // how long a claim holds an entry; default 6 minutes
	Poll        time.Duration // how often idle workers look for due entries; default 1s
	BaseBackoff time.Duration // first retry delay; default 2s, doubling per attempt
	MaxBackoff  time.Duration // default 5 minutes
	Log         *slog.Logger
}

// Pool runs queued runs with a fixed number of workers.
type Pool struct {
	q    Queue
	exec Executor
	cfg  Config
	wake chan struct{}
}

// New returns a pool; Run starts it.
func New(q Queue, exec Executor, cfg Config) *Pool {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 6 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.BaseBackoff <= 0 {
		cfg.BaseBackoff = 2 * time.Second
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Pool{q: q, exec: exec, cfg: cfg, wake: make(chan struct{}, 1)}
}

// Notify tells idle workers that an entry was queued, so a new run starts at
// once instead of at the next poll.
func (p *Pool) Notify() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run works until ctx ends, then lets the attempts under way finish.
// Entries of attempts cut short by a crash are taken up again when their
// lease expires.
func (p *Pool) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range p.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.work(ctx)
		}()
	}
	wg.Wait()
}

func (p *Pool) work(ctx context.Context) {
	for ctx.Err() == nil {
		var e Entry
		var ok bool
		var err error
		e.RunID, e.Project, e.Attempts, ok, err = p.q.ClaimDue(ctx, time.Now(), p.cfg.Lease)
		if err != nil && ctx.Err() == nil {
			p.cfg.Log.Error("claim queued run", "err", err)
		}
		if err != nil || !ok {
			select {
			case <-ctx.Done():
			case <-p.wake:
			case <-time.After(p.cfg.Poll):
			}
			continue
		}
		// The attempt runs to its end even during shutdown: the Service
		// bounds it with the run timeout.
		p.handle(context.WithoutCancel(ctx), e)
		// One entry done: another may be due, and a waiting peer may sleep.
		p.Notify()
	}
}

// handle executes one entry and settles it by the outcome.
func (p *Pool) handle(ctx context.Context, e Entry) {
	log := p.cfg.Log.With("run", e.RunID, "attempt", e.Attempts)
	_, err := p.exec.ExecuteRun(ctx, e.Project, e.RunID)
	switch {
	case err == nil:
		err = p.q.Ack(ctx, e.RunID)
	case errors.Is(err, automation.ErrExhausted):
		log.Warn("run failed for good; entry parked", "err", err)
		err = p.q.Park(ctx, e.RunID, err.Error())
	default:
		at := time.Now().Add(p.backoff(e.Attempts))
		log.Info("run will be retried", "at", at, "err", err)
		err = p.q.Retry(ctx, e.RunID, at)
	}
	if err != nil {
		// The lease expires and the entry is claimed again: nothing is lost.
		log.Error("settle queue entry", "err", err)
	}
}

// backoff is the delay before attempt n+1: exponential with full jitter in
// its upper half, so retries of many runs do not arrive in step.
func (p *Pool) backoff(n int) time.Duration {
	d := p.cfg.BaseBackoff
	for i := 1; i < n && d < p.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, p.cfg.MaxBackoff)
	return d/2 + rand.N(d/2+1)
}

// Notifying wraps the queue runs are accepted into, so that every accepted
// run wakes an idle worker at once.
func (p *Pool) Notifying(q automation.RunQueue) automation.RunQueue {
	return notifying{q, p}
}

type notifying struct {
	automation.RunQueue
	p *Pool
}

func (n notifying) Enqueue(ctx context.Context, r automation.Run) error {
	if err := n.RunQueue.Enqueue(ctx, r); err != nil {
		return err
	}
	n.p.Notify()
	return nil
}
