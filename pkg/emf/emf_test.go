package emf

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

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
		if cwm["Namespace"] != Namespace {
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
	m := New(&out, "prod")
	runs := Runs(fakeRuns{}, m)
	d := int64(1500)
	if err := runs.FinishRun(context.Background(), automation.Run{Status: automation.RunFailed, DurationMs: &d,
		Steps: []automation.StepResult{{Type: "HTTP", DurationMs: 700}, {Type: "HTTP", DurationMs: 300}, {Type: "SET", DurationMs: 1}}}); err != nil {
		t.Fatal(err)
	}
	for _, status := range []int{200, 202, 401, 413, 503} {
		h := Webhooks(m, "webhook", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
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
