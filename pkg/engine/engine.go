// Package engine runs flows: it evaluates expressions and templates
// (expr-lang/expr), checks cron specs, and executes a flow's steps for a run,
// including HTTP requests to external services through stored connections.
// The local server and the Lambdas share it; it persists nothing.
package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

// Credentials reads connection credentials and records connection state
// changes; *automation.Service implements it.
type Credentials interface {
	// ConnectionCredential returns an ACTIVE or ERROR connection and its
	// value, or an error naming a deleted, expired or revoked connection.
	ConnectionCredential(ctx context.Context, project, id string) (automation.Connection, automation.ConnectionValue, error)
	SetConnectionStatus(ctx context.Context, project, id string, s automation.ConnectionStatus) error
}

// Config wires an Engine. Zero fields take the defaults below.
type Config struct {
	Credentials Credentials // required for HTTP steps with a connectionId
	// AllowPrivateNetworks lets HTTP steps reach loopback, private and
	// link-local addresses (FLOWD_ALLOW_PRIVATE_NETWORKS); off, they are
	// refused when dialling.
	AllowPrivateNetworks bool
	// HTTPTimeout bounds each HTTP step (default 30s); a step's timeoutMs
	// overrides it, up to MaxHTTPTimeout.
	HTTPTimeout time.Duration
	// MaxResponseBytes is how much of each HTTP response body is kept
	// (default 1 MiB); the rest is cut and the output says so.
	MaxResponseBytes int64
	// MaxOutputBytes caps the JSON of one step's recorded output (default
	// MaxResponseBytes + 64 KiB), so that run records stay storable.
	MaxOutputBytes int64
	// MaxRunOutputBytes caps the recorded outputs of one run together
	// (default DefaultMaxRunOutputBytes): past it, outputs are recorded as
	// shorter previews, down to none.
	MaxRunOutputBytes int64
	// Code runs CODE steps out of process (pkg/sandbox on flowd, the code
	// Lambda on AWS). Nil fails every CODE step with a clear error, so that
	// binaries that run no code never link a JavaScript engine.
	Code  automation.CodeRunner
	Clock func() time.Time // default time.Now
	Log   *slog.Logger
}

// Defaults and limits of Config.
const (
	DefaultHTTPTimeout      = 30 * time.Second
	MaxHTTPTimeout          = 120 * time.Second
	DefaultMaxResponseBytes = 1 << 20
	// DefaultMaxRunOutputBytes bounds a run record's step outputs together.
	DefaultMaxRunOutputBytes = 8 << 20
	// MaxResponseHeaderBytes bounds the headers of an HTTP step's response.
	MaxResponseHeaderBytes = 256 << 10
	// MaxStepErrorBytes bounds a step's recorded error message.
	MaxStepErrorBytes = 4 << 10
	maxRedirects      = 5
)

// Engine executes runs. It is safe for concurrent use.
type Engine struct {
	creds       Credentials
	code        automation.CodeRunner
	checker     Checker
	transport   *http.Transport
	timeout     time.Duration
	maxResponse int64
	maxOutput   int64
	maxRun      int64
	now         func() time.Time
	log         *slog.Logger
}

