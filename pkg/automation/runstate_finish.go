package automation

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// gaveUpPrefix begins the error of a run whose attempts ran out.
const gaveUpPrefix = "gave up after "

// finishFailed ends a run that failed (or timed out) for good: it runs the
// flow's onError steps, then settles the run; exhausted says its attempts
// ran out (OutcomeExhausted, the queue parks it).
func (s *RunService) finishFailed(ctx context.Context, rt *RunRuntime, p RunPolicy, at Attempt, f Flow, out Run, exhausted bool) (Attempt, error) {
	out, err := s.onError(ctx, rt, p, f, out)
	if err == nil && ctx.Err() != nil && out.OnErrorSteps != nil {
		// Cut short by the caller (shutdown) while its onError steps ran:
		// give it back in them, for another attempt to finish them.
		back := out
		back.OnErrorOf, back.Status, back.Finished = out.Status, RunRunning, nil
		return s.release(context.WithoutCancel(ctx), rt, at, back, errors.New("cut short in its onError steps"))
	}
	if err != nil {
		if o, ok := settled(err); ok {
			at.Outcome = o // final already, or another attempt holds it
			return at, nil
		}
		back := out
		back.Status, back.Finished = RunRunning, nil
		return s.release(context.WithoutCancel(ctx), rt, at, back, fmt.Errorf("record the start of the onError steps: %w", err))
	}
	at, err = s.settle(ctx, rt, at, out)
	if err != nil || at.Outcome != OutcomeFinished || !exhausted {
		return at, err
	}
	at.Outcome = OutcomeExhausted
	return at, fmt.Errorf("%w: run %s: %s", ErrExhausted, out.ID, out.Error)
}

// onError runs the flow's onError steps once, for a run that ended FAILED
// or TIMEOUT for good, with a time limit of their own (a TIMEOUT run has
// spent its own). Their results go in OnErrorSteps; the run's status and
// error stay.
//
// They are journaled as the run's steps are (docs/architecture.md, run model):
// before the first one starts, the run is recorded (still RUNNING and
// claimed) with its outcome (OnErrorOf) and the onError results so far,
// and again after each onError step with side effects. An attempt that
// takes the run over after a crash resumes the onError steps (execute)
// without running the run's steps again, and skips those that finished.
// The error is that first record's: the onError steps did not start.
func (s *RunService) onError(ctx context.Context, rt *RunRuntime, p RunPolicy, f Flow, out Run) (Run, error) {
	h := s.exec
	if len(f.OnError) == 0 {
		return out, nil
	}
	soFar := out.OnErrorSteps
	if soFar == nil {
		soFar = []StepResult{}
	}
	// The first record writes the run whole (its outcome, its steps' final
	// results); the onError steps' own entries append to it.
	first := out
	first.Status, first.OnErrorOf, first.OnErrorSteps = RunRunning, out.Status, soFar
	if err := rt.Runs.RecordSteps(ctx, first); err != nil {
		return out, err
	}
	jr := &journaler{runs: rt.Runs, root: PatchRootOnError, base: soFar}
	record := func(ctx context.Context, steps []StepResult) error {
		j := first
		j.OnErrorSteps = steps
		return jr.append(ctx, j, steps)
	}
	done := runOnError(ctx, h, p, f, out, record)
	done.JournalLen = jr.n
	return done, nil
}

// runOnError runs the onError steps of f for out under their own time
// limit, journaled by journal (nil: not at all, for a run that is not
// stored yet: runPure).
func runOnError(ctx context.Context, h Executor, p RunPolicy, f Flow, out Run, journal Journal) Run {
	octx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	return h.RunOnError(octx, f, out, journal)
}

// failedAttempts counts the claimed run's attempts that count towards
// RunPolicy.MaxAttempts: a claim that resumed a run after a WAIT step is
// not a retry. Each journaled WAIT stands for exactly one such claim (an
// early delivery does not claim: QueueMessage.NotBefore).
func failedAttempts(r Run) int {
	waits := 0
	var walk func([]StepResult)
	walk = func(steps []StepResult) {
		for _, st := range steps {
			if st.Type == StepWait && st.Status == StepSucceeded && !waitpointResult(st) {
				waits++
			}
			waits += callResumes(st)
			walk(st.Steps)
		}
	}
	walk(r.Steps)
	return max(r.Attempts-waits-r.Deferred, 1)
}

// acrossAttempts is the outcome of an attempt as the run shows it: started
// when its first attempt started, with durationMs over all its attempts.
func acrossAttempts(claimed, out Run) Run {
	if claimed.Started != nil {
		out.Started = claimed.Started
	}
	if claimed.DurationMs != nil && out.DurationMs != nil {
		d := *claimed.DurationMs + *out.DurationMs
		out.DurationMs = &d
	}
	out.NextAttemptAt, out.WaitingFor = nil, ""
	return out
}

// finishTries and finishPause bound how hard an attempt tries to save its
// final state before it gives the run back: a store that is briefly busy
// (a locked database, a throttled table) should not cost the run a whole
// lease and another execution.
const (
	finishTries = 3
	finishPause = 200 * time.Millisecond
)

