package automation

import (
	"context"
	"fmt"
)

// CodeCancelled begins the error of a run a user cancelled while it
// waited (CancelRun).
const CodeCancelled = "CANCELLED"

// cancelledMessage is the error a cancelled run ends with: its code first,
// as a client that sorts failures by their first word reads it.
const cancelledMessage = CodeCancelled + ": cancelled while it waited (at a WAIT step or for a flow it called)"

// CancelRun ends a run that waits at a WAIT step or for a flow it called
// (waitingFor WAIT) as FAILED, with the error "CANCELLED: …". Only such a
// run: one that executes now, waits for a retry or a slot, or is final is
// a 409 naming what it is doing, since cutting an executing step short
// could leave its side effect half done.
//
// The run is claimed first (RunStore.ClaimRun, the lease and fencing every
// attempt takes) and finished through the same write an attempt finishes
// with (settle: FinishRun, its flow's stats and alert event, the waiting
// caller of a called flow woken). A worker that comes for it later finds
// it final and lets it go. Its onError steps do not run: nobody's step
// failed. Children it called go on; their end finds it final.
func (s *RunService) CancelRun(ctx context.Context, p Project, flowID, runID string) (Run, error) {
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	// Read first, by flow: a run of another flow or project is a 404, and
	// a run that is not waiting is refused without a claim (a claim counts
	// an attempt).
	r, err := rt.Runs.Run(ctx, p.ID, flowID, runID)
	if err != nil {
		return Run{}, wrap("get run", err)
	}
	if err := cancellable(r); err != nil {
		return Run{}, err
	}
	pol := rt.Policy.WithDefaults()
	c, err := rt.Runs.ClaimRun(ctx, p.ID, runID, s.clock(), pol.Lease())
	switch {
	case IsRunFinished(err):
		return Run{}, Conflict("RUN_NOT_WAITING", "run %s finished meanwhile: there is nothing to cancel", r.ID)
	case IsRunClaimed(err):
		return Run{}, Conflict("RUN_NOT_WAITING", "run %s is executing now (its wait is over): only a waiting run can be cancelled", r.ID)
	case err != nil:
		return Run{}, wrap("cancel run", err)
	}
	if err := cancellable(c); err != nil {
		// It moved on between the read and the claim: give it back as it
		// is, for the attempt that was due.
		if rerr := rt.Runs.ReleaseRun(context.WithoutCancel(ctx), c); rerr != nil {
			s.log.ErrorContext(ctx, "give back a run not cancelled", "run", c.ID, "err", rerr)
		}
		return Run{}, err
	}
	c.Status, c.Error, c.Response = RunFailed, cancelledMessage, nil
	c.NextAttemptAt, c.WaitingFor, c.OnErrorOf = nil, "", ""
	c.Steps = cancelSteps(c.Steps)
	at, err := s.settle(ctx, rt, Attempt{Run: c, Attempts: c.Attempts}, c)
	if err != nil {
		return Run{}, fmt.Errorf("automation: cancel run %s: %w", runID, err)
	}
	if at.Outcome != OutcomeFinished {
		return Run{}, Conflict("RUN_NOT_WAITING", "run %s was taken by another attempt meanwhile: look at it again", r.ID)
	}
	// The finish write does not carry the request's audit entry: write it
	// now that the run is final.
	if e, ok := AuditFrom(ctx); ok {
		if err := s.projects.RecordAudit(context.WithoutCancel(ctx), e); err != nil {
			s.log.ErrorContext(ctx, "audit entry of a cancel not written", "run", runID, "err", err)
		}
	}
	return at.Run.Public(), nil
}

// cancellable is nil for a run CancelRun may end: RUNNING and waiting at a
// WAIT step or for a called flow.
func cancellable(r Run) error {
	switch {
	case r.Status.Final():
		return Conflict("RUN_NOT_WAITING", "run %s is %s already: only a waiting run can be cancelled", r.ID, r.Status)
	case r.WaitingFor != WaitingWait:
		doing := "executing"
		if r.WaitingFor != "" {
			doing = "waiting for " + string(r.WaitingFor) + " (not at a WAIT or CALL_FLOW step)"
		}
		return Conflict("RUN_NOT_WAITING", "run %s is %s: only a run waiting at a WAIT step or for a flow it called can be cancelled", r.ID, doing)
	}
	return nil
}

// cancelSteps marks the steps a cancelled run had not finished: the one it
// waited in FAILED with the cancel's message, those it had not reached
// SKIPPED, so that its picture shows where it stopped. (A WAIT step that
// started its wait is SUCCEEDED already; a CALL_FLOW step waiting for its
// flow is RUNNING.)
func cancelSteps(steps []StepResult) []StepResult {
	out := make([]StepResult, len(steps))
	for i, st := range steps {
		switch st.Status {
		case StepRunning:
			st.Status, st.Error = StepFailed, cancelledMessage
		case StepPending:
			st.Status = StepSkipped
		}
		st.Steps = cancelSteps(st.Steps)
		out[i] = st
	}
	if steps == nil {
		return nil
	}
	return out
}
