// Package runworker is flowd's worker pool: it takes due entries from the
// embedded run queue (automation.WorkQueue), has the Service execute them,
// and acknowledges, reschedules or parks each entry by the attempt's
// automation.Outcome. (On AWS, SQS and the runner Lambda play this part.)
package runworker

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"flowservice/pkg/automation"
)

// Executor executes one attempt at a run: *automation.Service.
type Executor interface {
	ExecuteRun(ctx context.Context, project, runID string) (automation.Attempt, error)
	// ExecuteClaimed executes a run the queue claimed with its entry
	// (automation.QueueEntry.Run).
	ExecuteClaimed(ctx context.Context, r automation.Run) (automation.Attempt, error)
}

// Config tunes a Pool. Zero fields take the defaults.
type Config struct {
	Workers int           // default 64
	Poll    time.Duration // how often idle workers look for due entries; default 1s
	// Policy gives the lease of a claimed entry (Policy.Lease) and the
	// backoff between attempts (Policy.Backoff): the Service's policy.
	Policy automation.RunPolicy
	Log    *slog.Logger
	// MaxBytes bounds the stored documents of the runs under way together
	// (automation.QueueEntry.Bytes), default DefaultMaxBytes: past it, idle
	// workers claim nothing until attempts end, so that many large runs
	// due at once (a restart, WAITs that end together) are worked through
	// a few at a time instead of loaded all at once.
	MaxBytes int64
	// PerProject bounds the workers one project's attempts hold at once,
	// where the queue can share its claims (automation.SharedWorkQueue):
	// default Workers - Workers/4, so that a quarter of the workers is
	// always left to the projects without a backlog.
	PerProject int
}

// DefaultMaxBytes is Config.MaxBytes unless set: a run holds a few times
// its stored document while it executes (docs/reliability.md).
const DefaultMaxBytes = 128 << 20

// Pool runs queued runs with a fixed number of workers. It is built before
// the Service it executes with (Notifying wraps the Service's queue) and
// started with it (Run).
type Pool struct {
	q    automation.WorkQueue
	cfg  Config
	wake chan struct{}

	mu         sync.Mutex
	queued     map[string]struct{} // projects that queued runs since lastShared
	lastShared time.Time           // the last shared claim (SharedWorkQueue)
}

// New returns a pool over q; Run starts it.
func New(q automation.WorkQueue, cfg Config) *Pool {
	if cfg.Workers <= 0 {
		cfg.Workers = 64
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	cfg.Policy = cfg.Policy.WithDefaults()
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.PerProject <= 0 || cfg.PerProject > cfg.Workers {
		cfg.PerProject = max(1, cfg.Workers-cfg.Workers/4)
	}
	return &Pool{q: q, cfg: cfg, wake: make(chan struct{}, 1), queued: map[string]struct{}{}}
}

// queuedBy records that project queued a run (Notifying).
func (p *Pool) queuedBy(project string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queued) < maxQueuedBy {
		p.queued[project] = struct{}{}
	}
}

// maxQueuedBy bounds the projects remembered between two shared claims.
const maxQueuedBy = 1024

// lookFurther reports whether a claim should look past the entries of the
// projects at their share: a project below its share queued a run since
// the last such claim, or a poll interval passed (a retry or WAIT of
// another project may be due).
func (p *Pool) lookFurther(share automation.Share) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	other := false
	for project := range p.queued {
		other = other || share.Held[project] < share.PerProject
	}
	if !other && now.Sub(p.lastShared) < p.cfg.Poll {
		return false
	}
	clear(p.queued)
	p.lastShared = now
	return true
}

// Notify tells idle workers that an entry was queued, so a new run starts at
// once instead of at the next poll.
func (p *Pool) Notify() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// maxClaim bounds the entries one claim takes: past a few dozen the claim's
// transaction holds the writer longer than the commit it saves.
const maxClaim = 64

