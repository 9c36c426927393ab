package emf

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"flowservice/pkg/automation"
)

// point is one EMF line as CloudWatch reads it: the metric, its unit and
// value, and its dimensions with their values.
type point struct {
	Name, Unit string
	Value      any
	Dims       string // "k=v,k=v", sorted
}

// points decodes the EMF lines of out, checking the envelope of each.
func points(t *testing.T, out *bytes.Buffer) []point {
	t.Helper()
	var ps []point
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var line struct {
			AWS struct {
				Timestamp         int64
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name, Unit string }
				}
			} `json:"_aws"`
		}
		var fields map[string]any
		if err := json.Unmarshal(l, &line); err != nil || json.Unmarshal(l, &fields) != nil {
			t.Fatalf("not JSON: %s", l)
		}
		cwm := line.AWS.CloudWatchMetrics
		if len(cwm) != 1 || cwm[0].Namespace != Namespace || len(cwm[0].Dimensions) != 1 || len(cwm[0].Metrics) != 1 || line.AWS.Timestamp == 0 {
			t.Fatalf("not one metric of %s with one dimension set and a timestamp: %s", Namespace, l)
		}
		var dims []string
		for _, d := range cwm[0].Dimensions[0] {
			v, ok := fields[d].(string)
			if !ok {
				t.Errorf("dimension %s has no value in %s", d, l)
			}
			dims = append(dims, d+"="+v)
		}
		slices.Sort(dims)
		m := cwm[0].Metrics[0]
		ps = append(ps, point{Name: m.Name, Unit: m.Unit, Value: fields[m.Name], Dims: strings.Join(dims, ",")})
	}
	slices.SortFunc(ps, func(a, b point) int {
		return strings.Compare(a.Name+a.Dims+fmt.Sprint(a.Value), b.Name+b.Dims+fmt.Sprint(b.Value))
	})
	return ps
}

// fakeRuns is a RunStore whose FinishRun succeeds.
type fakeRuns struct{ automation.RunStore }

func (fakeRuns) FinishRun(context.Context, automation.Run) error { return nil }

// TestMetrics: a run that ends gives its status, its duration and its
// steps' durations by type; a receiver's answers count by outcome; every
// point carries the stage.
func TestMetrics(t *testing.T) {
	var out bytes.Buffer
	m := New(&out, "prod")
	m.now = func() time.Time { return time.Unix(1700000000, 0) }
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
	hook := func(outcome string) point {
		return point{"Webhooks", "Count", 1.0, "Function=webhook,Outcome=" + outcome + ",Stage=prod"}
	}
	want := []point{
		{"RunDuration", "Milliseconds", 1500.0, "Stage=prod"},
		{"RunsFinished", "Count", 1.0, "Stage=prod,Status=FAILED"},
		{"StepDuration", "Milliseconds", []any{700.0, 300.0}, "Stage=prod,StepType=HTTP"},
		{"StepDuration", "Milliseconds", []any{1.0}, "Stage=prod,StepType=SET"},
		hook("accepted"), hook("accepted"), hook("failed"), hook("refused"), hook("refused"),
	}
	if diff := cmp.Diff(want, points(t, &out)); diff != "" {
		t.Errorf("metrics mismatch (-want +got):\n%s", diff)
	}
}

type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}
