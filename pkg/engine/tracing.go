package engine

import (
	"context"
	"io"
	"net/http"
	"sync"

	"flowservice/pkg/automation"
)

// TraceTransport wraps rt so that every request sent through it is a span
// under its context's (the step's, automation.Tracer.StartRequest) and
// carries that span to the receiving service in traceparent and
// tracestate. It is the one way a step's outbound requests are traced:
// a step type that sends HTTP (HTTP steps here, and any later one) sends
// through it. A header the step set itself is left as it is. With t nil
// (tracing off) it is rt itself, so that the run path costs nothing more.
//
// The span ends when the answer's body is closed (or when no answer
// came), so it covers the body's transfer too. What it records is the
// method, the host and the status code: never a header value, a path or
// a query, where credentials may travel.
func TraceTransport(t automation.Tracer, rt http.RoundTripper) http.RoundTripper {
	if t == nil {
		return rt
	}
	return &tracedTransport{t: t, rt: rt}
}

type tracedTransport struct {
	t  automation.Tracer
	rt http.RoundTripper
}

func (tt *tracedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// A RoundTripper may not change the request it is given: the trace
	// headers go on a copy (the body is shared, as it must be).
	out := req.Clone(req.Context())
	end := tt.t.StartRequest(req.Context(), req.Method, req.URL.Hostname(), func(k, v string) {
		if out.Header.Get(k) == "" {
			out.Header.Set(k, v)
		}
	})
	resp, err := tt.rt.RoundTrip(out)
	if err != nil {
		end(0, err)
		return nil, err
	}
	resp.Body = &spanBody{ReadCloser: resp.Body, end: func() { end(resp.StatusCode, nil) }}
	return resp, nil
}

// spanBody ends a request's span when its answer's body is closed.
type spanBody struct {
	io.ReadCloser
	once sync.Once
	end  func()
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.end)
	return err
}

// startStep starts the span of step s's execution when tracing is on:
// its context parents what the step does (requests, nested steps).
func (x *execution) startStep(ctx context.Context, s automation.Step) (context.Context, func(automation.StepResult)) {
	if x.e.tracer == nil {
		return ctx, nil
	}
	return x.e.tracer.StartStep(ctx, s.Name, s.Type, x.run.Attempts)
}

// endStep ends a step's span with its result as recorded.
func (x *execution) endStep(end func(automation.StepResult), sr *automation.StepResult) {
	if end == nil {
		return
	}
	var res automation.StepResult
	x.locked(func() { res = *sr })
	end(res)
}

// startOutbound starts the span of a step's exchange with a database or a
// mail server (automation.Tracer.StartOutbound); with tracing off, end
// does nothing.
func (x *execution) startOutbound(ctx context.Context, system, host string, port int) (end func(error)) {
	if x.e.tracer == nil {
		return func(error) {}
	}
	return x.e.tracer.StartOutbound(ctx, system, host, port)
}

// callTrace is the trace context a CALL_FLOW child keeps: the calling
// step's span (ctx's). nil with tracing off.
func (x *execution) callTrace(ctx context.Context) *automation.RunTrace {
	if x.e.tracer == nil {
		return nil
	}
	return x.e.tracer.Propagate(ctx)
}
