// Package cronscheduler is flowd's automation.Scheduler: an in-process cron
// (robfig/cron) that starts a scheduled run of each ACTIVE SCHEDULE flow
// when its schedule fires, and polls each ACTIVE POLL flow every interval. Schedules live in memory only, so flowd loads
// them from the store at start (Load with Service.ScheduledFlows) and the
// Service keeps them in step through SyncSchedule and RemoveSchedule.
//
// A firing is named by its due time (RFC 3339, UTC): the Service derives
// the run ID from it, so a firing handled twice is still one run.
package cronscheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"flowservice/pkg/automation"
	"flowservice/pkg/cronspec"
)

// Starter starts the run of one firing; *automation.Service implements it.
type Starter interface {
	StartScheduledRun(ctx context.Context, project, flowID string, firedAt time.Time, key string) (automation.Run, error)
}

// PollStarter polls a POLL flow once; *automation.Service implements it.
// A Starter that is not one polls nothing.
type PollStarter interface {
	PollFlow(ctx context.Context, project, flowID string) error
}

// fireTimeout bounds one firing's StartScheduledRun, which only writes the
// run and queues it: a store that hangs must not pile up goroutines.
const fireTimeout = time.Minute

// Scheduler keeps one cron entry per ACTIVE SCHEDULE flow.
type Scheduler struct {
	start Starter // set by Start, before the first firing
	log   *slog.Logger
	cron  *cron.Cron
	// parse is cronspec.Parse, so that what validates is what runs;
	// tests swap it for a parser with seconds.
	parse func(spec, timezone string) (cron.Schedule, *time.Location, error)
	// every is the schedule of a POLL flow polled every d: cron.Every;
	// tests swap it for ticks aligned on the clock, which every node
	// computes alike (UsePollSchedule).
	every func(d time.Duration) cron.Schedule
	// now is the clock firings are named by; the runner itself keeps
	// time.Now.
	now func() time.Time
	// gate, when set, is asked before every firing: a node that does not
	// hold the cluster's cron duty keeps its entries but fires none, so
	// that it can take the duty over at once (Gate).
	gate func() bool

	// ctx is the context of firings; cancel aborts them when Stop gives up
	// waiting.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	entries map[key]*entry
	// polls are the polls started outside the cron runner (a POLL flow
	// just enabled), which Stop waits for as it waits for the runner's.
	polls sync.WaitGroup
}

var _ automation.Scheduler = (*Scheduler)(nil)

// key identifies a flow; flow IDs are unique, but the project keeps a
// RemoveSchedule of another project's flow from touching it.
type key struct{ project, flowID string }

// entry is one flow's schedule.
type entry struct {
	id              cron.EntryID
	project, flowID string
	cron, timezone  string
	schedule        cron.Schedule // in the flow's time zone
	s               *Scheduler
	// poll: the entry polls a POLL flow ("@every <every>") rather than
	// start a run.
	poll bool

	mu   sync.Mutex
	last time.Time // the last due time fired, or when the entry was made
}

// New returns a Scheduler that logs firings that fail to log. It is the
// Service's automation.Scheduler, so it exists before the Service; it fires
// nothing before Start hands it what it starts runs on. Schedules may be
// loaded and synced before.
func New(log *slog.Logger) *Scheduler {
	ctx, cancel := context.WithCancel(context.Background())
	return &Scheduler{
		log: log,
		// Entries carry their own time zone (zoned), so the runner's own
		// location does not matter; UTC keeps it independent of the host.
		cron:    cron.New(cron.WithLocation(time.UTC)),
		parse:   cronspec.Parse,
		every:   func(d time.Duration) cron.Schedule { return cron.Every(d) },
		now:     time.Now,
		ctx:     ctx,
		cancel:  cancel,
		entries: make(map[key]*entry),
	}
}

