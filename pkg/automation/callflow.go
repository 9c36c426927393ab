package automation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sub-flows (docs/flows.md, "CALL_FLOW"): a CALL_FLOW step starts a run of
// another flow of the same project, its child, whose trigger carries the
// input as body, the calling run as `trigger.caller` and its depth in
// FlowDepthHeader (one more than the caller's), so that chains of calls
// stop at MaxFlowDepth as chains of webhooks do.
//
// A step that waits parks its run as a WAIT step does (Execution.WaitUntil,
// the run's queue entry or a delayed message), and the child is started
// only once the caller is parked: the child's end wakes the caller
// (RunStore.FinishRun on flowd, Waker on SQS), whose next claim finds the
// child final and goes on. Should a wake-up be lost (a send that failed, a
// child deleted with its flow), the caller looks at its child again after
// CallCheckInterval anyway.

// Caller is the run whose CALL_FLOW step started a run, as
// `trigger.caller` shows it. Wait says that the caller waits for the run's
// end, so that its end wakes the caller; expressions see runId and flowId.
type Caller struct {
	RunID  string `json:"runId,omitempty"`
	FlowID string `json:"flowId,omitempty"`
	Wait   bool   `json:"wait,omitempty"`
	// MCP says an MCP client's tools/call started the run (mcptools.go):
	// trigger.caller is then {"mcp": true}, with no run or flow.
	MCP bool `json:"mcp,omitempty"`
	// Secrets are the caller's secret values (secret variables, and those
	// it was given by its own caller) that occur in the child's input:
	// the child masks them wherever its run record would show them, its
	// trigger's body included (Run.Public), as the caller does. Internal:
	// the stored document holds them, as it holds the body the child
	// executes with; API answers never.
	Secrets []string `json:"secrets,omitempty"`
}

// public is c as API answers show it: the caller's run and flow.
func (c *Caller) public() *Caller {
	if c == nil || !c.Wait && len(c.Secrets) == 0 {
		return c
	}
	return &Caller{RunID: c.RunID, FlowID: c.FlowID}
}

// CallerSecrets are the secret values a run's caller passed it, to mask
// in its record (Caller.Secrets); none for a run nothing called.
func (td TriggerData) CallerSecrets() []string {
	if td.Caller == nil {
		return nil
	}
	return td.Caller.Secrets
}

// Call is a child run a CALL_FLOW step asks for.
type Call struct {
	Project string
	FlowID  string
	RunID   string          // CallRunID: the same for every attempt of the step
	Body    json.RawMessage // the step's rendered input
	Depth   int             // the child's place in the chain of calls
	Caller  Caller
	// Trace is the calling step's span (Tracer.Propagate), which the
	// child's run span is a child of; nil when tracing is off.
	Trace *RunTrace
}

// CallCheckInterval is how long a run waiting for its child stays parked
// before it looks at the child again without being woken: a safety net for
// a lost wake-up, not the way a child's end is noticed.
const CallCheckInterval = time.Hour

// CallStartCheck is how long a run stays parked, unless woken, right after
// the attempt that asked for its child: the child is started only once the
// caller is parked, and should the process die in between, the caller
// starts it again after this long.
const CallStartCheck = time.Minute

// CallMethod is the trigger method of a run a CALL_FLOW step started.
const CallMethod = "CALL_FLOW"

// CallRunID is the ID of the child run that step (its journal key: name,
// and item path inside FOR_EACH) of run parentID starts in flowID: derived,
// so that an attempt that executes the step again, or starts the child
// again after a crash, finds the same run instead of starting another.
func CallRunID(parentID, step, flowID string) string {
	return derivedRunID(flowID, "call\x00"+parentID+"\x00"+step)
}

// Waker is implemented by a RunQueue that is told when a run whose caller
// waits for it has finished (after RunStore.FinishRun wrote it): on SQS it
// sends the caller a message; on flowd the store made the caller due in
// FinishRun's own write already, and the worker pool's queue only wakes
// its idle workers, so that the caller goes on at once rather than at the
// next poll. CalledRun wakes a child never claimed the same way.
type Waker interface {
	// WakeRun makes the run due now, and says so to whoever takes due runs.
	WakeRun(ctx context.Context, project, runID string) error
}

