package automation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// The run state machine. A run is RUNNING from the moment it is stored
// until one attempt settles it final (SUCCEEDED, FAILED or TIMEOUT). An
// attempt (execute) goes through these steps, each ending in one of the
// transitions below:
//
//	claim     ExecuteRun takes the run's lease (RunStore.ClaimRun), or the
//	          caller already has (ExecuteClaimed, AwaitRun); a finished or
//	          held run is left alone (OutcomeFinished, OutcomeClaimed)
//	admit     a flow with concurrency or throttle, or a project with a
//	          concurrentRuns quota, takes a slot or waits in line
//	          (runstate_admission.go)
//	execute   the executor runs the steps, journaling each one, resuming
//	          after those an earlier attempt journaled
//
//	settle    final: the run is stored finished with its result (settle,
//	          runstate_finish.go); a final failure first runs the flow's
//	          onError steps once (finishFailed, onError)
//	release   a transient failure: the run stays RUNNING and comes back
//	          after a backoff (OutcomeRetry); past RunPolicy.MaxAttempts it
//	          is FAILED instead (finishFailed, OutcomeExhausted)
//	suspend   a WAIT step, a CALL_FLOW that waits, or no free slot: the run
//	          stays RUNNING until nextAttemptAt, and the claim that resumes
//	          it does not count as an attempt
//
// An ON_COMPLETION receiver runs the same machine inline (AwaitRun,
// runstate_inline.go). docs/architecture.md describes the guarantees.

// Who executes a run. Three callers make attempts at runs, all through
// ExecuteRun, and the run record's claim (RunStore.ClaimRun, a conditional
// write with a lease) decides which of them executes at any moment:
//
//   - the worker pool of flowd (pkg/runworker) for every queued run: it
//     takes the run's queue entry and settles the entry by the Outcome;
//   - the runner Lambda (HandleMessage) for every SQS message: an error
//     returns the message to the queue, nil deletes it;
//   - a synchronous (ON_COMPLETION) receiver, inline, through AwaitRun, so
//     that it can answer with the run's response.
//
// An ON_COMPLETION run is queued like any other, so that it survives the
// receiver. Where the queue offers it (RunRuntime.Inline, flowd's embedded
// queue), the run is stored already claimed by the receiver's attempt, its
// queue entry held by the same lease: the receiver executes it and settles
// the entry, and a worker takes it only if the receiver's process died
// (once the lease runs out). Otherwise (AWS) whichever caller claims it
// first executes it, and the other gets OutcomeClaimed: the expected
// hand-over, not a failure. The holder's lease bounds the wait: a worker
// looks at the run again once the lease would have run out, and finds it
// final (OutcomeFinished) or abandoned.

// Outcome is what one call of ExecuteRun came to, for the caller that
// settles the run's queue entry or message.
type Outcome int

// Outcomes of ExecuteRun.
const (
	// OutcomeFinished: the run is final, by this attempt or earlier, or gone
	// with its flow. The queue entry is done with.
	OutcomeFinished Outcome = iota + 1
	// OutcomeClaimed: another attempt holds the run. Not a failure: look
	// again when its lease would run out (Policy.Lease).
	OutcomeClaimed
	// OutcomeRetry: the attempt failed transiently (or the store did); the
	// run stays RUNNING. Try again after Policy.Backoff(attempts).
	OutcomeRetry
	// OutcomeExhausted: the last attempt failed and the run is now FAILED.
	// Park the entry (embedded) or let the message reach the DLQ (AWS).
	OutcomeExhausted
)

var outcomeNames = map[Outcome]string{
	OutcomeFinished: "finished", OutcomeClaimed: "claimed", OutcomeRetry: "retry", OutcomeExhausted: "exhausted",
}

func (o Outcome) String() string { return outcomeNames[o] }

// Attempt is the result of ExecuteRun.
type Attempt struct {
	Outcome Outcome
	// Run is the run as this attempt left it; zero when it did not claim
	// the run.
	Run Run
	// Attempts counts the claims of the run so far, this one included;
	// 0 when it did not claim the run.
	Attempts int
	// RetryAt is when the run should be tried again, for OutcomeRetry
	// (the run's NextAttemptAt): Policy.Backoff after this attempt.
	RetryAt time.Time
}

