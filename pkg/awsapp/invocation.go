package awsapp

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

// invocation is what every log line of one invocation carries besides the
// Lambda request ID: API Gateway's request ID (apiRequestId: the requestId
// of its access log line; it is not the answer's X-Request-Id, which is the
// handler's own request ID, logged as requestId) and whether the
// invocation paid the cold start.
type invocation struct {
	apiRequestID string
	cold         bool
}

type invocationKey struct{}

// coldStart tells the first invocation of an execution environment.
type coldStart struct{ done atomic.Bool }

func (c *coldStart) first() bool { return c.done.CompareAndSwap(false, true) }

// begin marks ctx with the invocation and counts a cold start.
func (a *App) begin(ctx context.Context, function, apiRequestID string) context.Context {
	cold := a.cold.first()
	if cold {
		a.metrics.Put("ColdStarts", "Count", 1, map[string]string{"Function": function})
	}
	return context.WithValue(ctx, invocationKey{}, invocation{apiRequestID: apiRequestID, cold: cold})
}

// Proxy is the proxy event handler of an HTTP function serving h.
func (a *App) Proxy(function string, h http.Handler) ProxyHandler {
	proxy := httpadapter.New(h).ProxyWithContext
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		resp, err := proxy(a.begin(ctx, function, ev.RequestContext.RequestID), ev)
		a.nudgeAlerts(ctx)
		a.flushTraces(ctx)
		if err != nil {
			return resp, err
		}
		// The management API cuts its answers to the budget itself
		// (httpapi.WithResponseBudget with LambdaBudget); any answer still
		// over it (a receiver's, the dashboard's) is kept from failing the
		// invocation.
		body := resp.Body
		if size := responseSize(&resp); size > ResponseBudget {
			tooLarge(&resp, size)
		}
		if resp.Body != body {
			delete(resp.Headers, "Content-Length")
			http.Header(resp.MultiValueHeaders).Del("Content-Length")
		}
		if strings.EqualFold(ev.HTTPMethod, http.MethodHead) {
			headResponse(&resp)
		}
		return resp, nil
	}
}

// headResponse makes resp the answer to a HEAD request, as net/http's
// server makes flowd's: the handlers write the body a GET would get, and
// the proxy adapter would hand it to API Gateway. The body is dropped and
// its length kept in Content-Length (unless the handler set one); an
// empty body gets none, since a handler that wrote nothing may not know
// the length.
func headResponse(resp *events.APIGatewayProxyResponse) {
	n := len(resp.Body)
	if resp.IsBase64Encoded {
		if b, err := base64.StdEncoding.DecodeString(resp.Body); err == nil {
			n = len(b)
		}
	}
	if n > 0 && !hasHeader(resp, "Content-Length") {
		if resp.MultiValueHeaders == nil {
			resp.MultiValueHeaders = map[string][]string{}
		}
		http.Header(resp.MultiValueHeaders).Set("Content-Length", strconv.Itoa(n))
	}
	resp.Body, resp.IsBase64Encoded = "", false
}

// hasHeader reports whether resp has header k in either of its maps.
func hasHeader(resp *events.APIGatewayProxyResponse, k string) bool {
	for name := range resp.Headers {
		if strings.EqualFold(name, k) {
			return true
		}
	}
	for name := range resp.MultiValueHeaders {
		if strings.EqualFold(name, k) {
			return true
		}
	}
	return false
}

// SQS is the batch handler of a queue function.
func (a *App) SQS(function string, h SQSHandler) SQSHandler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		resp, err := h(a.begin(ctx, function, ""), ev)
		a.flushTraces(ctx)
		return resp, err
	}
}

// TraceFlushTimeout bounds how long an invocation waits, before it
// returns, for its spans to be exported: Lambda freezes the environment
// once it returns, and a span still queued then would wait for the next
// invocation, or be lost with the environment. Past the bound (an
// unreachable collector) the invocation returns anyway; the spans stay
// queued (pkg/tracing, docs/reliability.md).
const TraceFlushTimeout = 2 * time.Second

// flushTraces exports the spans the invocation ended, within
// TraceFlushTimeout and what is left of the invocation's own time.
func (a *App) flushTraces(ctx context.Context) {
	if a.tracer == nil {
		return
	}
	bound := TraceFlushTimeout
	if dl, ok := ctx.Deadline(); ok {
		bound = min(bound, max(time.Until(dl)-100*time.Millisecond, 0))
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bound)
	defer cancel()
	if err := a.tracer.Flush(fctx); err != nil {
		a.Log.WarnContext(ctx, "traces not exported before the invocation returned", "err", err)
	}
}

// invocationHandler adds to each record the Lambda request ID, the X-Ray
// trace ID, API Gateway's request ID and the cold-start flag, from the
// invocation's context.
type invocationHandler struct{ slog.Handler }

func (h invocationHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String("awsRequestId", lc.AwsRequestID))
	}
	if id := traceID(ctx); id != "" {
		r.AddAttrs(slog.String("traceId", id))
	}
	if inv, ok := ctx.Value(invocationKey{}).(invocation); ok {
		if inv.apiRequestID != "" {
			r.AddAttrs(slog.String("apiRequestId", inv.apiRequestID))
		}
		r.AddAttrs(slog.Bool("coldStart", inv.cold))
	}
	return h.Handler.Handle(ctx, r)
}

func (h invocationHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return invocationHandler{h.Handler.WithAttrs(as)}
}

func (h invocationHandler) WithGroup(name string) slog.Handler {
	return invocationHandler{h.Handler.WithGroup(name)}
}

// traceID is the X-Ray trace's root ID of the invocation: the Lambda
// runtime puts the trace header in the context under this string key.
func traceID(ctx context.Context) string {
	header, _ := ctx.Value("x-amzn-trace-id").(string)
	for _, part := range strings.Split(header, ";") {
		if root, ok := strings.CutPrefix(part, "Root="); ok {
			return root
		}
	}
	return ""
}

// memoryLimit is the Go runtime's soft memory limit for a function of
// AWS_LAMBDA_FUNCTION_MEMORY_SIZE megabytes: 90% of it, so that the
// collector works harder before Lambda kills the environment for running
// out. Zero when the size is unknown.
func memoryLimit(getenv func(string) string) int64 {
	mb, err := strconv.ParseInt(getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"), 10, 64)
	if err != nil || mb <= 0 {
		return 0
	}
	return mb << 20 * 9 / 10
}

func setMemoryLimit(getenv func(string) string) {
	if n := memoryLimit(getenv); n > 0 {
		debug.SetMemoryLimit(n)
	}
}
