package automation

import (
	"context"
	"time"
)

// DefaultPureBudget bounds the in-memory execution of a run without side
// effects (RunRuntime.PureBudget): such flows finish in microseconds, and
// one that takes longer is better stored first, so that its answer can be
// a 504 while it goes on recorded.
const DefaultPureBudget = time.Second

// pureSteps are the step types that act on nothing outside the run: no
// request, no script, no state, no pause. A list of the allowed ones, not
// of the others, so that a new step type is impure until it is added.
var pureSteps = map[StepType]bool{
	StepSet: true, StepFilter: true, StepVerifySignature: true, StepRespond: true,
	StepSwitch: true, StepForEach: true,
}

// PureFlow reports whether every step of f, nested ones and its onError
// steps included, is free of side effects: executing it again, or
// executing it and then losing the result, changes nothing outside the run.
func PureFlow(f Flow) bool {
	if f.Limited() {
		return false // its runs wait for admission like any other
	}
	pure := true
	check := func(s *Step) { pure = pure && pureSteps[s.Type] }
	WalkSteps(f.Steps, check)
	WalkSteps(f.OnError, check)
	return pure
}

// runPure is the one-commit path of a delivery that is answered with its
// run's outcome (ON_COMPLETION) and waited for at most wait. The run of an
// ACTIVE workflow builder flow without side effects (PureFlow) may come
// back final: where the store offers it (RunRuntime.Finished), it is
// executed in memory first and then stored, final, in one write, which is
// all that happens before the answer. Should that write not take place (a
// crash), there is no record and no answer, and the sender, not answered,
// sends again: acceptable because the run touched nothing outside the
// store. Every other delivery, and a run that does not finish within the
// budget (RunRuntime.PureBudget, at most wait), takes receive's usual
// path: stored first, then executed (again, which is safe for such steps)
// and answered as that path answers.
//
// ok is false when the delivery should take the usual path instead, with
// nothing stored.
func (s *RunService) runPure(ctx context.Context, f Flow, td TriggerData, wait time.Duration) (Run, bool, error) {
	rt := s.rt
	if rt == nil || rt.Finished == nil || s.exec == nil || f.Engine != WorkflowBuilder ||
		f.Status != FlowActive || !executesInline(f) || !PureFlow(f) {
		return Run{}, false, nil
	}
	r := s.newRun(f, td)
	if key := s.idempotencyKey(ctx, f, td); key != "" {
		// The first delivery's run has the ID derived from the key, as
		// startRunOf gives it. A repeat, or a first run that cannot be
		// looked for, is left to startRunOf, which knows the window.
		r.ID = derivedRunID(f.ID, key)
		if _, err := rt.Runs.Run(ctx, f.Project, f.ID, r.ID); !IsNotFound(err) {
			return Run{}, false, nil
		}
	}
	// Counted here, before the run executes; should it fall back to
	// receive's usual path after all (over its budget, a repeat stored
	// meanwhile), that path counts it again: rare, and on the safe side.
	if err := s.admitRun(ctx, f.Project); err != nil {
		return Run{}, true, err
	}
	budget := rt.PureBudget
	if budget <= 0 {
		budget = DefaultPureBudget
	}
	if wait > 0 {
		budget = min(budget, wait)
	}
	p := rt.Policy.WithDefaults()
	// What EnqueueClaimed and execute make of the run: its first attempt,
	// executing now, under the run's own time limit.
	r.Attempts = 1
	if s.tracer != nil {
		ctx = s.tracer.Attempt(ctx, r)
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	defer cancel()
	actx, acancel := context.WithTimeout(bctx, p.Timeout)
	ex := s.exec.ExecuteJournaled(actx, f, r, nil)
	acancel()
	out := acrossAttempts(r, ex.Run)
	if !out.Status.Final() || ex.WaitUntil != nil || ex.Retryable || bctx.Err() != nil {
		// Over the budget (or, impossibly for these steps, paused or to
		// be retried): the in-memory result is dropped.
		return Run{}, false, nil
	}
	if out.Status == RunFailed || out.Status == RunTimeout {
		if len(f.OnError) > 0 {
			// Nothing to journal: the run is not stored, and its onError
			// steps have no side effects (PureFlow).
			out = runOnError(bctx, s.exec, p, f, out, nil)
		}
		if bctx.Err() != nil {
			return Run{}, false, nil
		}
	}
	out = settledRun(out, s.clock())
	err := rt.Finished.InsertFinishedRun(ctx, out)
	switch {
	case IsRunExists(err):
		// A repeat of the same delivery stored its run meanwhile:
		// startRunOf returns that one.
		return Run{}, false, nil
	case IsNotFound(err):
		return Run{}, true, NotFound("flow", f.ID)
	case err != nil:
		return Run{}, true, wrap("store finished run", err)
	}
	if s.tracer != nil {
		s.tracer.RunEnded(ctx, out)
	}
	return out, true, nil
}
