package automation

import (
	"context"
	"time"
)

// AwaitRun executes a just-started run in the caller's goroutine, for
// synchronous (ON_COMPLETION) webhooks, and returns it final. When a worker
// holds the run already (the hand-over of "Who executes a run"), it waits
// for that worker instead. If wait passes first it returns the run still
// RUNNING. The inline attempt then goes on, on its own context, unless the
// runtime says an attempt must not outlive the answer
// (RunRuntime.StopInlineAtAnswer, the Lambda receiver, which is frozen once
// it answers): then the attempt is cut short and gives the run back
// (journaled steps kept) before AwaitRun returns, and the queue takes over.
func (s *RunService) AwaitRun(ctx context.Context, r Run, wait time.Duration) (Run, error) {
	return s.awaitRun(ctx, r, wait, true)
}

// awaitRun is AwaitRun; without execute it only watches the run's record
// while the queue's executor (the runner) takes it.
func (s *RunService) awaitRun(ctx context.Context, r Run, wait time.Duration, execute bool) (Run, error) {
	if r.Status.Final() {
		// Executed before it was stored (runPure), or a
		// repeated delivery's first run that has finished.
		return r, nil
	}
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	type result struct {
		run Run
		err error
	}
	var done chan result
	stop := func() {}
	if execute {
		done = make(chan result, 1)
		// Detached: a client that hangs up must not cut the run short.
		// It ends at the attempt's end, or by stop at the answer.
		var actx context.Context
		actx, stop = context.WithCancel(context.WithoutCancel(ctx))
		go func() {
			defer stop()
			var (
				at  Attempt
				err error
			)
			if r.LeaseToken != "" && rt.Inline != nil {
				// Claimed with its queue entry by startRunOf: this attempt is
				// the run's one executor, and settles the entry as a worker
				// would have.
				at, err = s.execute(actx, rt, rt.Policy.WithDefaults(), r)
				s.settleInline(context.WithoutCancel(actx), rt, r.ID, at, err)
			} else {
				at, err = s.ExecuteRun(actx, r.Project, r.ID)
			}
			done <- result{at.Run, err}
		}()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case res := <-done:
			if res.err == nil && res.run.Status.Final() {
				return res.run, nil
			}
			done = nil // to be retried, or claimed by a worker: watch the record
		case <-tick.C:
			cur, final, err := pollRun(ctx, rt.Runs, rt.StatusReader, r)
			if err != nil {
				return Run{}, wrap("await run", err)
			}
			if final {
				return cur, nil
			}
		case <-timer.C:
			if rt.StopInlineAtAnswer && done != nil {
				stop()
				<-done // the attempt has given the run back
			}
			return r, nil
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
}

// settleInline settles the queue entry of a run whose inline attempt (the
// receiver's, claimed with the entry by EnqueueClaimed) ended as at says,
// as the worker pool settles the entries it claims. When the
// entry cannot be settled, its lease runs out and a worker finds the run
// as this attempt left it: nothing is lost.
func (s *RunService) settleInline(ctx context.Context, rt *RunRuntime, runID string, at Attempt, cause error) {
	var err error
	switch at.Outcome {
	case OutcomeFinished:
		if at.Run.Status == RunFailed { // other final runs took their entry with them
			err = rt.Inline.Ack(ctx, runID)
		}
	case OutcomeClaimed:
		// The lease ran out under this attempt and a worker holds the
		// entry and the run now: theirs to settle.
	case OutcomeExhausted:
		err = rt.Inline.Park(ctx, runID, cause.Error())
	default: // OutcomeRetry
		next := at.RetryAt
		if next.IsZero() { // the attempt did not get as far as the run
			next = s.clock().Add(rt.Policy.Backoff(1))
		}
		err = rt.Inline.Retry(ctx, runID, next)
	}
	if err != nil {
		s.log.ErrorContext(ctx, "settle inline run's queue entry", "run", runID, "err", err)
	}
}
