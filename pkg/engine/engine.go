// Package engine runs flows: it evaluates expressions and templates
// (expr-lang/expr), checks cron specs, and executes a flow's steps for a run,
// including HTTP requests to external services through stored connections.
// The local server and the Lambdas share it; it persists nothing.
package engine

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"flowservice/pkg/automation"
)

// Config wires an Engine. Zero fields take the defaults below.
type Config struct {
	// Env is what runs read of the domain: credentials, connection names,
	// flow state, variables, CALL_FLOW children, the outbound gate and the
	// tracer (NewService fills it). A nil field makes what needs it fail with a
	// clear step error, as in tests that need no more.
	Env automation.ExecEnv
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
	// UserAgent is sent with every outbound request (default UserAgent("")).
	UserAgent string
	// RootCAs are the certificate authorities EMAIL steps trust for their
	// SMTP servers' TLS (nil: the system's); tests add their own.
	RootCAs *x509.CertPool
	// Sleep waits d unless ctx ends first (reporting false): an AI step's
	// wait before asking a model again (default a timer; tests inject it).
	Sleep func(ctx context.Context, d time.Duration) bool
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
	creds      automation.Credentials
	names      automation.ConnectionNames
	code       automation.CodeRunner
	state      automation.FlowStates
	vars       automation.VariableLoader
	calls      automation.Calls
	waitpoints automation.Waitpoints
	checker    Checker
	transport  *http.Transport
	// sender is transport as HTTP steps send through it: traced when
	// tracing is on (TraceTransport), transport itself otherwise.
	sender      http.RoundTripper
	tracer      automation.Tracer // nil: tracing is off
	timeout     time.Duration
	maxResponse int64
	maxOutput   int64
	maxRun      int64
	now         func() time.Time
	log         *slog.Logger
	userAgent   string
	outbound    automation.OutboundGate
	actions     automation.AppCatalog // ACTION steps (step_action.go)
	// allowPrivate lets SQL and EMAIL steps dial private addresses too.
	allowPrivate bool
	dbs          *dbPools // SQL steps' pools (step_sql.go)
	dbsOnce      sync.Once
	rootCAs      *x509.CertPool
	toolFlows    automation.ToolFlows // AI steps' flow tools
	aiTokens     automation.AIMeter   // AI steps' aiTokensPerDay (nil: not counted)
	sleep        func(ctx context.Context, d time.Duration) bool
}