// CheckCall reports whether a CALL_FLOW step of a run of project may call
// flowID: a flow of the same project (another project's is the same "not
// found" as none) that is ACTIVE. The error is an *Error whose message the
// step records; any other error is the store's.
//
// A project at its runsPerMinute quota may not call either: the child
// would not start (StartCall counts it).
func (s *RunService) CheckCall(ctx context.Context, project, flowID string) error {
	if _, err := s.callTarget(ctx, project, flowID); err != nil {
		return err
	}
	if s.projects != nil {
		return s.projects.runsFull(ctx, project)
	}
	return nil
}

func (s *RunService) callTarget(ctx context.Context, project, flowID string) (Flow, error) {
	f, err := s.store.FlowByID(ctx, flowID)
	if err == nil && f.Project != project {
		err = NotFound("flow", flowID)
	}
	if IsNotFound(err) {
		return Flow{}, &Error{Kind: ErrNotFound, Code: "FLOW_NOT_FOUND",
			Message: fmt.Sprintf("flow %s does not exist in this project (was it deleted?)", flowID)}
	} else if err != nil {
		return Flow{}, wrap("find called flow", err)
	}
	if f.Status != FlowActive {
		return Flow{}, &Error{Kind: ErrInvalid, Code: "FLOW_INACTIVE",
			Message: fmt.Sprintf("flow %s (%s) is disabled: enable it to call it", flowID, f.Name)}
	}
	return f, nil
}

// StartCall makes the child run c asks for durable and queued, after
// checking it as CheckCall does. A child that exists already (the step ran
// again) is not an error: it is the same run.
func (s *RunService) StartCall(ctx context.Context, c Call) error {
	rt, err := s.runtime()
	if err != nil {
		return err
	}
	f, err := s.callTarget(ctx, c.Project, c.FlowID)
	if err != nil {
		return err
	}
	body := c.Body
	if len(body) == 0 {
		body = json.RawMessage(`{}`)
	}
	caller := c.Caller
	// A run of the flow as it is now, as a webhook's would be, under the
	// ID that makes a second start of the same call find the first.
	r := s.newRun(f, TriggerData{
		Method:  CallMethod,
		Headers: map[string]string{strings.ToLower(FlowDepthHeader): strconv.Itoa(c.Depth)},
		Query:   map[string]string{},
		Body:    body,
		Caller:  &caller,
	})
	r.ID = c.RunID
	// Kept with the run as a webhook's traceparent is: every attempt of
	// the child, in any process, joins the caller's trace under its step.
	r.Trace = c.Trace
	_, err = s.launch(ctx, r, false)
	switch {
	case err == nil, IsRunExists(err):
		return nil
	case isNotAdmitted(err):
		// The step executed again (after a crash, a retry) finds its
		// child started already: no new run, so no refusal.
		if _, rerr := rt.Runs.Run(ctx, c.Project, c.FlowID, c.RunID); rerr == nil {
			return nil
		}
		return err
	}
	return wrap("start called run", err)
}

// CalledRun reads a child run for the CALL_FLOW step that waits for it.
// A child never claimed since it was started CallStartCheck ago or more is
// woken (Waker): on SQS its message may never have been sent (the process
// died between the run's record and its message), and a wake-up sends one;
// a second message for a run that had one does nothing more than a
// redelivery would.
func (s *RunService) CalledRun(ctx context.Context, project, flowID, runID string) (Run, error) {
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	r, err := rt.Runs.Run(ctx, project, flowID, runID)
	if err != nil {
		return r, wrap("read called run", err)
	}
	if w := rt.Waker; w != nil && r.Status == RunRunning && r.Attempts == 0 && s.clock().Sub(r.Created) >= CallStartCheck {
		if err := w.WakeRun(ctx, project, runID); err != nil {
			s.log.WarnContext(ctx, "wake a called run never claimed", "run", runID, "err", err)
		}
	}
	return r, nil
}

