package automation

import "context"

// Tracer records what runs do as spans of a distributed trace
// (docs/operations.md, "Traces"): one span per run, a child per step, and a
// child per outbound request, which carries the trace on (W3C
// traceparent). It is a capability (Config.Tracer, ExecEnv.Tracer): nil
// when tracing is off, and then nothing on the run path asks anything of
// it. pkg/tracing implements it with OpenTelemetry; the domain and the
// engine see only this.
//
// A run lives longer than any one process (a queue hop, a WAIT, a retry,
// a restart), so its span cannot be held open: the tracer names the run's
// span from the run alone (its ID, and the caller's context the run keeps
// in Trace), every attempt parents its step spans on that name (Attempt),
// and the run's span itself is recorded once, when the run is final
// (RunEnded), from its creation to its finish.
//
// No value a run treats as secret goes into a span: steps are named by
// their name and type, requests by their method and host (never a header
// value, a URL's path or query), and errors only as the run record shows
// them (masked).
type Tracer interface {
	// Join is the trace context a new run keeps from the request that
	// started it: the caller's W3C traceparent and tracestate as the
	// tracer accepts them, nil when there is none or it is not valid (the
	// run then starts a trace of its own).
	Join(traceparent, tracestate string) *RunTrace
	// Attempt returns ctx under r's span, for the spans of one attempt at
	// r: every attempt of a run, in any process, finds the same span.
	Attempt(ctx context.Context, r Run) context.Context
	// RunEnded records r's span, once r is final and stored so.
	RunEnded(ctx context.Context, r Run)
	// StartStep starts the span of one execution of a step under ctx's
	// span (attempt is the run's attempt); end records the step's
	// outcome. The returned context parents what the step does.
	StartStep(ctx context.Context, name string, typ StepType, attempt int) (_ context.Context, end func(StepResult))
	// StartRequest starts the span of one outbound request under ctx's
	// span and hands set the headers that carry it to the receiving
	// service (traceparent, tracestate); end records the answer's status
	// code (0 when none came, with the error).
	StartRequest(ctx context.Context, method, host string, set func(key, value string)) (end func(status int, err error))
	// StartOutbound starts the span of one outbound exchange that is not
	// HTTP (a SQL statement, an SMTP send) under ctx's span: system names
	// its protocol (OutboundPostgres, OutboundMySQL, OutboundSMTP), host
	// and port the server; end records the kind of its failure, if any.
	// Nothing else of the exchange is recorded: no statement, parameter,
	// address, message or credential.
	StartOutbound(ctx context.Context, system, host string, port int) (end func(err error))
	// Propagate is the trace context of ctx's span as a run that span
	// starts keeps it (Run.Trace, as Join's): a CALL_FLOW child's run is a
	// child of the calling step's span. nil when ctx carries no span.
	Propagate(ctx context.Context) *RunTrace
}

// The systems of StartOutbound's spans.
const (
	OutboundPostgres = "postgresql"
	OutboundMySQL    = "mysql"
	OutboundSMTP     = "smtp"
)

// RunTrace is the trace context of the request that started a run
// (Run.Trace): the caller's span, which the run's span is a child of, kept
// with the run so that every attempt, in any process and after any wait,
// joins the caller's trace.
type RunTrace struct {
	// Parent is the caller's W3C traceparent ("00-<trace>-<span>-<flags>").
	Parent string `json:"parent"`
	// State is the caller's W3C tracestate, "" for none.
	State string `json:"state,omitempty"`
}

// joinTrace is the trace context a run started by td keeps: its
// traceparent and tracestate headers as the tracer accepts them, nil when
// tracing is off (nothing is kept, nothing is parsed).
func joinTrace(t Tracer, td TriggerData) *RunTrace {
	if t == nil {
		return nil
	}
	tp := td.Headers["traceparent"]
	if tp == "" {
		return nil
	}
	return t.Join(tp, td.Headers["tracestate"])
}
