package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"flowservice/pkg/automation"
)

// errNoCode is the error of a CODE step in a binary built without a
// CodeRunner.
const errNoCode = "CODE steps are not available in this deployment"

// code runs a CODE step's script through the engine's CodeRunner, with
// what expressions see (trigger, steps, flow, run, and whatever else the
// run puts in scope) as its variables. The script's return value is the
// output and its console lines are the step's logs.
func (x *execution) code(ctx context.Context, s automation.Step) (any, error) {
	if x.e.code == nil {
		return nil, &stepError{msg: errNoCode}
	}
	timeout, err := s.CodeTimeout()
	if err != nil {
		return nil, fail(false, err)
	}
	scope, err := json.Marshal(x.env)
	if err != nil {
		return nil, fail(false, fmt.Errorf("the run's data cannot be passed to the script: %w", err))
	}
	res, err := x.e.code.RunCode(ctx, automation.CodeRequest{Code: s.Code, Scope: scope, TimeoutMs: timeout.Milliseconds(), Project: x.run.Project})
	if err != nil {
		if ctx.Err() != nil {
			return nil, &stepError{msg: "the run ended while the script ran", retryable: true} // Execute says how
		}
		// The sandbox failed, not the script: another attempt may work.
		x.e.log.WarnContext(ctx, "code sandbox failed", "run", x.run.ID, "step", s.Name, "err", err)
		return nil, &stepError{msg: "the code sandbox is unavailable; the run will be retried", retryable: true}
	}
	x.logs = res.Logs
	if res.Error != "" {
		return nil, &stepError{msg: res.Error}
	}
	var out any
	if len(res.Output) > 0 {
		if err := json.Unmarshal(res.Output, &out); err != nil {
			return nil, fail(false, fmt.Errorf("the script's output is not JSON: %w", err))
		}
	}
	return out, nil
}