// startCalls starts the children a parked run waits for; the first error
// stops it (the run, woken again, asks for those not started).
func (s *RunService) startCalls(ctx context.Context, calls []Call) error {
	for _, c := range calls {
		if err := s.StartCall(ctx, c); err != nil {
			var e *Error
			if errors.As(err, &e) {
				// The target changed between the step and now (disabled,
				// deleted): the woken step says so when it looks again.
				continue
			}
			return fmt.Errorf("start call %s: %w", c.RunID, err)
		}
	}
	return nil
}

// wakeCaller wakes the run that waits for r, just finished, where the queue
// does not do it in FinishRun's write (Waker). A failure is logged: the
// caller looks again after CallCheckInterval.
func (s *RunService) wakeCaller(ctx context.Context, rt *RunRuntime, r Run) {
	c := r.Trigger.Caller
	if c == nil || !c.Wait {
		return
	}
	w := rt.Waker
	if w == nil {
		return
	}
	if err := w.WakeRun(ctx, r.Project, c.RunID); err != nil {
		s.log.ErrorContext(ctx, "wake calling run", "run", r.ID, "caller", c.RunID, "err", err)
	}
}

// callResumes counts the claims of a run that only looked at a child a
// CALL_FLOW step (or an AI step's flow tool) waits for, or went on with an
// AI loop an earlier attempt handed over (AIContinues): each claim after
// the step's first (the step's attempts count them all). Like the claim
// that resumes a WAIT, they are not retries. In a claimed run whose step
// still waits, the claim under way is such a look too.
func callResumes(st StepResult) int {
	if st.Type != StepCallFlow && st.Type != StepAI && !waitpointResult(st) {
		return 0
	}
	_, waitingCall := WaitingCall(st)
	if _, waiting := WaitingPoint(st); waiting || waitingCall || AIContinues(st) {
		return st.Attempts
	}
	return max(st.Attempts-1, 0)
}

// WaitingCall reports whether a recorded CALL_FLOW step waits for its
// child, and which: its output is then {"runId", "waiting": true}.
func WaitingCall(sr StepResult) (runID string, ok bool) {
	if sr.Type != StepCallFlow && sr.Type != StepAI || sr.Status != StepSucceeded { // an AI step waits for a flow tool so (ai.go)
		return "", false
	}
	var out struct {
		RunID   string `json:"runId"`
		Waiting bool   `json:"waiting"`
	}
	if err := json.Unmarshal(sr.Output, &out); err != nil || !out.Waiting || out.RunID == "" {
		return "", false
	}
	return out.RunID, true
}

// WaitingPoint reports whether a recorded APPROVAL or WAIT for a callback
// waits on its waitpoint, and until when: its output is then {"waiting":
// true, "expiresAt"}.
func WaitingPoint(sr StepResult) (time.Time, bool) {
	if (sr.Type != StepApproval && sr.Type != StepWait) || sr.Status != StepSucceeded {
		return time.Time{}, false
	}
	var out struct {
		Waiting   bool      `json:"waiting"`
		ExpiresAt time.Time `json:"expiresAt"`
	}
	if err := json.Unmarshal(sr.Output, &out); err != nil || !out.Waiting || out.ExpiresAt.IsZero() {
		return time.Time{}, false
	}
	return out.ExpiresAt, true
}

// waitpointResult reports whether a recorded step waited on a waitpoint
// (an APPROVAL, or a WAIT whose output is not a timed WAIT's {"until"}):
// its claims are counted like a waiting CALL_FLOW's.
func waitpointResult(sr StepResult) bool {
	if sr.Type == StepApproval {
		return true
	}
	if sr.Type != StepWait || sr.Status != StepSucceeded {
		return false
	}
	var out map[string]json.RawMessage
	if json.Unmarshal(sr.Output, &out) != nil {
		return false
	}
	_, timed := out["until"]
	return !timed
}