// New returns an Engine for cfg.
func New(cfg Config) *Engine {
	e := &Engine{
		creds: cfg.Credentials, code: cfg.Code,
		timeout: cfg.HTTPTimeout, maxResponse: cfg.MaxResponseBytes, maxOutput: cfg.MaxOutputBytes, maxRun: cfg.MaxRunOutputBytes,
		now: cfg.Clock, log: cfg.Log,
	}
	if e.timeout <= 0 {
		e.timeout = DefaultHTTPTimeout
	}
	e.timeout = min(e.timeout, MaxHTTPTimeout)
	if e.maxResponse <= 0 {
		e.maxResponse = DefaultMaxResponseBytes
	}
	if e.maxOutput <= 0 {
		e.maxOutput = e.maxResponse + 64<<10
	}
	if e.maxRun <= 0 {
		e.maxRun = DefaultMaxRunOutputBytes
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivateNetworks {
		dialer.Control = guardControl
	}
	e.transport = &http.Transport{
		// No proxy from the environment: a proxy would dial for us and
		// bypass the address check.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    10,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		ResponseHeaderTimeout:  MaxHTTPTimeout,
		MaxResponseHeaderBytes: MaxResponseHeaderBytes,
	}
	return e
}

var _ automation.Executor = (*Engine)(nil)

// Result is a finished run: Run, and Retryable when the failure was
// transient (network error, step timeout, 429, 5xx, a credential store
// outage, a cancelled context), so that another attempt may succeed. It is
// automation.Execution, so that Engine is an automation.Executor.
type Result = automation.Execution

// clock returns the current time as stored: UTC, milliseconds.
func (e *Engine) clock() time.Time { return e.now().UTC().Truncate(time.Millisecond) }

// stepError is a failed step: the message recorded, whether it is transient,
// and any output to keep (an HTTP response).
type stepError struct {
	msg       string
	retryable bool
	output    any
}

func (e *stepError) Error() string { return e.msg }

func fail(retryable bool, err error) *stepError {
	return &stepError{msg: err.Error(), retryable: retryable}
}

// errFiltered ends a run successfully after a false FILTER.
var errFiltered = errors.New("filtered")

// Execute runs the steps of f (its secrets already revealed) for run r
// (Trigger filled) and returns r finished: Status, Steps, Error,
// Started, Finished, DurationMs and Response. It persists nothing. A run
// whose ctx deadline passes ends TIMEOUT.
func (e *Engine) Execute(ctx context.Context, f automation.Flow, r automation.Run) Result {
	return e.ExecuteJournaled(ctx, f, r, nil)
}

// ExecuteJournaled is Execute for one attempt at a run that may have
// journaled steps already (automation.Executor): a step with side effects
// that r.Steps records as SUCCEEDED at its place is not executed again,
// its recorded output standing in for it (a truncated output stands as its
// preview), and after each step with side effects that has a step after it,
// journal (when not nil) records the results so far before the next one
// starts. A journal that fails ends the attempt, retryable.
func (e *Engine) ExecuteJournaled(ctx context.Context, f automation.Flow, r automation.Run, journal automation.Journal) Result {
	previous := r.Steps
	start := e.clock()
	r.Started, r.Finished, r.DurationMs = &start, nil, nil
	r.Status, r.Error, r.Response, r.StoppedAt = automation.RunRunning, "", nil, ""
	r.Steps = make([]automation.StepResult, len(f.Steps))
	for i, s := range f.Steps {
		r.Steps[i] = automation.StepResult{Name: s.Name, Type: s.Type, Status: automation.StepSkipped}
	}

	x := &execution{e: e, flow: f, run: &r, steps: make(map[string]any, len(f.Steps))}
	x.env = map[string]any{
		"trigger": triggerEnv(r.Trigger),
		"steps":   x.steps,
		"flow":    map[string]any{"id": f.ID, "name": f.Name},
		"run":     map[string]any{"id": r.ID},
	}

	res := Result{}
	last := json.RawMessage(`{}`) // the last output, as recorded
	var spent int64               // bytes of outputs recorded so far
	for i, s := range f.Steps {
		if err := ctx.Err(); err != nil {
			res.Retryable = x.interrupted(ctx, s.Name)
			break
		}
		sr := &r.Steps[i]
		if done, ok := journaled(previous, i, s); ok {
			*sr = done
			if out := recorded(done.Output); out != nil {
				x.steps[s.Name] = out
				last = done.Output
			}
			spent += int64(len(done.Output))
			continue
		}
		began := e.clock()
		sr.StartedAt = &began
		out, err := x.step(ctx, s)
		sr.Attempts = 1
		done := e.clock()
		sr.FinishedAt, sr.DurationMs = &done, done.Sub(began).Milliseconds()
		sr.Logs, x.logs = x.logs, nil

		var se *stepError
		switch {
		case err == nil, errors.Is(err, errFiltered):
			sr.Status = automation.StepSucceeded
		default:
			if !errors.As(err, &se) {
				se = fail(false, err)
			}
			se.msg = clipMessage(se.msg)
			sr.Status, sr.Error = automation.StepFailed, se.msg
			out = se.output
		}
		sr.Output = e.record(out, min(e.maxOutput, e.maxRun-spent))
		spent += int64(len(sr.Output))
		if out != nil {
			x.steps[s.Name] = out
			last = sr.Output
		}
		if errors.Is(err, errFiltered) {
			r.StoppedAt = s.Name
			break
		}
		goesOn := se == nil || (s.Type == automation.StepHTTP && s.ContinueOnFail)
		if goesOn && journal != nil && s.Type.SideEffects() && i < len(f.Steps)-1 {
			if err := journal(ctx, slices.Clone(r.Steps[:i+1])); err != nil {
				r.Status, r.Error, res.Retryable = automation.RunFailed, "step "+s.Name+": its result could not be recorded: "+err.Error(), true
				break
			}
		}
		if se != nil {
			if s.Type == automation.StepHTTP && s.ContinueOnFail {
				if out == nil {
					x.steps[s.Name] = map[string]any{"error": se.msg}
				}
				continue
			}
			if ctx.Err() != nil {
				res.Retryable = x.interrupted(ctx, s.Name)
				break
			}
			r.Status, r.Error, res.Retryable = automation.RunFailed, "step "+s.Name+": "+se.msg, se.retryable
			break
		}
	}
	if r.Status == automation.RunRunning {
		r.Status = automation.RunSucceeded
		if r.Response == nil {
			r.Response = &automation.RunResponse{StatusCode: http.StatusOK, Body: last}
		}
	} else {
		r.Response = nil
	}
	end := e.clock()
	d := end.Sub(start).Milliseconds()
	r.Finished, r.DurationMs = &end, &d
	e.log.InfoContext(ctx, "run finished", "run", r.ID, "flow", f.ID, "status", r.Status,
		"durationMs", d, "retryable", res.Retryable)
	res.Run = r
	return res
}

// journaled returns the result an earlier attempt recorded for step s at
// index i, when s has side effects and that attempt finished it.
func journaled(previous []automation.StepResult, i int, s automation.Step) (automation.StepResult, bool) {
	if i >= len(previous) || !s.Type.SideEffects() {
		return automation.StepResult{}, false
	}
	p := previous[i]
	return p, p.Name == s.Name && p.Type == s.Type && p.Status == automation.StepSucceeded
}

// recorded is a journaled output as expressions see it.
func recorded(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil
	}
	return v
}