// crashedMessage is the error of a run finished because its attempts kept
// dying with their process.
const crashedMessage = "stopped after repeated crashes: %d attempts ended without a result (the process executing them died or lost its lease)"

// ExecuteRun makes one attempt at a queued run (see "Who executes a run"
// above). The error is nil for OutcomeFinished and OutcomeClaimed, and
// wraps ErrRetry or ErrExhausted for the other two, with the cause.
//
// The attempt is recorded (ClaimRun counts it) before execution starts. A
// run whose earlier attempts ended without a result Policy.MaxCrashes
// times is not executed again: it is finished FAILED, so that a flow that
// kills its process cannot do so at every restart.
func (s *RunService) ExecuteRun(ctx context.Context, project, runID string) (Attempt, error) {
	rt, err := s.runtime()
	if err != nil {
		return Attempt{Outcome: OutcomeRetry}, fmt.Errorf("%w: %w", ErrRetry, err)
	}
	p := rt.Policy.WithDefaults()
	r, err := rt.Runs.ClaimRun(ctx, project, runID, s.clock(), p.Lease())
	switch {
	case IsRunFinished(err), IsNotFound(err): // not found: its flow was deleted, and the run with it
		return Attempt{Outcome: OutcomeFinished}, nil
	case IsRunClaimed(err):
		return Attempt{Outcome: OutcomeClaimed}, nil
	case err != nil:
		return Attempt{Outcome: OutcomeRetry}, fmt.Errorf("%w: claim run %s: %w", ErrRetry, runID, err)
	}
	return s.execute(ctx, rt, p, r)
}

// ExecuteClaimed makes one attempt at a run its caller has already claimed
// for it, as ExecuteRun does after its claim: the worker pool's queue claims
// the run with its entry, in one write (QueueEntry.Run).
func (s *RunService) ExecuteClaimed(ctx context.Context, r Run) (Attempt, error) {
	rt, err := s.runtime()
	if err != nil {
		return Attempt{Outcome: OutcomeRetry}, fmt.Errorf("%w: %w", ErrRetry, err)
	}
	return s.execute(ctx, rt, rt.Policy.WithDefaults(), r)
}

