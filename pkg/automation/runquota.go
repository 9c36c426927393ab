package automation

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The runsPerMinute quota: the runs a project starts in a minute, counted
// on every way a run starts (a webhook, the test URL, a CALL_FLOW child,
// a schedule's firing, a poll's new item, a retry or replay), so that no
// flow can multiply itself (a CALL_FLOW that does not wait, calling its
// own flow in a FOR_EACH) faster than the quota.
//
// The count is this process's, as the webhooksPerSecond and
// outboundPerMinute buckets are (docs/reliability.md): exact on flowd, one
// process; on Lambda each instance counts the runs it starts, so the bound
// there is per instance. A minute is a window of the service clock
// (Config.Clock), 0 to 60 seconds past each minute: at most the quota in
// each; the count is one increment under the quotas' lock per start.

// runWindow is one project's count of runs started in a minute.
type runWindow struct {
	minute int64 // Unix minute
	n      int64
}

// admitRun counts one run start of project against its runsPerMinute
// quota; past it, it counts nothing and returns a *RateLimited
// QUOTA_EXCEEDED whose RetryAfter is the rest of the minute.
func (s *ProjectService) admitRun(ctx context.Context, project string) error {
	now := s.clock()
	pq, err := s.quotas.get(ctx, s.store, project, now)
	if err != nil {
		return err
	}
	return s.quotas.countRun(project, pq.limits.RunsPerMinute, pq.plan, now, true)
}

// runsFull is admitRun without counting: the error admitRun would return
// now. A CALL_FLOW step that waits asks it, since its child is started
// (and counted) only once the caller is parked.
func (s *ProjectService) runsFull(ctx context.Context, project string) error {
	now := s.clock()
	pq, err := s.quotas.get(ctx, s.store, project, now)
	if err != nil {
		return err
	}
	return s.quotas.countRun(project, pq.limits.RunsPerMinute, pq.plan, now, false)
}

func (q *quotas) countRun(project string, most *int64, plan Plan, now time.Time, count bool) error {
	minute := now.Unix() / 60
	q.mu.Lock()
	defer q.mu.Unlock()
	w := q.runs[project]
	if w == nil {
		if q.runs == nil {
			q.runs = map[string]*runWindow{}
		}
		w = &runWindow{minute: minute}
		q.runs[project] = w
	}
	if w.minute != minute {
		w.minute, w.n = minute, 0
	}
	if most != nil && w.n >= *most {
		return RunQuotaExceeded(*most, plan, time.Unix((minute+1)*60, 0).Sub(now))
	}
	if count {
		w.n++
	}
	return nil
}

// runsThisMinute is the count of the project's current minute.
func (q *quotas) runsThisMinute(project string, now time.Time) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if w := q.runs[project]; w != nil && w.minute == now.Unix()/60 {
		return w.n
	}
	return 0
}

// RunQuotaExceeded is a run start past the project's runsPerMinute: 429
// with Retry-After (wait) to a webhook, the failure of a CALL_FLOW step.
func RunQuotaExceeded(most int64, plan Plan, wait time.Duration) error {
	return &RateLimited{Err: &Error{Kind: ErrRateLimited, Code: "QUOTA_EXCEEDED", Message: fmt.Sprintf(
		"the project starts at most %d runs a minute on its %s plan (limits.runsPerMinute); no run was started: retry after the seconds in Retry-After",
		most, plan)}, RetryAfter: max(wait, time.Second), Limit: "runsPerMinute"}
}

// IsRunQuotaExceeded reports whether err is a run start refused by the
// runsPerMinute quota.
func IsRunQuotaExceeded(err error) bool {
	var rl *RateLimited
	return errors.As(err, &rl) && rl.Limit == "runsPerMinute"
}

// admitRun is ProjectService.admitRun for a RunService, which a test may
// build without projects.
func (s *RunService) admitRun(ctx context.Context, project string) error {
	if s.projects == nil {
		return nil
	}
	return s.projects.admitRun(ctx, project)
}
