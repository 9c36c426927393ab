// Package tracing exports what runs do as OpenTelemetry traces over
// OTLP/HTTP: it implements automation.Tracer with the OpenTelemetry Go SDK
// (docs/operations.md, "Traces"). It is configured only by the standard
// OTEL_* variables, which the SDK reads itself (endpoint, headers,
// timeout, compression, service name and resource attributes, sampler,
// batch bounds), and is off unless an OTLP endpoint is set: FromEnv then
// returns nil, and the Service is given no tracer at all.
package tracing

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"flowservice/pkg/automation"
)

// Enabled reports whether the environment (getenv, os.Getenv when nil)
// asks for traces: an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), and neither OTEL_SDK_DISABLED=true
// nor OTEL_TRACES_EXPORTER=none turns them off.
func Enabled(getenv func(string) string) bool {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") ||
		strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) != "" ||
		strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) != ""
}

// Tracer is an automation.Tracer exporting over OTLP/HTTP. A nil *Tracer
// is tracing off: Port is nil, Flush and Shutdown do nothing.
type Tracer struct {
	tp *sdktrace.TracerProvider
	tr trace.Tracer
}

var _ automation.Tracer = (*Tracer)(nil)

// FromEnv builds the Tracer the OTEL_* environment asks for, nil when it
// asks for none (Enabled). service names the process (service.name) unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES does. The SDK's own errors
// (an export that failed, a span dropped) go to log, as warnings, instead
// of plain lines on stderr among the JSON ones; nil discards them.
func FromEnv(ctx context.Context, service string, log *slog.Logger) (*Tracer, error) {
	if !Enabled(nil) {
		return nil, nil
	}
	if log != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("traces: "+err.Error(), "component", "opentelemetry")
		}))
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP/HTTP exporter: %w", err)
	}
	// Later detectors win: the environment's names over service.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(service)), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return New(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// New is a Tracer over a TracerProvider made with opts (an exporter or
// span processor, a resource, a sampler); the sampler, when opts name
// none, and the batch bounds come from the OTEL_* environment as the SDK
// reads it. Tests give it their own processor.
func New(opts ...sdktrace.TracerProviderOption) *Tracer {
	opts = append(opts, sdktrace.WithIDGenerator(ids{}))
	tp := sdktrace.NewTracerProvider(opts...)
	return &Tracer{tp: tp, tr: tp.Tracer("flowservice")}
}

// Port is t as the domain's capability: nil when t is nil (tracing off),
// so that a Config holds a nil interface, not a nil pointer in one.
func (t *Tracer) Port() automation.Tracer {
	if t == nil {
		return nil
	}
	return t
}

// Flush exports every span ended so far, within ctx: a Lambda function
// calls it before each invocation returns, since it is frozen after.
func (t *Tracer) Flush(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Shutdown flushes and stops the exporter, within ctx.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}

// Attribute names. The run's and the step's are this service's own; a
// request's are OpenTelemetry's HTTP client conventions.
const (
	attrProject     = attribute.Key("flow.project.id")
	attrFlow        = attribute.Key("flow.id")
	attrVersion     = attribute.Key("flow.version")
	attrRunID       = attribute.Key("flow.run.id")
	attrRunStatus   = attribute.Key("flow.run.status")
	attrRunAttempts = attribute.Key("flow.run.attempts")
	attrRunAttempt  = attribute.Key("flow.run.attempt")
	attrStepName    = attribute.Key("flow.step.name")
	attrStepType    = attribute.Key("flow.step.type")
	attrStepStatus  = attribute.Key("flow.step.status")
	attrStepTries   = attribute.Key("flow.step.attempts")
)

// maxDescription bounds an error's text on a span: the run record has it
// whole.
const maxDescription = 512

var w3c = propagation.TraceContext{}

// Join parses the caller's trace context as W3C Trace Context says, and
// keeps it in its canonical form; nil when traceparent is not valid.
func (t *Tracer) Join(traceparent, tracestate string) *automation.RunTrace {
	sc := callerOf(&automation.RunTrace{Parent: traceparent, State: tracestate})
	if !sc.IsValid() {
		return nil
	}
	out := propagation.MapCarrier{}
	w3c.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), out)
	return &automation.RunTrace{Parent: out["traceparent"], State: out["tracestate"]}
}

// callerOf is the caller's span a run keeps, invalid when it keeps none.
func callerOf(rt *automation.RunTrace) trace.SpanContext {
	if rt == nil || rt.Parent == "" {
		return trace.SpanContext{}
	}
	c := propagation.MapCarrier{"traceparent": rt.Parent}
	if rt.State != "" {
		c["tracestate"] = rt.State
	}
	return trace.SpanContextFromContext(w3c.Extract(context.Background(), c))
}

// runSpan is where a run's span is started: under the caller's span when
// the run keeps one, with the IDs every process derives from the run
// alone (runIDs), so that each attempt and the run's end name one span.
func runSpan(r automation.Run) (context.Context, trace.SpanContext) {
	ctx := context.Background()
	caller := callerOf(r.Trace)
	if caller.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, caller)
	}
	return context.WithValue(ctx, forcedKey{}, runIDs(r.ID)), caller
}