// execute runs the attempt that holds the claimed run r.
func (s *RunService) execute(ctx context.Context, rt *RunRuntime, p RunPolicy, r Run) (Attempt, error) {
	if s.tracer != nil {
		ctx = s.tracer.Attempt(ctx, r)
	}
	project := r.Project
	at := Attempt{Run: r, Attempts: r.Attempts}
	if r.Interrupted >= p.MaxCrashes {
		if r.OnErrorOf.Final() {
			// It was its onError steps that kept crashing: the run ends as
			// it had, their results as far as they got.
			r.Status = r.OnErrorOf
		} else {
			r.Status, r.Error = RunFailed, fmt.Sprintf(crashedMessage, r.Interrupted)
		}
		return s.settle(ctx, rt, at, r)
	}
	// By ID: the store may serve it from memory (the receivers' flow
	// cache, dropped on every flow change), which spares each attempt a
	// read; the project check makes it Flow(project, id).
	f, err := s.store.FlowByID(ctx, r.FlowID)
	if err == nil && f.Project != project {
		err = NotFound("flow", r.FlowID)
	}
	if err == nil {
		// The run executes its own version (versions.go): usually the
		// live one, else read once for this attempt, from memory when
		// this process read that version before.
		f, err = s.flows.pinnedFlow(ctx, f, r)
	}
	if IsNotFound(err) {
		r.Status, r.Error = RunFailed, "flow "+r.FlowID+" was deleted"
		return s.settle(ctx, rt, at, r)
	} else if err == nil {
		f, err = s.flows.revealFlow(ctx, f, r.Draft)
	}
	if err != nil {
		return s.release(ctx, rt, at, r, fmt.Errorf("load flow: %w", err))
	}
	if StopsRun(f.StoppedAt, r.Created) { // disabled since the run began: flowstop.go
		if r.OnErrorOf.Final() {
			r.Status = r.OnErrorOf // it had ended; only its onError steps are left undone
		} else {
			r.Status, r.Error = RunFailed, StoppedMessage
		}
		return s.settle(ctx, rt, at, r)
	}
	// Admission: a run over a bound of its flow or project waits, in
	// line, without executing (runstate_admission.go). None: nothing to do
	// here.
	bs, err := s.bounds(ctx, f, r, p.Lease())
	if err != nil {
		return s.release(ctx, rt, at, r, fmt.Errorf("read the run's bounds: %w", err))
	}
	if len(bs) > 0 {
		a, err := s.admit(ctx, rt, bs, r)
		if err != nil {
			return s.release(ctx, rt, at, r, err)
		}
		if a.waitFor != "" {
			r.Deferred++
			return s.suspend(ctx, rt, at, r, a.retryAt, a.waitFor, nil)
		}
		defer s.releaseHeld(context.WithoutCancel(ctx), rt, r, a)
	}
	if admissionWait(r.WaitingFor) {
		// It waited for a slot and starts now: say so at once, not at its
		// first step's journal entry, which does not rewrite the run. It
		// has no steps yet, so the write is small.
		r.NextAttemptAt, r.WaitingFor = nil, ""
		if err := rt.Runs.RecordSteps(ctx, r); err != nil {
			if o, ok := settled(err); ok {
				at.Outcome = o
				return at, nil
			}
			return s.release(ctx, rt, at, r, fmt.Errorf("record the run's start: %w", err))
		}
		r.JournalLen = 0 // RecordSteps emptied the journal
	}
	r.NextAttemptAt, r.WaitingFor = nil, "" // executing now
	if r.OnErrorOf.Final() {
		// An earlier attempt ended the run and started its onError steps:
		// resume those, at the first unfinished one.
		out := r
		out.Status, out.OnErrorOf = r.OnErrorOf, ""
		return s.finishFailed(ctx, rt, p, at, f, out, strings.HasPrefix(out.Error, gaveUpPrefix))
	}
	actx, cancel := context.WithTimeout(ctx, p.Timeout)
	// Each entry appends what changed since the last (AppendSteps): a
	// journal that rewrote the whole run would make a FOR_EACH quadratic.
	jr := &journaler{runs: rt.Runs, root: PatchRootSteps, base: r.Steps, n: r.JournalLen}
	var stopped atomic.Bool // the journal refused: the flow was disabled (flowstop.go)
	ex := s.exec.ExecuteJournaled(actx, f, r, func(ctx context.Context, steps []StepResult) error {
		j := r
		j.Steps = steps
		err := jr.append(ctx, j, steps)
		if IsFlowStopped(err) {
			stopped.Store(true)
		}
		return err
	})
	cancel()
	out := acrossAttempts(r, ex.Run)
	out.JournalLen = jr.n // what the store holds beside the document now
	if stopped.Load() {
		out.Status, out.Error, out.Response = RunFailed, StoppedMessage, nil
		return s.settle(ctx, rt, at, out)
	}
	if ex.WaitUntil != nil && out.Status == RunRunning {
		why := ex.WaitFor
		if why == "" {
			why = WaitingWait
		}
		return s.suspend(ctx, rt, at, out, *ex.WaitUntil, why, ex.Calls, ex.Waitpoints...)
	}
	switch {
	case out.Status == RunFailed && ctx.Err() != nil:
		// Cut short by the caller (shutdown, a receiver that answered):
		// not a failure of the run. Give it back for another attempt.
		return s.release(context.WithoutCancel(ctx), rt, at, out, errors.New(out.Error))
	case out.Status == RunFailed && ex.Retryable && failedAttempts(r) < p.MaxAttempts:
		return s.release(ctx, rt, at, out, errors.New(out.Error))
	case out.Status == RunFailed && ex.Retryable:
		out.Error = fmt.Sprintf(gaveUpPrefix+"%d attempts: %s", failedAttempts(r), out.Error)
		return s.finishFailed(ctx, rt, p, at, f, out, true)
	}
	if out.Status == RunFailed || out.Status == RunTimeout {
		return s.finishFailed(ctx, rt, p, at, f, out, false)
	}
	return s.settle(ctx, rt, at, out)
}
