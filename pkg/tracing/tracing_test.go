package tracing_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"flowservice/internal/dbtest"
	"flowservice/internal/smtptest"
	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/httpapi"
	"flowservice/pkg/oauth/oauthtest"
	"flowservice/pkg/tracing"
)

// collector is an OTLP/HTTP trace receiver on 127.0.0.1: it decodes each
// export with the official protobuf types and keeps the bytes as sent.
type collector struct {
	srv   *httptest.Server
	mu    sync.Mutex
	raw   [][]byte
	spans []*tracepb.Span
	svc   []string // service.name of each export's resource
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.Error(w, "not an OTLP trace export", http.StatusNotFound)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.raw = append(c.raw, b)
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					c.svc = append(c.svc, kv.Value.GetStringValue())
				}
			}
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// named returns the spans with that name.
func (c *collector) named(name string) []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range c.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one span with that name.
func (c *collector) one(t *testing.T, name string) *tracepb.Span {
	t.Helper()
	got := c.named(name)
	if len(got) != 1 {
		t.Fatalf("%d spans named %q exported, want 1 (all: %v)", len(got), name, c.names())
	}
	return got[0]
}

func (c *collector) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range c.spans {
		out = append(out, s.Name)
	}
	return out
}

// leaks reports which of the secrets appear in any exported byte.
func (c *collector) leaks(secrets ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, s := range secrets {
		for _, b := range c.raw {
			if bytes.Contains(b, []byte(s)) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

func attr(s *tracepb.Span, key string) *commonpb.AnyValue {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

func wantAttr(t *testing.T, s *tracepb.Span, key, want string) {
	t.Helper()
	v := attr(s, key)
	got := ""
	switch {
	case v == nil:
		got = "<none>"
	case v.GetStringValue() != "":
		got = v.GetStringValue()
	default:
		got = strings.TrimSpace(strings.TrimPrefix(v.String(), "int_value:"))
	}
	if got != want {
		t.Errorf("span %q: %s = %s, want %s", s.Name, key, got, want)
	}
}

// newTracer is the Tracer flowd builds from the OTEL_* variables, pointed at
// c; shut down when the test ends.
func newTracer(t *testing.T, c *collector) *tracing.Tracer {
	t.Helper()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", c.srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "flowd-test")
	tr, err := tracing.FromEnv(context.Background(), "flowd", nil)
	if err != nil || tr == nil {
		t.Fatalf("FromEnv = %v, %v; want a tracer", tr, err)
	}
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr
}

// downstream is a service on 127.0.0.1 that records the trace context and
// the credential of each request.
type downstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	tps  []string
	tss  []string
	auth []string
}

func newDownstream(t *testing.T) *downstream {
	d := &downstream{}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.tps = append(d.tps, r.Header.Get("traceparent"))
		d.tss = append(d.tss, r.Header.Get("tracestate"))
		d.auth = append(d.auth, r.Header.Get("Authorization"))
		d.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(d.srv.Close)
	return d
}

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
	callerTP    = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// TestWebhookRunJoinsCallerTrace: a webhook delivered with a traceparent
// makes a run whose span is a child of the caller's; the steps' spans are
// children of the run's and the request's of its step's; the outbound
// request carries the trace on; and neither the connection's token nor the
// signature secret appears in anything exported.
func TestWebhookRunJoinsCallerTrace(t *testing.T) {
	col := newCollector(t)
	tr := newTracer(t, col)
	down := newDownstream(t)
	e := flowtest.New(t, flowtest.Options{Tracer: tr.Port()})
	ctx := context.Background()
	p, _ := e.Project(t, "traced", automation.PlanEnterprise)

	const token, sigSecret = "tok-9f2c1d7e5b3a4c6d", "sig-1a2b3c4d5e6f7a8b"
	conn, err := e.Svc.CreateConnection(ctx, p, automation.ConnectionInput{Name: "svc", App: "svc",
		Type: automation.ConnectionAPIKey, Value: json.RawMessage(`{"apiKey":"` + token + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	f := e.ActiveFlow(t, p, "traced",
		automation.Step{Name: "verify", Type: automation.StepVerifySignature,
			Signature: &automation.Signature{Preset: automation.PresetGitHub, Secret: automation.Secret(sigSecret)}},
		automation.Step{Name: "call", Type: automation.StepHTTP, Method: "POST", ConnectionID: conn.ID,
			URL: down.srv.URL + "/hook?key=" + token, Body: json.RawMessage(`{"ref": "{{ trigger.body.ref }}"}`)})

	hook := httptest.NewServer(httpapi.NewWebhook(e.Svc, httpapi.HookConfig{}))
	defer hook.Close()
	body := `{"ref":"main"}`
	mac := hmac.New(sha256.New, []byte(sigSecret))
	mac.Write([]byte(body))
	req, _ := http.NewRequest(http.MethodPost, hook.URL+"/api/v1/webhooks/"+f.ID, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("traceparent", callerTP)
	req.Header.Set("tracestate", "vendor=a1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var accepted struct {
		RunID string `json:"runId"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&accepted)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || accepted.RunID == "" {
		t.Fatalf("webhook answered %d, run %q", resp.StatusCode, accepted.RunID)
	}

	// Accepted, not executed yet: the queue hop lies between.
	at, err := e.Svc.ExecuteRun(ctx, p.ID, accepted.RunID)
	if err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("run = %s, %v (%s)", at.Run.Status, err, at.Run.Error)
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	run := col.one(t, "run")
	if got := hex.EncodeToString(run.TraceId); got != callerTrace {
		t.Errorf("run span's trace = %s, want the caller's %s", got, callerTrace)
	}
	if got := hex.EncodeToString(run.ParentSpanId); got != callerSpan {
		t.Errorf("run span's parent = %s, want the caller's span %s", got, callerSpan)
	}
	if run.TraceState != "vendor=a1" {
		t.Errorf("run span's tracestate = %q, want the caller's", run.TraceState)
	}
	wantAttr(t, run, "flow.run.id", accepted.RunID)
	wantAttr(t, run, "flow.id", f.ID)
	wantAttr(t, run, "flow.project.id", p.ID)
	wantAttr(t, run, "flow.version", "1")
	wantAttr(t, run, "flow.run.status", "SUCCEEDED")
	if run.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("run span's status = %v", run.Status)
	}
	if !time.Unix(0, int64(run.StartTimeUnixNano)).Before(time.Unix(0, int64(run.EndTimeUnixNano))) {
		t.Errorf("run span from %d to %d", run.StartTimeUnixNano, run.EndTimeUnixNano)
	}

	for _, name := range []string{"step verify", "step call"} {
		st := col.one(t, name)
		if !bytes.Equal(st.TraceId, run.TraceId) || !bytes.Equal(st.ParentSpanId, run.SpanId) {
			t.Errorf("%s: trace %x parent %x, want a child of the run span %x/%x", name, st.TraceId, st.ParentSpanId, run.TraceId, run.SpanId)
		}
		wantAttr(t, st, "flow.step.status", "SUCCEEDED")
		wantAttr(t, st, "flow.run.attempt", "1")
	}
	wantAttr(t, col.one(t, "step call"), "flow.step.type", "HTTP")

	call := col.one(t, "step call")
	out := col.one(t, "POST")
	if !bytes.Equal(out.TraceId, run.TraceId) || !bytes.Equal(out.ParentSpanId, call.SpanId) {
		t.Errorf("request span: trace %x parent %x, want a child of the step span %x", out.TraceId, out.ParentSpanId, call.SpanId)
	}
	if out.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("request span kind = %v", out.Kind)
	}
	wantAttr(t, out, "http.request.method", "POST")
	wantAttr(t, out, "server.address", "127.0.0.1")
	wantAttr(t, out, "http.response.status_code", "200")

	down.mu.Lock()
	tps, tss, auth := down.tps, down.tss, down.auth
	down.mu.Unlock()
	wantTP := "00-" + callerTrace + "-" + hex.EncodeToString(out.SpanId) + "-01"
	if len(tps) != 1 || tps[0] != wantTP || tss[0] != "vendor=a1" {
		t.Errorf("downstream got traceparent %q tracestate %q, want %q and the caller's tracestate", tps, tss, wantTP)
	}
	// The token did travel (in its header), so its absence below means
	// something.
	if len(auth) != 1 || auth[0] != "Bearer "+token {
		t.Errorf("downstream got Authorization %q", auth)
	}
	if leaked := col.leaks(token, sigSecret, "key="); len(leaked) > 0 {
		t.Errorf("exported spans hold %q", leaked)
	}
	col.mu.Lock()
	svc := col.svc
	col.mu.Unlock()
	if len(svc) == 0 || svc[0] != "flowd-test" {
		t.Errorf("service.name = %q, want OTEL_SERVICE_NAME's", svc)
	}
}

// testClock is a clock a test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// TestTraceSurvivesWaitAndRestart: a run paused by a WAIT and resumed by
// another process (a new Service and a new tracer over the same data
// directory) stays in its caller's trace, under one run span: every step
// and request of both attempts is its child, and both outbound requests
// carry the caller's trace ID.
func TestTraceSurvivesWaitAndRestart(t *testing.T) {
	col := newCollector(t)
	down := newDownstream(t)
	clock := &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	first := newTracer(t, col)
	e := flowtest.New(t, flowtest.Options{Tracer: first.Port(), Clock: clock.now})
	ctx := context.Background()
	p, _ := e.Project(t, "waits", automation.PlanEnterprise)
	f := e.ActiveFlow(t, p, "waits",
		automation.Step{Name: "before", Type: automation.StepHTTP, Method: "GET", URL: down.srv.URL},
		automation.Step{Name: "later", Type: automation.StepWait, Duration: "10m"},
		automation.Step{Name: "after", Type: automation.StepHTTP, Method: "GET", URL: down.srv.URL})
	r, err := e.Svc.StartRun(ctx, f, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{}`),
		Headers: map[string]string{"traceparent": callerTP}})
	if err != nil {
		t.Fatal(err)
	}
	at, _ := e.Svc.ExecuteRun(ctx, p.ID, r.ID)
	if at.Outcome != automation.OutcomeRetry || at.Run.NextAttemptAt == nil {
		t.Fatalf("first attempt = %v; want the run paused by its WAIT", at.Outcome)
	}
	if err := first.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := col.named("run"); len(got) != 0 {
		t.Fatalf("a run span was exported before the run ended: %d", len(got))
	}

	// Another process takes the run up after the WAIT: nothing of the
	// first one's tracer is left but what the run record keeps.
	second := newTracer(t, col)
	e2 := flowtest.New(t, flowtest.Options{Tracer: second.Port(), Clock: clock.now, Dir: e.Dir})
	clock.set(*at.Run.NextAttemptAt)
	at, err = e2.Svc.ExecuteRun(ctx, p.ID, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("resumed attempt = %s, %v", at.Run.Status, err)
	}
	if err := second.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	run := col.one(t, "run")
	if hex.EncodeToString(run.TraceId) != callerTrace || hex.EncodeToString(run.ParentSpanId) != callerSpan {
		t.Errorf("run span %x under %x, want the caller's trace %s under %s", run.TraceId, run.ParentSpanId, callerTrace, callerSpan)
	}
	wantAttr(t, run, "flow.run.attempts", "2")
	for _, name := range []string{"step before", "step later", "step after"} {
		st := col.one(t, name)
		if !bytes.Equal(st.TraceId, run.TraceId) || !bytes.Equal(st.ParentSpanId, run.SpanId) {
			t.Errorf("%s: trace %x parent %x, want a child of the run span %x", name, st.TraceId, st.ParentSpanId, run.SpanId)
		}
	}
	wantAttr(t, col.one(t, "step after"), "flow.run.attempt", "2")
	if gets := col.named("GET"); len(gets) != 2 {
		t.Errorf("%d request spans, want 2", len(gets))
	}
	down.mu.Lock()
	tps := down.tps
	down.mu.Unlock()
	if len(tps) != 2 {
		t.Fatalf("downstream got %d requests, want 2", len(tps))
	}
	for i, tp := range tps {
		if !strings.HasPrefix(tp, "00-"+callerTrace+"-") {
			t.Errorf("request %d carried traceparent %q, want the caller's trace", i+1, tp)
		}
	}
}

// TestOffWithoutEndpoint: without an OTLP endpoint (or with the SDK
// disabled) there is no tracer, and the Service is given none.
func TestOffWithoutEndpoint(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		vars map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
	} {
		if got := tracing.Enabled(env(c.vars)); got != c.want {
			t.Errorf("Enabled(%v) = %v, want %v", c.vars, got, c.want)
		}
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	tr, err := tracing.FromEnv(context.Background(), "flowd", nil)
	if err != nil || tr != nil || tr.Port() != nil {
		t.Fatalf("FromEnv without an endpoint = %v, %v; want none", tr, err)
	}
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestJoin: a traceparent that is not valid W3C Trace Context is not kept
// (the run starts a trace of its own); a valid one is kept with its
// tracestate.
func TestJoin(t *testing.T) {
	tr := tracing.New()
	defer tr.Shutdown(context.Background())
	for _, bad := range []string{"", "garbage", "00-" + strings.Repeat("0", 32) + "-" + callerSpan + "-01",
		"00-" + callerTrace + "-" + strings.Repeat("0", 16) + "-01", "00-" + callerTrace + "-" + callerSpan} {
		if got := tr.Join(bad, ""); got != nil {
			t.Errorf("Join(%q) = %+v, want nil", bad, got)
		}
	}
	if got := tr.Join(callerTP, "vendor=a1"); got == nil || got.Parent != callerTP || got.State != "vendor=a1" {
		t.Errorf("Join = %+v", got)
	}
}

// TestCollectorDownBlocksNoRun: with a collector that never answers and a
// span queue of 4 (OTEL_BSP_MAX_QUEUE_SIZE), a run of 20 steps finishes as
// it would untraced: spans past the queue are dropped, never waited for.
func TestCollectorDownBlocksNoRun(t *testing.T) {
	hang := make(chan struct{})
	var exports atomic.Int32
	col := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		exports.Add(1)
		<-hang
	}))
	t.Cleanup(col.Close)
	t.Cleanup(func() { close(hang) })
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.URL)
	t.Setenv("OTEL_BSP_MAX_QUEUE_SIZE", "4")
	t.Setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2")
	tr, err := tracing.FromEnv(context.Background(), "flowd", nil)
	if err != nil || tr == nil {
		t.Fatalf("FromEnv = %v, %v", tr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
	})
	e := flowtest.New(t, flowtest.Options{Tracer: tr.Port()})
	p, _ := e.Project(t, "down", automation.PlanEnterprise)
	var steps []automation.Step
	for i := range 20 {
		steps = append(steps, automation.Step{Name: "s" + strconv.Itoa(i), Type: automation.StepSet, Values: json.RawMessage(`{"i":1}`)})
	}
	f := e.ActiveFlow(t, p, "many", steps...)
	r := e.StartRef(t, f)
	at, err := e.Svc.ExecuteRun(context.Background(), p.ID, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("run = %s, %v", at.Run.Status, err)
	}
	// The exporter did try (so the run finished while an export hung).
	testwait.Event(t, "an export to the hanging collector", func() bool { return exports.Load() > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := tr.Flush(ctx); err == nil {
		t.Errorf("Flush to a collector that never answers succeeded")
	}
}

// runSpan returns the exported span of run id.
func (c *collector) runSpan(t *testing.T, id string) *tracepb.Span {
	t.Helper()
	for _, s := range c.named("run") {
		if v := attr(s, "flow.run.id"); v != nil && v.GetStringValue() == id {
			return s
		}
	}
	t.Fatalf("no run span for %s (all: %v)", id, c.names())
	return nil
}

// childOf reports whether s is a child of parent, in its trace.
func childOf(s, parent *tracepb.Span) bool {
	return bytes.Equal(s.TraceId, parent.TraceId) && bytes.Equal(s.ParentSpanId, parent.SpanId)
}

// TestCallFlowChildUnderCallingStep: the run a CALL_FLOW step starts, with
// and without waiting for it, is a child of the calling step's span, in
// the caller's trace, and the child's steps are children of its run span;
// the trace context travels with the child run (stored), not in memory.
func TestCallFlowChildUnderCallingStep(t *testing.T) {
	col := newCollector(t)
	tr := newTracer(t, col)
	e := flowtest.New(t, flowtest.Options{Tracer: tr.Port()})
	ctx := context.Background()
	p, _ := e.Project(t, "calls", automation.PlanEnterprise)
	child := e.ActiveFlow(t, p, "child", automation.Step{Name: "inner", Type: automation.StepSet, Values: json.RawMessage(`{"a": 1}`)})
	no := false
	parent := e.ActiveFlow(t, p, "parent",
		automation.Step{Name: "fire", Type: automation.StepCallFlow, FlowID: child.ID, Wait: &no},
		automation.Step{Name: "await", Type: automation.StepCallFlow, FlowID: child.ID})
	r, err := e.Svc.StartRun(ctx, parent, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{}`),
		Headers: map[string]string{"traceparent": callerTP}})
	if err != nil {
		t.Fatal(err)
	}
	at, _ := e.Svc.ExecuteRun(ctx, p.ID, r.ID)
	if at.Outcome != automation.OutcomeRetry {
		t.Fatalf("first attempt = %v, want the caller parked by its waiting call", at.Outcome)
	}
	fired, awaited := automation.CallRunID(r.ID, "fire", child.ID), automation.CallRunID(r.ID, "await", child.ID)
	for _, id := range []string{fired, awaited} {
		kid, err := e.Store.Run(ctx, p.ID, child.ID, id) // as stored: API answers omit the trace
		if err != nil {
			t.Fatalf("child %s: %v", id, err)
		}
		if kid.Trace == nil || !strings.HasPrefix(kid.Trace.Parent, "00-"+callerTrace+"-") {
			t.Errorf("child %s keeps trace %+v, want the caller's trace", id, kid.Trace)
		}
		if at, err := e.Svc.ExecuteRun(ctx, p.ID, id); err != nil || at.Run.Status != automation.RunSucceeded {
			t.Fatalf("child %s = %s %v", id, at.Run.Status, err)
		}
	}
	if at, err := e.Svc.ExecuteRun(ctx, p.ID, r.ID); err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("caller resumed = %s %v", at.Run.Status, err)
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	caller := col.runSpan(t, r.ID)
	fire := col.one(t, "step fire")
	var firstAwait *tracepb.Span
	for _, s := range col.named("step await") {
		if v := attr(s, "flow.run.attempt"); v != nil && v.GetIntValue() == 1 {
			firstAwait = s
		}
	}
	if firstAwait == nil || !childOf(fire, caller) || !childOf(firstAwait, caller) {
		t.Fatalf("the calling steps' spans are not the caller run's children: %v", col.names())
	}
	for _, c := range []struct {
		id   string
		step *tracepb.Span
	}{{fired, fire}, {awaited, firstAwait}} {
		run := col.runSpan(t, c.id)
		if !childOf(run, c.step) {
			t.Errorf("child run %s: span under %x in trace %x, want under the step %q (%x) in the caller's trace %s",
				c.id, run.ParentSpanId, run.TraceId, c.step.Name, c.step.SpanId, callerTrace)
		}
	}
	inner := col.named("step inner")
	if len(inner) != 2 {
		t.Fatalf("%d spans of the child's step, want 2", len(inner))
	}
	for _, s := range inner {
		if !childOf(s, col.runSpan(t, fired)) && !childOf(s, col.runSpan(t, awaited)) {
			t.Errorf("child step span under %x, want under a child run's span", s.ParentSpanId)
		}
	}
}

// TestTokenSQLAndMailSpans: an OAuth2 refresh made for an HTTP step, a SQL
// statement and an SMTP send are each a client span under their step's
// span; the token request carries the trace on; what is recorded of them
// is the server's host (and port, and system), and no credential, no
// token, no parameter's value, no recipient appears in anything exported.
func TestTokenSQLAndMailSpans(t *testing.T) {
	pgPort := dbtest.StartPostgres(t)
	mail := smtptest.Start(t, true)
	idp := oauthtest.Start(oauthtest.Options{RedirectBase: "http://127.0.0.1:9", AccessTokenExp: time.Second})
	t.Cleanup(idp.Close)
	col := newCollector(t)
	tr := newTracer(t, col)
	e := flowtest.New(t, flowtest.Options{Tracer: tr.Port(), RootCAs: mail.Pool})
	ctx := context.Background()
	p, _ := e.Project(t, "outbound", automation.PlanEnterprise)

	// An OAuth2 connection whose access token lives a second: every use
	// refreshes it (the refresh margin is longer).
	if _, err := e.Svc.AddOAuthApp(ctx, automation.OAuthAppInput{Name: "idp", ClientID: oauthtest.ClientID,
		ClientSecret: oauthtest.ClientSecret, AuthorizeURL: idp.AuthorizeURL, TokenURL: idp.TokenURL, Scopes: []string{"read"}}); err != nil {
		t.Fatal(err)
	}
	const redirect = "http://127.0.0.1:9/ui/oauth/callback"
	start, err := e.Svc.StartOAuth(ctx, "idp", redirect)
	if err != nil {
		t.Fatal(err)
	}
	back, err := idp.Consent(start.URL)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := e.Svc.CompleteOAuth(ctx, p, automation.OAuthCompletion{App: "idp", RedirectURL: redirect,
		Code: back.Query().Get("code"), Verifier: start.Verifier})
	if err != nil {
		t.Fatal(err)
	}
	exchanges := idp.TokenRequests()

	const dbPass, param = "db-pass-5e1f9a7c", "param-value-8c2d4b6a"
	if _, err := e.Svc.CreateConnection(ctx, p, automation.ConnectionInput{Name: "db", App: "postgres", Type: automation.ConnectionPostgres,
		Value: json.RawMessage(fmt.Sprintf(`{"host": "127.0.0.1", "port": %d, "database": "postgres", "username": "postgres", "password": %q, "tls": "disable"}`, pgPort, dbPass))}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Svc.CreateConnection(ctx, p, automation.ConnectionInput{Name: "mail", App: "smtp", Type: automation.ConnectionSMTP,
		Value: json.RawMessage(fmt.Sprintf(`{"host": "127.0.0.1", "port": %d, "username": %q, "password": %q, "from": "flows@example.com"}`,
			mail.Port, smtptest.User, smtptest.Password))}); err != nil {
		t.Fatal(err)
	}
	const rcpt = "rcpt-3f7a@example.com"
	f := e.ActiveFlow(t, p, "outbound",
		automation.Step{Name: "me", Type: automation.StepHTTP, Method: "GET", URL: idp.ResourceURL, ConnectionID: oc.ID},
		automation.Step{Name: "q", Type: automation.StepSQL, Connection: "db", Query: automation.Query{SQL: "select upper($1) as v"},
			Params: json.RawMessage(`["{{ trigger.body.param }}"]`)},
		automation.Step{Name: "mail", Type: automation.StepEmail, Connection: "mail", To: []string{"{{ trigger.body.to }}"},
			Subject: "Hi", Text: "{{ steps.q.rows[0].v }}"})
	r, err := e.Svc.StartRun(ctx, f, automation.TriggerData{Method: "POST",
		Body: json.RawMessage(fmt.Sprintf(`{"param": %q, "to": %q}`, param, rcpt)), Headers: map[string]string{"traceparent": callerTP}})
	if err != nil {
		t.Fatal(err)
	}
	at, err := e.Svc.ExecuteRun(ctx, p.ID, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("run = %s %v: %s", at.Run.Status, err, at.Run.Error)
	}
	if msgs := mail.Messages(); len(msgs) != 1 || !strings.Contains(msgs[0].Data, strings.ToUpper(param)) {
		t.Fatalf("mail server got %d messages, want 1 with the statement's answer", len(msgs))
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	// The refresh: a POST to the token endpoint under "step me", before
	// the GET of the resource, and the endpoint saw its span as parent.
	me := col.one(t, "step me")
	var token *tracepb.Span
	for _, s := range col.named("POST") {
		if childOf(s, me) {
			token = s
		}
	}
	if token == nil {
		t.Fatalf("no POST span under the step that refreshed its token (all: %v)", col.names())
	}
	if token.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("token span kind = %v", token.Kind)
	}
	wantAttr(t, token, "server.address", "127.0.0.1")
	wantAttr(t, token, "http.response.status_code", "200")
	tps := idp.TokenTraceparents()
	if len(tps) <= exchanges {
		t.Fatalf("the token endpoint served %d requests, %d before the run: no refresh", len(tps), exchanges)
	}
	if want := "00-" + callerTrace + "-" + hex.EncodeToString(token.SpanId) + "-01"; tps[len(tps)-1] != want {
		t.Errorf("the refresh carried traceparent %q, want %q", tps[len(tps)-1], want)
	}

	for _, c := range []struct{ step, span, system, port string }{
		{"step q", "postgresql", "db.system.name", strconv.Itoa(pgPort)},
		{"step mail", "smtp", "network.protocol.name", strconv.Itoa(mail.Port)},
	} {
		st := col.one(t, c.step)
		sp := col.one(t, c.span)
		if !childOf(sp, st) || sp.Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("%s span: kind %v under %x, want a client span under %q (%x)", c.span, sp.Kind, sp.ParentSpanId, c.step, st.SpanId)
		}
		wantAttr(t, sp, c.system, c.span)
		wantAttr(t, sp, "server.address", "127.0.0.1")
		wantAttr(t, sp, "server.port", c.port)
		if sp.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("%s span status = %v", c.span, sp.Status)
		}
	}

	secrets := []string{oauthtest.ClientSecret, dbPass, smtptest.Password, param, strings.ToUpper(param), rcpt}
	secrets = append(secrets, idp.IssuedRefreshTokens()...)
	if leaked := col.leaks(secrets...); len(leaked) > 0 {
		t.Errorf("exported spans hold %q", leaked)
	}
}

// TestAIModelRequestSpan: an AI step's model request is a client span of
// the step, like an HTTP step's request, and sends traceparent; the
// connection's key is in no exported byte.
func TestAIModelRequestSpan(t *testing.T) {
	const key = "sk-trace-7f3a9c1e5b2d4680"
	var mu sync.Mutex
	var tps []string
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tps = append(tps, r.Header.Get("traceparent"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "c1", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "ok"}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 3, "completion_tokens": 1}})
	}))
	t.Cleanup(model.Close)
	col := newCollector(t)
	tr := newTracer(t, col)
	e := flowtest.New(t, flowtest.Options{Tracer: tr.Port()})
	ctx := context.Background()
	p, _ := e.Project(t, "ai", automation.PlanEnterprise)
	if _, err := e.Svc.CreateConnection(ctx, p, automation.ConnectionInput{Name: "openai", App: "openai", Type: automation.ConnectionOpenAI,
		Value: json.RawMessage(`{"apiKey": "` + key + `", "baseUrl": "` + model.URL + `/v1"}`)}); err != nil {
		t.Fatal(err)
	}
	f := e.ActiveFlow(t, p, "ask", automation.Step{Name: "triage", Type: automation.StepAI, Connection: "openai", Model: "m", Prompt: "hello"})
	r, err := e.Svc.StartRun(ctx, f, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{}`), Headers: map[string]string{"traceparent": callerTP}})
	if err != nil {
		t.Fatal(err)
	}
	if at, err := e.Svc.ExecuteRun(ctx, p.ID, r.ID); err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("run = %s %v: %s", at.Run.Status, err, at.Run.Error)
	}
	if err := tr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	step := col.one(t, "step triage")
	var req *tracepb.Span
	for _, s := range col.named("POST") {
		if childOf(s, step) {
			req = s
		}
	}
	if req == nil || req.Kind != tracepb.Span_SPAN_KIND_CLIENT {
		t.Fatalf("no client POST span under the AI step (all: %v)", col.names())
	}
	wantAttr(t, req, "http.response.status_code", "200")
	mu.Lock()
	defer mu.Unlock()
	if want := "00-" + callerTrace + "-" + hex.EncodeToString(req.SpanId) + "-01"; len(tps) != 1 || tps[0] != want {
		t.Errorf("the model got traceparent %q, want [%q]", tps, want)
	}
	if leaked := col.leaks(key); len(leaked) > 0 {
		t.Errorf("exported spans hold %q", leaked)
	}
}