// Load registers the schedules of flows, as flowd does at start with
// Service.ScheduledFlows. It registers every flow it can and returns an
// error naming those it could not (a spec stored before validation tightened).
func (s *Scheduler) Load(ctx context.Context, flows []automation.Flow) error {
	var errs []error
	for _, f := range flows {
		if err := s.SyncSchedule(ctx, f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Gate makes every firing first ask held, and fire only when it answers
// true: flowd nodes on one database all keep the schedules, and only the
// holder of the cron duty fires them. Call it before Start.
func (s *Scheduler) Gate(held func() bool) { s.gate = held }

// UseParser replaces cronspec.Parse for the schedules synced after it:
// the whole-process tests of a flowd built with the flowdtest tag fire
// schedules every second. Call it before Load.
func (s *Scheduler) UseParser(parse func(spec, timezone string) (cron.Schedule, *time.Location, error)) {
	s.parse = parse
}

// UsePollSchedule replaces cron.Every for the POLL flows synced after it:
// the whole-process tests of a flowd built with the flowdtest tag poll on
// ticks aligned on the clock, so that the firings of nodes on one database
// are named alike and a tick polled twice across nodes shows. Call it
// before Load.
func (s *Scheduler) UsePollSchedule(every func(d time.Duration) cron.Schedule) {
	s.every = every
}

// Reconcile makes the schedules those of flows exactly: it syncs each and
// removes the entries of flows not among them. flowd nodes on one database
// call it periodically with Service.ScheduledFlows, since a flow saved on
// another node changed only that node's scheduler. An unchanged schedule
// keeps its entry (SyncSchedule), so a reload neither skips nor repeats a
// firing.
func (s *Scheduler) Reconcile(ctx context.Context, flows []automation.Flow) error {
	keep := make(map[key]bool, len(flows))
	for _, f := range flows {
		keep[key{f.Project, f.ID}] = true
	}
	s.mu.Lock()
	var gone []key
	for k := range s.entries {
		if !keep[k] {
			gone = append(gone, k)
		}
	}
	s.mu.Unlock()
	for _, k := range gone {
		s.remove(k)
	}
	return s.Load(ctx, flows)
}

// Start begins firing schedules, starting their runs through start (the
// Service).
func (s *Scheduler) Start(start Starter) {
	s.start = start
	s.cron.Start()
}

// Stop stops firing and waits for firings under way to finish, until ctx
// is done; then it cancels them and returns ctx's error.
func (s *Scheduler) Stop(ctx context.Context) error {
	done := s.cron.Stop()
	all := make(chan struct{})
	go func() { <-done.Done(); s.polls.Wait(); close(all) }()
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		s.cancel()
		return fmt.Errorf("cronscheduler: stop: %w", ctx.Err())
	}
}

// SyncSchedule makes f's schedule exist while f is an ACTIVE SCHEDULE flow
// and not otherwise. An unchanged schedule keeps its entry, so syncing after
// an unrelated update neither skips nor repeats a firing.
func (s *Scheduler) SyncSchedule(ctx context.Context, f automation.Flow) error {
	k := key{f.Project, f.ID}
	var spec, tz string
	var every time.Duration
	poll := false
	switch {
	case f.Status != automation.FlowActive:
	case f.Trigger.Type == automation.TriggerSchedule && f.Trigger.Schedule != nil:
		spec, tz = f.Trigger.Schedule.Cron, f.Trigger.Schedule.Timezone
		if tz == "" {
			tz = "UTC" // the validator's default
		}
	case f.Trigger.Type == automation.TriggerPoll && f.Trigger.Poll != nil:
		var err error
		if every, err = f.Trigger.Poll.Interval(); err != nil {
			return fmt.Errorf("cronscheduler: poll flow %s: %w", f.ID, err)
		}
		spec, tz, poll = "@every "+every.String(), "UTC", true
	}
	if spec == "" {
		s.remove(k)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.entries[k]; ok && old.cron == spec && old.timezone == tz {
		return nil
	}
	var sched cron.Schedule = s.every(every)
	loc := time.UTC
	if !poll {
		var err error
		if sched, loc, err = s.parse(spec, tz); err != nil {
			return fmt.Errorf("cronscheduler: schedule flow %s: %w", f.ID, err)
		}
	}
	e := &entry{project: f.Project, flowID: f.ID, cron: spec, timezone: tz,
		schedule: zoned{sched, loc}, s: s, last: s.now(), poll: poll}
	_, existed := s.entries[k]
	if existed {
		s.cron.Remove(s.entries[k].id)
	}
	e.id = s.cron.Schedule(e.schedule, e)
	s.entries[k] = e
	if poll && !existed && s.start != nil {
		// A flow just enabled polls at once, so that its first poll
		// records what exists now, not what exists one interval later.
		s.polls.Go(func() { s.fire(e, s.now()) })
	}
	return nil
}

// RemoveSchedule removes a flow's schedule; a missing one is not an error.
func (s *Scheduler) RemoveSchedule(ctx context.Context, project, flowID string) error {
	s.remove(key{project, flowID})
	return nil
}

func (s *Scheduler) remove(k key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.entries[k]; ok {
		s.cron.Remove(e.id)
		delete(s.entries, k)
	}
}

// lookup reports the schedule held for a flow.
func (s *Scheduler) lookup(project, flowID string) (spec, timezone string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key{project, flowID}]
	if !ok {
		return "", "", false
	}
	return e.cron, e.timezone, true
}

// Run is called by the cron runner when the entry is due. The runner does
// not say which due time it is serving, so the entry works it out: the
// latest time of its schedule not after now.
func (e *entry) Run() {
	now := e.s.now()
	e.mu.Lock()
	due := latest(e.schedule, e.last, now)
	e.last = due
	e.mu.Unlock()
	e.s.fire(e, due)
}

// latest returns the last time of sched after from and not after now, or
// now itself if there is none (the runner woke early).
func latest(sched cron.Schedule, from, now time.Time) time.Time {
	due := time.Time{}
	for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		due = t
	}
	if due.IsZero() {
		return now.Truncate(time.Second)
	}
	return due
}

// fire starts the run of e's firing due at t. Failures are logged: the next
// firing is another chance, and a cron has nobody to return them to.
func (s *Scheduler) fire(e *entry, t time.Time) {
	if s.gate != nil && !s.gate() {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, fireTimeout)
	defer cancel()
	firedAt := t.UTC()
	if e.poll {
		// Logged before the request: a node killed during its poll has
		// still said which tick it took, which is how the cluster tests
		// see that no tick is polled twice.
		s.log.DebugContext(ctx, "poll fired", "project", e.project, "flow", e.flowID, "firedAt", firedAt)
		s.poll(ctx, e, firedAt)
		return
	}
	r, err := s.start.StartScheduledRun(ctx, e.project, e.flowID, firedAt, firedAt.Format(time.RFC3339))
	switch {
	case automation.IsFlowNotScheduled(err) || automation.IsNotFound(err):
		// Disabled or deleted while the firing was on its way.
		s.log.InfoContext(ctx, "schedule fired for a flow no longer scheduled",
			"project", e.project, "flow", e.flowID, "firedAt", firedAt, "reason", err)
	case err != nil:
		s.log.ErrorContext(ctx, "start scheduled run", "project", e.project, "flow", e.flowID,
			"firedAt", firedAt, "err", err)
	default:
		s.log.DebugContext(ctx, "scheduled run started", "project", e.project, "flow", e.flowID,
			"firedAt", firedAt, "run", r.ID)
	}
}

// poll polls e's flow once. A failed request is the flow's lastError, not an
// error here; what is logged is a poll that could not run or record.
func (s *Scheduler) poll(ctx context.Context, e *entry, firedAt time.Time) {
	p, ok := s.start.(PollStarter)
	if !ok {
		return
	}
	err := p.PollFlow(ctx, e.project, e.flowID)
	switch {
	case automation.IsFlowNotScheduled(err) || automation.IsNotFound(err):
		s.log.InfoContext(ctx, "poll fired for a flow no longer polled", "project", e.project, "flow", e.flowID, "reason", err)
	case err != nil:
		s.log.ErrorContext(ctx, "poll", "project", e.project, "flow", e.flowID, "firedAt", firedAt, "err", err)
	}
}

// zoned evaluates a schedule in a time zone: robfig's specs use the time
// zone of the time they are given, and the runner's clock is in UTC.
type zoned struct {
	cron.Schedule
	loc *time.Location
}

// Next returns the next activation time after t, in t's location.
func (z zoned) Next(t time.Time) time.Time {
	n := z.Schedule.Next(t.In(z.loc))
	if n.IsZero() {
		return n
	}
	return n.In(t.Location())
}
