package automation

import (
	"context"
	"encoding/json"
	"time"
)

// CodeRunner runs the JavaScript of CODE steps outside the calling process,
// so that a hostile or broken script cannot take the server's memory or
// CPU. The engine takes one at construction; binaries that run no code
// pass none and so never link a JavaScript engine.
type CodeRunner interface {
	// RunCode runs req and returns what the script did. The script's own
	// failures (a thrown error, a syntax error, a limit it hit) are
	// CodeResult.Error; a returned error means the sandbox itself failed
	// (it could not start, a Lambda invoke failed), which is worth a retry.
	RunCode(ctx context.Context, req CodeRequest) (CodeResult, error)
}

// CodeRequest is one script to run. It is also the payload the code Lambda
// function receives.
type CodeRequest struct {
	// Code is the body of a function; its return value is the output.
	Code string `json:"code"`
	// Scope is a JSON object whose fields the script sees as variables:
	// trigger, steps, flow, run, state, and item and index inside loops.
	Scope json.RawMessage `json:"scope"`
	// TimeoutMs bounds the script's wall-clock time: 0 takes
	// DefaultCodeTimeout, more than MaxCodeTimeout is cut to it.
	TimeoutMs int64 `json:"timeoutMs"`
	// Project is the run's project: sandboxes are shared fairly between
	// projects, so one project's backlog cannot take them all.
	Project string `json:"project,omitempty"`
	// Check asks only whether Code compiles, without running it: the
	// result's Error is the syntax error, "" when there is none. The api
	// function saves flows with it (CodeCheck), so that it need not carry
	// the JavaScript engine itself.
	Check bool `json:"check,omitempty"`
}

// Timeout is the request's time limit with the default and the cap applied.
func (r CodeRequest) Timeout() time.Duration {
	d := time.Duration(r.TimeoutMs) * time.Millisecond
	if d <= 0 {
		return DefaultCodeTimeout
	}
	return min(d, MaxCodeTimeout)
}

// CodeResult is what a script did: its return value as JSON (null for
// undefined), its console lines, and its error message if it failed.
type CodeResult struct {
	Output json.RawMessage `json:"output,omitempty"`
	Logs   []string        `json:"logs,omitempty"`
	Error  string          `json:"error,omitempty"`
}