// Run works with exec until ctx ends, then lets the attempts under way
// finish. Entries of attempts cut short by a crash are taken up again when
// their lease expires.
//
// One goroutine claims for every idle worker at once (ClaimDueBatch, one
// write for the batch, each run claimed with its entry) and hands each
// entry claimed to one of cfg.Workers long-lived worker goroutines; at most
// cfg.Workers attempts run at a time. While a claim commits, more workers
// fall idle, so batches grow with the load by themselves, as the store's
// group commit does. The workers live as long as the pool: a goroutine per
// attempt started on a small stack and grew it again for every run (the
// expression VM's frames), which was a measurable share of the CPU profile.
func (p *Pool) Run(ctx context.Context, exec Executor) {
	var wg sync.WaitGroup
	busy := make(chan struct{}, p.cfg.Workers)              // one token per attempt under way
	work := make(chan automation.QueueEntry, p.cfg.Workers) // never full: a token per entry
	var (
		mu       sync.Mutex
		inFlight int64                    // Bytes of the entries under way
		freed    = make(chan struct{}, 1) // an attempt ended and gave its bytes back
		held     = map[string]int{}       // attempts under way by project
	)
	shared, _ := p.q.(automation.SharedWorkQueue)
	for range p.cfg.Workers {
		wg.Go(func() {
			for e := range work {
				// The attempt runs to its end even during shutdown: the
				// Service bounds it with the run timeout.
				p.handle(context.WithoutCancel(ctx), exec, e)
				mu.Lock()
				inFlight -= e.Bytes
				if held[e.Project]--; held[e.Project] <= 0 {
					delete(held, e.Project)
				}
				mu.Unlock()
				select {
				case freed <- struct{}{}:
				default:
				}
				<-busy
			}
		})
	}
	overBudget := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return inFlight >= p.cfg.MaxBytes
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	for {
		// Wait for an idle worker, then take every other one idle now.
		select {
		case busy <- struct{}{}:
		case <-ctx.Done():
			return
		}
		for overBudget() {
			select {
			case <-freed:
			case <-ctx.Done():
				return
			}
		}
		n := 1
	idle:
		for n < min(p.cfg.Workers, maxClaim) {
			select {
			case busy <- struct{}{}:
				n++
			default:
				break idle
			}
		}
		var (
			es          []automation.QueueEntry
			err         error
			sharedClaim bool
		)
		mu.Lock()
		share := automation.Share{Held: maps.Clone(held), PerProject: p.cfg.PerProject}
		mu.Unlock()
		if shared != nil && share.Capped() && p.lookFurther(share) {
			// A project with a backlog gets its share of the workers, not
			// all of them (docs/reliability.md): while one holds its
			// share, a claim looks past its entries for another
			// project's, when another project queued a run since the
			// last such claim, and at least every poll.
			es, err = shared.ClaimDueShared(ctx, time.Now(), p.cfg.Policy.Lease(), n, share)
			sharedClaim = true
		} else {
			es, err = p.q.ClaimDueBatch(ctx, time.Now(), p.cfg.Policy.Lease(), n)
		}
		if err != nil && ctx.Err() == nil {
			p.cfg.Log.Error("claim queued runs", "err", err)
		}
		for range n - len(es) {
			<-busy
		}
		mu.Lock()
		for _, e := range es {
			inFlight += e.Bytes
			held[e.Project]++
		}
		mu.Unlock()
		var attemptEnded <-chan struct{}
		if sharedClaim {
			// A short shared batch may have left due entries of the
			// projects at their share: look again when an attempt ends.
			attemptEnded = freed
		}
		for _, e := range es {
			work <- e
		}
		if err != nil || len(es) < n {
			// Fewer due than idle workers: sleep until a run is queued,
			// a retry may be due (poll), or shutdown. A full batch looks
			// again at once: more may be waiting.
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			case <-attemptEnded:
			case <-time.After(p.cfg.Poll):
			}
		}
	}
}

// handle executes one entry and settles it by the outcome.
func (p *Pool) handle(ctx context.Context, exec Executor, e automation.QueueEntry) {
	// The entry's logger is made when a line is written: With formats its
	// attributes at once, which the common case (a finished run) skips.
	log := func() *slog.Logger { return p.cfg.Log.With("run", e.RunID, "claim", e.Claims) }
	var (
		at  automation.Attempt
		err error
	)
	if e.Run != nil {
		at, err = exec.ExecuteClaimed(ctx, *e.Run)
	} else {
		at, err = exec.ExecuteRun(ctx, e.Project, e.RunID)
	}
	switch at.Outcome {
	case automation.OutcomeFinished:
		if at.Run.Status == automation.RunSucceeded || at.Run.Status == automation.RunTimeout {
			// This attempt finished the run, and the finish took the entry
			// with it (WorkQueue): nothing to acknowledge.
			break
		}
		err = p.q.Ack(ctx, e.RunID)
	case automation.OutcomeClaimed:
		// Another attempt (an ON_COMPLETION receiver's) holds the run: the
		// expected hand-over. Look again when its lease would run out.
		log().Debug("run is held by another attempt")
		err = p.q.Retry(ctx, e.RunID, time.Now().Add(p.cfg.Policy.Lease()))
	case automation.OutcomeExhausted:
		log().Warn("run failed for good; entry parked", "err", err)
		err = p.q.Park(ctx, e.RunID, err.Error())
	default: // OutcomeRetry
		next := at.RetryAt // the run's nextAttemptAt
		if next.IsZero() { // the attempt did not get as far as the run
			next = time.Now().Add(p.cfg.Policy.Backoff(max(at.Attempts, e.Claims)))
		}
		log().Info("run will be retried", "at", next, "err", err)
		err = p.q.Retry(ctx, e.RunID, next)
	}
	if err != nil {
		// The lease expires and the entry is claimed again: nothing is lost.
		log().Error("settle queue entry", "err", err)
	}
}

// Notifying wraps the queue runs are accepted into, so that every accepted
// run wakes an idle worker at once. A queue with the inline fast path
// (automation.InlineQueue) keeps it: its runs are claimed by their
// receivers, and no worker needs waking.
func (p *Pool) Notifying(q automation.RunQueue) automation.RunQueue {
	if iq, ok := q.(automation.InlineQueue); ok {
		return notifyingInline{notifying{q, p}, iq}
	}
	return notifying{q, p}
}

type notifyingInline struct {
	notifying
	automation.InlineQueue
}

type notifying struct {
	automation.RunQueue
	p *Pool
}

func (n notifying) Enqueue(ctx context.Context, r automation.Run) error {
	if err := n.RunQueue.Enqueue(ctx, r); err != nil {
		return err
	}
	n.p.queuedBy(r.Project)
	n.p.Notify()
	return nil
}

// Waking wraps the queue's Waker (automation.RunRuntime.SlotWaker) so that the
// runs it wakes are claimed at once, not at the next poll.
func (p *Pool) Waking(w automation.SlotWaker) automation.SlotWaker { return waking{w, p} }

type waking struct {
	automation.SlotWaker
	p *Pool
}

func (w waking) Wake(ctx context.Context, runIDs []string, now time.Time) error {
	if err := w.SlotWaker.Wake(ctx, runIDs, now); err != nil {
		return err
	}
	w.p.Notify()
	return nil
}
