package automation

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestJSONTimestampsCarryMilliseconds(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 17, 490_000_000, time.UTC)
	whole := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		name string
		v    any
		want []string
	}{
		{"flow never ran", Flow{ID: "flw_1", Created: at, Updated: whole},
			[]string{`"created":"2026-01-02T03:04:17.490Z"`, `"updated":"2026-01-02T02:04:05.000Z"`, `"successRate":null`, `"lastRun":null`, `"runCount":0`}},
		{"flow with runs", Flow{ID: "flw_1", RunCount: 3, SuccessRate: 66.7, LastRun: &whole},
			[]string{`"successRate":66.7`, `"lastRun":"2026-01-02T02:04:05.000Z"`}},
		{"all failed is 0", FlowSummary{RunCount: 2, SuccessRate: 0}, []string{`"successRate":0`}},
		{"summary never ran", FlowSummary{ID: "flw_1", Created: at}, []string{`"successRate":null`, `"created":"2026-01-02T03:04:17.490Z"`}},
		{"run", Run{ID: "run_1", Created: whole, Started: &at, Steps: []StepResult{{Name: "a", StartedAt: &whole}}},
			[]string{`"created":"2026-01-02T02:04:05.000Z"`, `"started":"2026-01-02T03:04:17.490Z"`, `"finished":null`, `"startedAt":"2026-01-02T02:04:05.000Z"`}},
		{"connection", Connection{ID: "con_1", Created: whole, Updated: at}, []string{`"created":"2026-01-02T02:04:05.000Z"`, `"updated":"2026-01-02T03:04:17.490Z"`}},
		{"key", APIKey{ID: "k", Created: whole}, []string{`"created":"2026-01-02T02:04:05.000Z"`}},
		{"sample", WebhookSample{CapturedAt: whole, ExpiresAt: &at}, []string{`"capturedAt":"2026-01-02T02:04:05.000Z"`, `"expiresAt":"2026-01-02T03:04:17.490Z"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.v)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(b), w) {
					t.Errorf("json = %s, want it to contain %s", b, w)
				}
			}
			if strings.Count(string(b), `"created"`) > 1 {
				t.Errorf("json = %s: a field is written twice", b)
			}
		})
	}
}

// A stored record read back is the record written: the stores keep runs
// and flows as this JSON.
func TestJSONTimestampsRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 17, 490_000_000, time.UTC)
	in := Run{ID: "run_1", Created: at, Started: &at, Steps: []StepResult{{Name: "a", FinishedAt: &at}}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out Run
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Created.Equal(at) || !out.Started.Equal(at) || !out.Steps[0].FinishedAt.Equal(at) {
		t.Errorf("round trip of %s = %+v", b, out)
	}
}