// New returns an Engine for cfg.
func New(cfg Config) *Engine {
	e := &Engine{
		creds: cfg.Env.Credentials, names: cfg.Env.ConnectionNames, state: cfg.Env.State, vars: cfg.Env.Variables,
		calls: cfg.Env.Calls, waitpoints: cfg.Env.Waitpoints, outbound: cfg.Env.Outbound, tracer: cfg.Env.Tracer, code: cfg.Code, actions: cfg.Env.Actions,
		allowPrivate: cfg.AllowPrivateNetworks, rootCAs: cfg.RootCAs,
		timeout: cfg.HTTPTimeout, maxResponse: cfg.MaxResponseBytes, maxOutput: cfg.MaxOutputBytes, maxRun: cfg.MaxRunOutputBytes,
		now: cfg.Clock, log: cfg.Log, userAgent: cfg.UserAgent,
		toolFlows: cfg.Env.ToolFlows, aiTokens: cfg.Env.AITokens, sleep: cfg.Sleep,
	}
	if e.sleep == nil {
		e.sleep = sleepCtx
	}
	if e.userAgent == "" {
		e.userAgent = UserAgent("")
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
	// No proxy from the environment (a proxy would dial for us and bypass
	// the address check), idle connections kept for the workers' calls.
	e.transport = GuardedTransport(cfg.AllowPrivateNetworks)
	e.transport.ExpectContinueTimeout = time.Second
	e.transport.ResponseHeaderTimeout = MaxHTTPTimeout
	e.transport.MaxResponseHeaderBytes = MaxResponseHeaderBytes
	e.sender = TraceTransport(e.tracer, e.transport)
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
	msg        string
	retryable  bool
	retryAfter time.Duration // what the service asked for (Retry-After); 0 if nothing
	output     any
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
// that r.Steps records as SUCCEEDED (at any depth, keyed by its name and,
// inside FOR_EACH, its item) is not executed again, its recorded output
// standing in for it (a truncated output stands as its preview), and after
// each step with side effects that has a step after it, journal (when not
// nil) records the results so far before the next one starts. A journal
// that fails ends the attempt, retryable.
func (e *Engine) ExecuteJournaled(ctx context.Context, f automation.Flow, r automation.Run, journal automation.Journal) Result {
	previous := journalIndex(r.Steps)
	start := e.clock()
	r.Started, r.Finished, r.DurationMs = &start, nil, nil
	r.Status, r.Error, r.Response, r.StoppedAt = automation.RunRunning, "", nil, ""
	r.Steps = pending(f.Steps)

	x := e.newExecution(ctx, f, &r, journal, previous)
	res := Result{}
	var end listEnd
	if what, err := x.prepare(ctx); err != nil {
		end.err, end.step = err, what
	} else {
		end = x.list(ctx, f.Steps, r.Steps, "", true)
	}
	last := end.last
	if last == nil {
		last = json.RawMessage(`{}`)
	}
	switch {
	case end.journalErr != nil:
		r.Status, r.Error, res.Retryable = automation.RunFailed, "step "+end.step+": its result could not be recorded: "+end.journalErr.Error(), true
	case end.interrupted:
		res.Retryable = x.interrupted(ctx, end.step)
	case end.err != nil:
		r.Status, r.Error, res.Retryable = automation.RunFailed, "step "+end.step+": "+end.err.msg, end.err.retryable
	case end.filtered != "":
		r.StoppedAt = end.filtered
	case end.wait != nil:
		// Paused by a WAIT: the run stays RUNNING and resumes after it.
		r.Steps = x.snapshot()
		markWaiting(r.Steps)
		res.WaitUntil = end.wait
		res.Calls = x.sh.calls
		if end.waitpoint != "" {
			res.WaitFor, res.Waitpoints = end.waitFor, []string{end.waitpoint}
		}
		end2 := e.clock()
		d := end2.Sub(start).Milliseconds()
		r.DurationMs = &d
		e.log.InfoContext(ctx, "run waits", "run", r.ID, "flow", f.ID, "step", end.step, "until", end.wait)
		r.Usage = automation.StepsUsage(r.Steps, r.OnErrorSteps)
		res.Run = r
		return res
	}
	r.Steps = x.snapshot()
	if r.Status == automation.RunRunning {
		r.Status = automation.RunSucceeded
		if r.Response == nil {
			r.Response = &automation.RunResponse{StatusCode: http.StatusOK, Body: last}
		}
	} else {
		r.Response = nil
	}
	end2 := e.clock()
	d := end2.Sub(start).Milliseconds()
	r.Finished, r.DurationMs = &end2, &d
	e.log.InfoContext(ctx, "run finished", "run", r.ID, "flow", f.ID, "status", r.Status,
		"durationMs", d, "retryable", res.Retryable)
	// The AI steps' tokens ride in the write that stores this result.
	r.Usage = automation.StepsUsage(r.Steps, r.OnErrorSteps)
	res.Run = r
	return res
}

// pause waits before execution n+1 of a step with a retry policy:
// exponential from its backoff, with jitter in the upper half, at most its
// maxBackoff, or what the service asked for (Retry-After) when that is
// longer, up to automation.MaxStepBackoff, and never under
// automation.MinStepBackoff. It reports false when the run
// ends first.
func (e *Engine) pause(ctx context.Context, r *automation.StepRetry, n int, asked time.Duration) bool {
	first, most, err := r.Delays()
	if err != nil { // validated at save time; a stored flow may predate a rule
		first, most = automation.DefaultStepBackoff, automation.DefaultStepMaxBackoff
	}
	d := first
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	d = min(d, most)
	d = max(d/2+rand.N(d/2+1), automation.MinStepBackoff)
	if asked > d {
		d = min(asked, automation.MaxStepBackoff)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// sleepCtx waits d unless ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// pending is the results of steps before they run: every one SKIPPED.
func pending(steps []automation.Step) []automation.StepResult {
	out := make([]automation.StepResult, len(steps))
	for i, s := range steps {
		out[i] = automation.StepResult{Name: s.Name, Type: s.Type, Status: automation.StepSkipped}
	}
	return out
}

// markWaiting records where a run that waits stands. pending records every
// step SKIPPED up front, which is what a step not reached is once the run
// has ended; while it waits, a container it entered and did not finish (a
// SWITCH whose branch holds the WAIT) is RUNNING and a step not reached yet
// is PENDING. The next attempt reads neither as finished (journalIndex), as
// it did not the SKIPPED without a finishing time they replace.
func markWaiting(steps []automation.StepResult) {
	for i := range steps {
		st := &steps[i]
		if st.Status != automation.StepSkipped || st.FinishedAt != nil {
			continue // ran, or skipped by its `when`
		}
		st.Status = automation.StepPending
		if st.StartedAt != nil {
			st.Status = automation.StepRunning
		}
		markWaiting(st.Steps)
	}
}

// journalKey names a step's result in the journal: its name (unique in the
// flow) and, inside FOR_EACH, the item path ("call#3", "inner#3.1").
func journalKey(name, iter string) string {
	if iter == "" {
		return name
	}
	return name + "#" + iter
}

// journalIndex collects what an earlier attempt decided, at any depth, by
// journalKey: steps that finished (SUCCEEDED, and those a `when` skipped:
// SKIPPED with a finishing time), which are not executed again, and the
// containers it left unfinished (a SWITCH keeps the case it chose), which
// are entered again.
func journalIndex(steps []automation.StepResult) map[string]automation.StepResult {
	m := map[string]automation.StepResult{}
	var walk func(steps []automation.StepResult, iter string)
	walk = func(steps []automation.StepResult, iter string) {
		for _, st := range steps {
			done := st.Status == automation.StepSucceeded || st.Status == automation.StepSkipped && st.FinishedAt != nil
			// An AI step under way keeps its journal in its output (step_ai.go).
			aiJournal := st.Type == automation.StepAI && len(st.Output) > 0
			if done || len(st.Steps) > 0 || len(st.Iterations) > 0 || aiJournal {
				m[journalKey(st.Name, iter)] = st
			}
			if done {
				continue // restored whole, nested results included
			}
			walk(st.Steps, iter)
			for _, it := range st.Iterations {
				walk(it.Steps, joinIter(iter, it.Index))
			}
		}
	}
	walk(steps, "")
	return m
}

// finished reports whether a journaled result stands for its step: it
// finished (or a `when` skipped it), so the step is not executed again.
func finished(st automation.StepResult) bool {
	return st.Status == automation.StepSucceeded || st.Status == automation.StepSkipped && st.FinishedAt != nil
}

// joinIter extends an item path with one more loop's index.
func joinIter(iter string, i int) string {
	if iter == "" {
		return strconv.Itoa(i)
	}
	return iter + "." + strconv.Itoa(i)
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
	files := make([]any, len(t.Files))
	for i, f := range t.Files {
		files[i] = map[string]any{"field": f.Field, "filename": f.Filename, "contentType": f.ContentType,
			"size": f.Size, "base64": f.Base64}
	}
	return map[string]any{
		"body":       body,
		"headers":    stringMap(t.Headers),
		"query":      stringMap(t.Query),
		"params":     stringMap(t.Params),
		"files":      files,
		"bodyBase64": t.BodyBase64,
		"rawBody":    rawBody(t),
		"method":     t.Method,
		"path":       t.Path,
		"caller":     callerEnv(t.Caller),
	}
}

// rawBody is trigger.rawBody: the body as received when the receiver kept
// it (a flow that reads rawBody or verifies a signature), else the body's
// stored text; "" for a body that is not text (see bodyBase64).
func rawBody(t automation.TriggerData) string {
	if t.RawBody != "" || t.BodyBase64 != "" {
		return t.RawBody
	}
	var s string
	if json.Unmarshal(t.Body, &s) == nil {
		return s // a text body is kept as a JSON string
	}
	if len(t.Body) == 0 || string(t.Body) == "null" {
		return ""
	}
	return string(t.Body)
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