// Attempt puts r's span, as a remote parent, under ctx. Whether the run is
// sampled is the SDK's sampler's decision, made again the same way by every
// attempt (it depends on the caller's flags or the trace ID only, for the
// standard samplers): a span is started for that decision and never ended,
// so it is never exported; RunEnded exports the run's span.
func (t *Tracer) Attempt(ctx context.Context, r automation.Run) context.Context {
	sctx, caller := runSpan(r)
	_, probe := t.tr.Start(sctx, "run")
	sc := probe.SpanContext().WithRemote(true)
	if caller.IsValid() {
		sc = sc.WithTraceState(caller.TraceState())
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// RunEnded records r's span, from its creation to its finish.
func (t *Tracer) RunEnded(_ context.Context, r automation.Run) {
	sctx, _ := runSpan(r)
	attrs := []attribute.KeyValue{
		attrProject.String(r.Project), attrFlow.String(r.FlowID), attrRunID.String(r.ID),
		attrRunStatus.String(string(r.Status)), attrRunAttempts.Int(r.Attempts),
	}
	if r.FlowVersion != nil {
		attrs = append(attrs, attrVersion.Int64(*r.FlowVersion))
	}
	_, span := t.tr.Start(sctx, "run", trace.WithTimestamp(r.Created), trace.WithAttributes(attrs...))
	if r.Status != automation.RunSucceeded {
		span.SetStatus(codes.Error, clip(r.Error))
	}
	end := r.Created
	if r.Finished != nil {
		end = *r.Finished
	}
	span.End(trace.WithTimestamp(end))
}

// StartStep starts a step's span under ctx's.
func (t *Tracer) StartStep(ctx context.Context, name string, typ automation.StepType, attempt int) (context.Context, func(automation.StepResult)) {
	ctx, span := t.tr.Start(ctx, "step "+name, trace.WithAttributes(
		attrStepName.String(name), attrStepType.String(string(typ)), attrRunAttempt.Int(attempt)))
	return ctx, func(sr automation.StepResult) {
		span.SetAttributes(attrStepStatus.String(string(sr.Status)), attrStepTries.Int(sr.Attempts))
		if sr.Status == automation.StepFailed {
			span.SetStatus(codes.Error, clip(sr.Error)) // masked, as the run record shows it
		}
		span.End()
	}
}

// StartRequest starts an outbound request's span under ctx's and hands
// its trace context to set. Only the method and the host are recorded,
// and of a failure only its kind: an error's text may hold the URL.
func (t *Tracer) StartRequest(ctx context.Context, method, host string, set func(key, value string)) func(int, error) {
	ctx, span := t.tr.Start(ctx, method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		semconv.HTTPRequestMethodKey.String(method), semconv.ServerAddress(host)))
	w3c.Inject(ctx, setter(set))
	return func(status int, err error) {
		switch {
		case err != nil:
			span.SetAttributes(semconv.ErrorTypeKey.String(errorKind(err)))
			span.SetStatus(codes.Error, "")
		case status >= 400:
			span.SetAttributes(semconv.HTTPResponseStatusCode(status), semconv.ErrorTypeKey.String(strconv.Itoa(status)))
			span.SetStatus(codes.Error, "")
		default:
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		}
		span.End()
	}
}

// StartOutbound starts the span of a SQL statement or an SMTP send under
// ctx's span. Its name is the system; it records the server's host and
// port and, of a failure, only its kind: a database's or a mail server's
// error text may quote a value or an address.
func (t *Tracer) StartOutbound(ctx context.Context, system, host string, port int) func(error) {
	attrs := []attribute.KeyValue{semconv.ServerAddress(host)}
	if port > 0 {
		attrs = append(attrs, semconv.ServerPort(port))
	}
	if system == automation.OutboundSMTP {
		attrs = append(attrs, semconv.NetworkProtocolName(system))
	} else {
		attrs = append(attrs, semconv.DBSystemNameKey.String(system))
	}
	_, span := t.tr.Start(ctx, system, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return func(err error) {
		if err != nil {
			span.SetAttributes(semconv.ErrorTypeKey.String(errorKind(err)))
			span.SetStatus(codes.Error, "")
		}
		span.End()
	}
}

// Propagate is ctx's span as the W3C trace context a run keeps.
func (t *Tracer) Propagate(ctx context.Context) *automation.RunTrace {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	out := propagation.MapCarrier{}
	w3c.Inject(ctx, out)
	return &automation.RunTrace{Parent: out["traceparent"], State: out["tracestate"]}
}

// errorKind is what a span says of a failure: never its text.
func errorKind(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	return "error"
}

// setter is a propagation carrier that only writes, through set.
type setter func(key, value string)

func (s setter) Get(string) string     { return "" }
func (s setter) Set(key, value string) { s(key, value) }
func (s setter) Keys() []string        { return nil }

func clip(s string) string {
	if len(s) <= maxDescription {
		return s
	}
	return strings.ToValidUTF8(s[:maxDescription], "") + "…"
}

// runIDs are the IDs of run id's span, and of its trace when no caller
// gave one: derived from the run ID, so that every process names the same
// span without storing it.
func runIDs(id string) forced {
	sum := sha256.Sum256([]byte("flowservice run span\x00" + id))
	var f forced
	copy(f.span[:], sum[:8])
	copy(f.trace[:], sum[8:24])
	return f
}

type forcedKey struct{}

type forced struct {
	trace trace.TraceID
	span  trace.SpanID
}

// ids is the SDK's ID generator: random IDs, except for a run's span,
// whose IDs the context names (runSpan).
type ids struct{}

func (ids) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if f, ok := ctx.Value(forcedKey{}).(forced); ok {
		return f.trace, f.span
	}
	var tid trace.TraceID
	var sid trace.SpanID
	for !tid.IsValid() {
		putUint64(tid[:8], rand.Uint64())
		putUint64(tid[8:], rand.Uint64())
	}
	for !sid.IsValid() {
		putUint64(sid[:], rand.Uint64())
	}
	return tid, sid
}

func (ids) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if f, ok := ctx.Value(forcedKey{}).(forced); ok {
		return f.span
	}
	var sid trace.SpanID
	for !sid.IsValid() {
		putUint64(sid[:], rand.Uint64())
	}
	return sid
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}
