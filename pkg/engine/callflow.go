package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"flowservice/pkg/automation"
)

// callFlow runs a CALL_FLOW step. Without wait it starts the child and
// outputs {"runId"}. With wait, the first execution asks for the child
// (started by the Service once this run is parked, execution.calls) and
// records {"runId", "waiting": true}, which ends the attempt; an attempt
// that resumes the step reads the child: still running, it waits on; final,
// the step ends with the child's answer (its RESPOND body, else its last
// step's output) or fails with the child's error and run ID.
func (x *execution) callFlow(ctx context.Context, s automation.Step) (any, error) {
	if x.e.calls == nil {
		return nil, &stepError{msg: "CALL_FLOW steps are not available in this deployment"}
	}
	if prev, ok := x.sh.previous[journalKey(s.Name, x.iter)]; ok {
		if childID, ok := automation.WaitingCall(prev); ok {
			child, err := x.e.calls.CalledRun(ctx, x.flow.Project, s.FlowID, childID)
			switch {
			case err == nil:
				return x.calledRun(child)
			case !automation.IsNotFound(err):
				x.e.log.WarnContext(ctx, "read called run", "run", x.run.ID, "step", s.Name, "child", childID, "err", err)
				return nil, &stepError{msg: "the called run could not be read; the run will be retried", retryable: true}
			}
			// Not started (this run was parked, then its process died) or
			// gone: ask for it again, as the first execution did.
		}
	}
	depth := x.run.Trigger.Depth() + 1
	if depth > automation.MaxFlowDepth {
		return nil, &stepError{msg: fmt.Sprintf("calls nest at most %d deep: this run is call number %d of a chain of flows calling one another",
			automation.MaxFlowDepth, depth-1)}
	}
	input, err := decode("input", s.Input)
	if err != nil {
		return nil, fail(false, err)
	}
	if input == nil {
		input = map[string]any{}
	}
	rendered, err := x.e.checker.evalValue(input, x.env)
	if err != nil {
		return nil, fail(false, fmt.Errorf("input: %w", err))
	}
	body, err := json.Marshal(rendered)
	if err != nil {
		return nil, fail(false, fmt.Errorf("input is not representable as JSON: %w", err))
	}
	wait := s.Wait == nil || *s.Wait
	c := automation.Call{
		Project: x.flow.Project, FlowID: s.FlowID,
		RunID: automation.CallRunID(x.run.ID, journalKey(s.Name, x.iter), s.FlowID),
		Body:  body, Depth: depth,
		Caller: automation.Caller{RunID: x.run.ID, FlowID: x.flow.ID, Wait: wait, Secrets: x.secretsIn(rendered)},
		Trace:  x.callTrace(ctx),
	}
	if !wait {
		if err := x.e.calls.StartCall(ctx, c); err != nil {
			return nil, x.callError(ctx, s, err)
		}
		return map[string]any{"runId": c.RunID}, nil
	}
	if err := x.e.calls.CheckCall(ctx, c.Project, c.FlowID); err != nil {
		return nil, x.callError(ctx, s, err)
	}
	x.locked(func() { x.sh.calls = append(x.sh.calls, c) })
	return map[string]any{"runId": c.RunID, "waiting": true}, nil
}

// callError is the step error of a call that could not start: the
// Service's words, or a store failure worth another attempt.
func (x *execution) callError(ctx context.Context, s automation.Step, err error) *stepError {
	var ae *automation.Error
	if errors.As(err, &ae) {
		if ae.Code == "QUOTA_EXCEEDED" { // named, for what reads the run
			return &stepError{msg: ae.Code + ": " + ae.Message}
		}
		return &stepError{msg: ae.Message}
	}
	x.e.log.WarnContext(ctx, "start called run", "run", x.run.ID, "step", s.Name, "err", err)
	return &stepError{msg: "the called run could not be started; the run will be retried", retryable: true}
}

// calledRun is the outcome of a CALL_FLOW step whose child is as given.
func (x *execution) calledRun(child automation.Run) (any, error) {
	switch child.Status {
	case automation.RunSucceeded:
		if child.Response == nil {
			return map[string]any{}, nil
		}
		if out := recorded(child.Response.Body); out != nil {
			return out, nil
		}
		return map[string]any{}, nil
	case automation.RunFailed, automation.RunTimeout:
		return nil, &stepError{
			msg:    fmt.Sprintf("the called run %s (flow %s) ended %s: %s", child.ID, child.FlowID, child.Status, child.Error),
			output: map[string]any{"runId": child.ID, "status": string(child.Status), "error": child.Error},
		}
	}
	return map[string]any{"runId": child.ID, "waiting": true}, nil
}

// callWaitUntil is when a run parked by a waiting CALL_FLOW looks at its
// child runID again if nothing wakes it first: soon after the attempt that
// asked for the child (the Service starts it after parking this run, and a
// crash in between would leave nothing to wake it), then rarely.
func (x *execution) callWaitUntil(runID string) time.Time {
	d := automation.CallCheckInterval
	x.locked(func() {
		for _, c := range x.sh.calls {
			if c.RunID == runID {
				d = automation.CallStartCheck
			}
		}
	})
	return x.e.clock().Add(d)
}

// callerEnv is trigger.caller: the run whose CALL_FLOW step started this
// one and its flow, {"mcp": true} for an MCP client's tools/call, or
// nil for a run that nothing called.
func callerEnv(c *automation.Caller) any {
	if c == nil {
		return nil
	}
	if c.MCP {
		return map[string]any{"mcp": true}
	}
	return map[string]any{"runId": c.RunID, "flowId": c.FlowID}
}

// secretsIn are the run's secret values that v holds in some form: a
// child given them masks them in its record as this run does, its
// trigger's body included.
func (x *execution) secretsIn(v any) []string {
	if len(x.sh.secrets) == 0 {
		return nil
	}
	// Read as text without HTML escaping, so that a value with & < >
	// shows as itself (json.Marshal would write \u0026).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return slices.Clone(x.sh.secrets) // unreadable: mask them all
	}
	text := buf.String()
	var out []string
	for _, sec := range x.sh.secrets {
		if automation.MaskText(text, automation.SecretForms(sec)) != text {
			out = append(out, sec)
		}
	}
	return out
}
