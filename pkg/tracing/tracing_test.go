package tracing_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/httpapi"
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
