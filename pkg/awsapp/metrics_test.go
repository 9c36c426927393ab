package awsapp

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"flowservice/pkg/automation"
)

// emfLines decodes the EMF lines of out by metric name.
func emfLines(t *testing.T, out *bytes.Buffer) map[string][]map[string]any {
	t.Helper()
	byName := map[string][]map[string]any{}
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("not JSON: %s", l)
		}
		aws, ok := m["_aws"].(map[string]any)
		if !ok {
			continue // a log line
		}
		cwm := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
		if cwm["Namespace"] != MetricsNamespace {
			t.Errorf("namespace %v", cwm["Namespace"])
		}
		dims := cwm["Dimensions"].([]any)[0].([]any)
		for _, d := range dims {
			if _, ok := m[d.(string)]; !ok {
				t.Errorf("dimension %s has no value in %s", d, l)
			}
		}
		name := cwm["Metrics"].([]any)[0].(map[string]any)["Name"].(string)
		if _, ok := m[name]; !ok {
			t.Errorf("metric %s has no value in %s", name, l)
		}
		byName[name] = append(byName[name], m)
	}
	return byName
}

// fakeRuns is a RunStore whose FinishRun succeeds.
type fakeRuns struct{ automation.RunStore }

func (fakeRuns) FinishRun(context.Context, automation.Run) error { return nil }

// TestMetrics: runs ending by status with durations, webhooks by outcome.
func TestMetrics(t *testing.T) {
	var out bytes.Buffer
	m := newMetrics(&out, "prod")
	runs := runMetrics{RunStore: fakeRuns{}, m: m}
	d := int64(1500)
	if err := runs.FinishRun(context.Background(), automation.Run{Status: automation.RunFailed, DurationMs: &d,
		Steps: []automation.StepResult{{Type: "HTTP", DurationMs: 700}, {Type: "HTTP", DurationMs: 300}, {Type: "SET", DurationMs: 1}}}); err != nil {
		t.Fatal(err)
	}
	for _, status := range []int{200, 202, 401, 413, 503} {
		h := webhookMetrics(m, "webhook", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
		h.ServeHTTP(discardWriter{}, &http.Request{})
	}
	got := emfLines(t, &out)
	if f := got["RunsFinished"]; len(f) != 1 || f[0]["Status"] != "FAILED" || f[0]["Stage"] != "prod" || f[0]["RunsFinished"] != 1.0 {
		t.Errorf("RunsFinished = %v", f)
	}
	if f := got["RunDuration"]; len(f) != 1 || f[0]["RunDuration"] != 1500.0 {
		t.Errorf("RunDuration = %v", f)
	}
	var http_ []any
	for _, l := range got["StepDuration"] {
		if l["StepType"] == "HTTP" {
			http_ = l["StepDuration"].([]any)
		}
	}
	if !slices.Equal(http_, []any{700.0, 300.0}) || len(got["StepDuration"]) != 2 {
		t.Errorf("StepDuration = %v", got["StepDuration"])
	}
	outcomes := map[string]int{}
	for _, l := range got["Webhooks"] {
		outcomes[l["Outcome"].(string)]++
	}
	if outcomes["accepted"] != 2 || outcomes["refused"] != 2 || outcomes["failed"] != 1 {
		t.Errorf("webhook outcomes = %v", outcomes)
	}
}

type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}

// TestInvocationLogs: each log line of an invocation names the Lambda
// request, the X-Ray trace, API Gateway's request and whether it was the
// cold start, which is counted once.
func TestInvocationLogs(t *testing.T) {
	var out bytes.Buffer
	cfg := Config{Stage: "prod", LogOutput: &out}
	a := &App{Log: newLogger(cfg), metrics: newMetrics(&out, "prod")}
	a.metrics.now = func() time.Time { return time.Unix(1700000000, 0) }
	h := a.Proxy("api", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.Log.InfoContext(r.Context(), "served")
		w.WriteHeader(204)
	}))
	for _, id := range []string{"lambda-1", "lambda-2"} {
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: id})
		//lint:ignore SA1029 the Lambda runtime's own key
		ctx = context.WithValue(ctx, "x-amzn-trace-id", "Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Parent=9a9197af755a6419;Sampled=1")
		if _, err := h(ctx, events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: "/x",
			RequestContext: events.APIGatewayProxyRequestContext{RequestID: "apigw-" + id}}); err != nil {
			t.Fatal(err)
		}
	}
	var logs []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var m map[string]any
		_ = json.Unmarshal(l, &m)
		if m["msg"] == "served" {
			logs = append(logs, m)
		}
	}
	if len(logs) != 2 {
		t.Fatalf("log lines %v", logs)
	}
	for i, want := range []struct {
		id   string
		cold bool
	}{{"lambda-1", true}, {"lambda-2", false}} {
		l := logs[i]
		if l["awsRequestId"] != want.id || l["apiRequestId"] != "apigw-"+want.id || l["coldStart"] != want.cold ||
			l["traceId"] != "1-5bef4de7-ad49b0e87f6ef6c87fc2e700" {
			t.Errorf("log line %d = %v", i, l)
		}
	}
	if c := emfLines(t, &out)["ColdStarts"]; len(c) != 1 || c[0]["Function"] != "api" {
		t.Errorf("ColdStarts = %v, want one for api", c)
	}
}

func TestMemoryLimit(t *testing.T) {
	if got := memoryLimit(env(map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"})); got != 512<<20*9/10 {
		t.Errorf("limit for 512 MB = %d", got)
	}
	if got := memoryLimit(env(nil)); got != 0 {
		t.Errorf("no size: limit %d", got)
	}
}