// interrupted ends a run whose context ended before or during step name:
// TIMEOUT past the deadline, FAILED (and worth retrying) when cancelled.
func (x *execution) interrupted(ctx context.Context, name string) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		x.run.Status, x.run.Error = automation.RunTimeout, "step "+name+": the run timed out"
		return false
	}
	x.run.Status, x.run.Error = automation.RunFailed, "step "+name+": the run was cancelled"
	return true
}

// record is a step output as stored: JSON, replaced by
// {"truncated": true, "size", "preview"} when larger than limit or nested
// deeper than MaxOutputDepth ("size" is then at least the JSON's size).
func (e *Engine) record(out any, limit int64) json.RawMessage {
	if out == nil {
		return nil
	}
	limit = max(limit, 0)
	// Measured before it is built: an output may hold many references to
	// one large value, far larger as JSON than in memory.
	b, ok, err := boundedJSON(out, int(limit))
	if err != nil {
		b, _ = json.Marshal(map[string]any{"error": "output is not representable as JSON"})
		return b
	}
	if ok {
		return b
	}
	size := len(b)
	if b == nil {
		size = jsonSize(out, maxMeasured)
	}
	// The preview is JSON text inside a string, where quotes and
	// backslashes double: a third of the cap keeps the whole within it.
	keep := int(limit / 3)
	preview, _ := json.Marshal(clip(out, keep))
	preview = preview[:min(len(preview), keep)]
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(struct {
		Truncated bool   `json:"truncated"`
		Size      int    `json:"size"`
		Preview   string `json:"preview"`
	}{true, size, strings.ToValidUTF8(string(preview), "")})
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// clipMessage bounds a step's error message.
func clipMessage(s string) string {
	if len(s) <= MaxStepErrorBytes {
		return s
	}
	return strings.ToValidUTF8(s[:MaxStepErrorBytes], "") + "…"
}

// maxMeasured bounds the work of measuring an output too large to keep:
// "size" then says at least this much.
const maxMeasured = 64 << 20

// triggerEnv is the run's request as expressions see it under `trigger`.
func triggerEnv(t automation.TriggerData) map[string]any {
	var body any
	if len(t.Body) > 0 {
		if err := json.Unmarshal(t.Body, &body); err != nil {
			body = string(t.Body)
		}
	}
	return map[string]any{
		"body":    body,
		"headers": stringMap(t.Headers),
		"query":   stringMap(t.Query),
		"method":  t.Method,
		"path":    t.Path,
	}
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
