// Package emf writes the AWS functions' metrics in CloudWatch embedded
// metric format (EMF): one JSON line per data point on the function's
// output, which CloudWatch Logs turns into metrics without an API call or a
// grant. Like pkg/metrics on flowd, the figures come from decorators around
// the parts that see them (a RunStore, an HTTP middleware), so the domain
// knows nothing of monitoring. docs/aws.md lists the metrics and alarms.
package emf

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"flowservice/pkg/automation"
)

// Namespace is where the functions' metrics appear in CloudWatch; every
// metric carries the Stage dimension.
const Namespace = "FlowService"

// Writer writes metrics of one stage as EMF lines. It is safe for
// concurrent use: each line is written whole.
type Writer struct {
	mu    sync.Mutex
	out   io.Writer
	stage string
	now   func() time.Time
}

// New returns a Writer of the stage's metrics on out (the function's log
// output).
func New(out io.Writer, stage string) *Writer {
	return &Writer{out: out, stage: stage, now: time.Now}
}

// Put records value (a number, or a list of numbers for several samples)
// of the metric name under the given dimensions, Stage included.
func (m *Writer) Put(name, unit string, value any, dims map[string]string) {
	keys := []string{"Stage"}
	line := map[string]any{"Stage": m.stage, name: value}
	for k, v := range dims {
		keys = append(keys, k)
		line[k] = v
	}
	line["_aws"] = map[string]any{
		"Timestamp": m.now().UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  Namespace,
			"Dimensions": [][]string{keys},
			"Metrics":    []any{map[string]string{"Name": name, "Unit": unit}},
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = m.out.Write(append(b, '\n'))
}

// Runs returns store with metrics on every run that ends: how many by
// final status (RunsFinished; the FAILED ones raise an alarm), how long the
// run took (RunDuration) and each of its steps (StepDuration, by type).
func Runs(store automation.RunStore, m *Writer) automation.RunStore {
	return runMetrics{RunStore: store, m: m}
}

type runMetrics struct {
	automation.RunStore
	m *Writer
}

func (s runMetrics) FinishRun(ctx context.Context, r automation.Run) error {
	if err := s.RunStore.FinishRun(ctx, r); err != nil {
		return err
	}
	s.m.Put("RunsFinished", "Count", 1, map[string]string{"Status": string(r.Status)})
	if r.DurationMs != nil {
		s.m.Put("RunDuration", "Milliseconds", *r.DurationMs, nil)
	}
	byType := map[string][]int64{}
	for _, st := range r.Steps {
		byType[string(st.Type)] = append(byType[string(st.Type)], st.DurationMs)
	}
	for typ, ds := range byType {
		s.m.Put("StepDuration", "Milliseconds", ds, map[string]string{"StepType": typ})
	}
	return nil
}

// Webhooks counts a receiver's requests by outcome, from the status it
// answered: accepted (2xx), refused (4xx, the sender's fault) or failed
// (5xx, ours).
func Webhooks(m *Writer, function string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		m.Put("Webhooks", "Count", 1, map[string]string{"Function": function, "Outcome": outcome(sw.status)})
	})
}

func outcome(status int) string {
	switch {
	case status >= 500:
		return "failed"
	case status >= 400:
		return "refused"
	}
	return "accepted"
}

// statusWriter remembers the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