// settle finishes a claimed run with r's final state. When the finish
// cannot be saved, the run is given back (ReleaseRun drops the lease) so
// that the retry comes after a short backoff, not after the lease.
func (s *RunService) settle(ctx context.Context, rt *RunRuntime, at Attempt, r Run) (Attempt, error) {
	r = settledRun(r, s.clock())
	at.Run = r
	var err error
	for try := 1; try <= finishTries; try++ {
		err = rt.Runs.FinishRun(ctx, r)
		if o, ok := settled(err); ok {
			if err == nil && r.Trigger.Caller != nil {
				s.wakeCaller(ctx, rt, r)
			}
			if err == nil && s.tracer != nil {
				s.tracer.RunEnded(ctx, r)
			}
			at.Outcome = o
			return at, nil
		}
		if try < finishTries {
			select {
			case <-ctx.Done():
				try = finishTries
			case <-time.After(finishPause * time.Duration(try)):
			}
		}
	}
	back := r
	if r.OnErrorSteps != nil && (r.Status == RunFailed || r.Status == RunTimeout) {
		// Its onError steps ran: the next attempt finishes the run as
		// it is, without executing anything again but an onError step
		// that did not finish.
		back.OnErrorOf = r.Status
	}
	back.Status, back.Finished = RunRunning, nil
	return s.release(context.WithoutCancel(ctx), rt, at, back, fmt.Errorf("finish: %w", err))
}

// settledRun is r as it is saved final: a run that never started (its
// flow deleted, say) started and finished now.
func settledRun(r Run, now time.Time) Run {
	r.OnErrorOf = "" // its onError steps are done
	if r.Started == nil {
		r.Started = &now
	}
	if r.Finished == nil {
		r.Finished = &now
	}
	if r.DurationMs == nil {
		d := r.Finished.Sub(*r.Started).Milliseconds()
		r.DurationMs = &d
	}
	return r
}

// release gives a claimed run back after a failed attempt (cause), to be
// retried: OutcomeRetry, unless the run moved on meanwhile.
func (s *RunService) release(ctx context.Context, rt *RunRuntime, at Attempt, r Run, cause error) (Attempt, error) {
	// Waiting for the next attempt: not finished, and says when it will
	// try again. The failed step keeps its error.
	// Whole milliseconds: the precision every surface shows (TimeFormat),
	// so the record, the API and a queue's back-off name the same instant.
	at.RetryAt = s.clock().Add(rt.Policy.Backoff(r.Attempts)).Truncate(time.Millisecond)
	if !r.OnErrorOf.Final() { // a run in its onError steps keeps the error it ended with
		r.Error = ""
	}
	r.Status, r.Finished, r.NextAttemptAt, r.WaitingFor = RunRunning, nil, &at.RetryAt, WaitingRetry
	at.Run = r
	err := rt.Runs.ReleaseRun(ctx, r)
	if o, ok := settled(err); ok && err != nil {
		at.Outcome = o
		return at, nil
	} else if err != nil {
		at.Outcome = OutcomeRetry
		return at, fmt.Errorf("%w: release run %s after %v: %w", ErrRetry, r.ID, cause, err)
	}
	at.Outcome = OutcomeRetry
	return at, fmt.Errorf("%w: run %s attempt %d: %w", ErrRetry, r.ID, r.Attempts, cause)
}

// suspend gives back a run that waits (a WAIT step paused it, or a bound
// of its flow or project let it not start: why), due again at until
// (nextAttemptAt). Where the queue cannot be told to look again later
// (Delayer: SQS), the run's message is sent again with a delay and this
// one settled. The children that CALL_FLOW steps wait for (calls) are
// started once the run is parked, so that a child's end always finds its
// caller parked to wake.
//
// A run parked on waitpoints (APPROVAL, WAIT for a callback: their steps'
// journal keys) is looked at once more after the park: an answer that came
// while this attempt held the run is applied now (waitpoint.go).
func (s *RunService) suspend(ctx context.Context, rt *RunRuntime, at Attempt, r Run, until time.Time, why WaitReason, calls []Call, waitpoints ...string) (Attempt, error) {
	at.RetryAt = until
	r.Status, r.Error, r.Finished, r.NextAttemptAt, r.WaitingFor = RunRunning, "", nil, &until, why
	at.Run = r
	err := rt.Runs.ReleaseRun(ctx, r)
	if o, ok := settled(err); ok && err != nil {
		at.Outcome = o
		return at, nil
	} else if err != nil {
		at.Outcome = OutcomeRetry
		return at, fmt.Errorf("%w: release waiting run %s: %w", ErrRetry, r.ID, err)
	}
	if err := s.startCalls(ctx, calls); err != nil {
		// Woken again soon, the step asks for the children not started.
		at.RetryAt = s.clock().Add(rt.Policy.Backoff(1))
		at.Outcome = OutcomeRetry
		return at, fmt.Errorf("%w: run %s: %w", ErrRetry, r.ID, err)
	}
	if len(waitpoints) > 0 && s.recheckWaitpoints(ctx, r.Project, r.ID, waitpoints) {
		until = s.clock()
		at.RetryAt = until
	}
	if d := rt.Delayer; d != nil {
		if err := d.EnqueueAfter(ctx, r, until); err != nil {
			at.Outcome = OutcomeRetry // the message comes back; the run is still waiting
			return at, fmt.Errorf("%w: %w", ErrRetry, err)
		}
		at.Outcome = OutcomeFinished // this message is done; the delayed one resumes the run
		return at, nil
	}
	at.Outcome = OutcomeRetry
	return at, fmt.Errorf("%w: run %s waits until %s", ErrRetry, r.ID, until.Format(time.RFC3339))
}

// settled maps the result of a run write to an outcome when it needs no
// retry: written (finished), final already or gone (finished: nothing left
// to do), or claimed by another attempt since this one's lease ran out
// (claimed: that attempt's result stands, this one's is dropped).
func settled(err error) (Outcome, bool) {
	switch {
	case err == nil, IsRunFinished(err), IsNotFound(err):
		return OutcomeFinished, true
	case IsRunLeaseLost(err):
		return OutcomeClaimed, true
	}
	return 0, false
}
