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
// Where there is one process (flowd on SQLite) the count is this
// process's: a minute is a window of the service clock (Config.Clock), 0
// to 60 seconds past each minute, at most the quota in each; the count is
// one increment under the quotas' lock per start. Where instances share
// nothing but the store (Lambda environments, the nodes of a cluster on
// PostgreSQL) it is the project's RateBuckets bucket "runs#<project>",
// refilled at the quota a minute with a burst of the quota: one write per
// start, and at most the quota in any minute past an idle one, across
// every instance (before, each instance counted its own, so the bound
// grew with the instances).

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
	if s.buckets != nil {
		return s.takeRun(ctx, project, pq, now, true)
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
	if s.buckets != nil {
		return s.takeRun(ctx, project, pq, now, false)
	}
	return s.quotas.countRun(project, pq.limits.RunsPerMinute, pq.plan, now, false)
}

// takeRun is admitRun (take) or runsFull (peek) on the shared bucket.
func (s *ProjectService) takeRun(ctx context.Context, project string, pq *projectQuota, now time.Time, take bool) error {
	most := pq.limits.RunsPerMinute
	if most == nil {
		return nil
	}
	if *most <= 0 { // a limit of 0 starts nothing
		return RunQuotaExceeded(*most, pq.plan, time.Minute)
	}
	var wait time.Duration
	var err error
	if take {
		wait, err = s.buckets.Take(ctx, runsBucket(project), float64(*most)/60, *most, now)
	} else {
		_, wait, err = s.buckets.Peek(ctx, runsBucket(project), float64(*most)/60, *most, now)
	}
	if err != nil {
		return wrap("count a run start against the project's runsPerMinute", err)
	}
	if wait > 0 {
		return RunQuotaExceeded(*most, pq.plan, wait)
	}
	return nil
}

func runsBucket(project string) string { return "runs#" + project }

// runsCounted is GET project's usage.runsPerMinute: this process's count
// of the current minute, or, on a shared bucket, the starts it holds (those
// of about the last minute not yet refilled).
func (s *ProjectService) runsCounted(ctx context.Context, project string, limits Limits, now time.Time) (int64, error) {
	if s.buckets == nil || limits.RunsPerMinute == nil || *limits.RunsPerMinute <= 0 {
		return s.quotas.runsThisMinute(project, now), nil
	}
	most := *limits.RunsPerMinute
	n, _, err := s.buckets.Peek(ctx, runsBucket(project), float64(most)/60, most, now)
	if err != nil {
		return 0, wrap("read the project's runsPerMinute bucket", err)
	}
	return n, nil
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
