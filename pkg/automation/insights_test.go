package automation_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// TestFlowInsightsPeriods: runs finished at known times with known
// durations, read through the Service at a fixed clock: each period has
// its buckets (24 hours, 7 or 30 UTC days, the current one last), exact
// counts, failure rate and percentiles as the upper bounds of their
// duration bins; a run just outside a period is not in it.
func TestFlowInsightsPeriods(t *testing.T) {
	now := time.Date(2030, 1, 10, 12, 34, 56, 0, time.UTC)
	fe := flowtest.New(t, flowtest.Options{Clock: func() time.Time { return now }})
	ctx := context.Background()
	p, _ := fe.Project(t, "insights", automation.PlanTeam)
	f := fe.ActiveFlow(t, p, "counted")
	finish := func(at string, ms int64, status automation.RunStatus) {
		t.Helper()
		fin, err := time.Parse(time.RFC3339, at)
		if err != nil {
			t.Fatal(err)
		}
		began := fin.Add(-time.Duration(ms) * time.Millisecond)
		r := automation.Run{ID: automation.NewID(automation.PrefixRun), Project: p.ID, FlowID: f.ID, Status: status,
			Created: began, Started: &began, Finished: &fin, DurationMs: &ms, Steps: []automation.StepResult{},
			Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}}
		if err := fe.Store.InsertFinishedRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	finish("2029-12-11T23:59:00Z", 10, automation.RunSucceeded)      // before the 30 days
	finish("2029-12-12T00:00:00Z", 10, automation.RunFailed)         // the first of the 30 days
	finish("2030-01-03T23:59:00Z", 10, automation.RunSucceeded)      // before the 7 days
	finish("2030-01-04T00:00:00Z", 100_000, automation.RunSucceeded) // the first of the 7 days
	finish("2030-01-09T12:59:59Z", 70, automation.RunFailed)         // before the 24 hours
	finish("2030-01-09T13:00:00Z", 12, automation.RunSucceeded)      // the first of the 24 hours
	finish("2030-01-10T11:59:59Z", 5, automation.RunSucceeded)
	finish("2030-01-10T12:05:00Z", 40, automation.RunSucceeded)
	finish("2030-01-10T12:06:00Z", 40, automation.RunSucceeded)
	finish("2030-01-10T12:07:00Z", 800, automation.RunFailed)
	finish("2030-01-10T12:30:00Z", 4000, automation.RunTimeout)

	type bucket struct {
		i            int
		start        string
		runs, failed int64
		p95          int64 // 0: null
	}
	cases := []struct {
		period                    string
		buckets                   int
		runs, ok, failed, timeout int64
		rate                      float64
		p50, p95                  int64
		some                      []bucket
	}{
		{"", 24, 6, 4, 1, 1, 0.3333, 50, 5000, []bucket{
			{0, "2030-01-09T13:00:00.000Z", 1, 0, 15},
			{1, "2030-01-09T14:00:00.000Z", 0, 0, 0},
			{22, "2030-01-10T11:00:00.000Z", 1, 0, 10},
			{23, "2030-01-10T12:00:00.000Z", 4, 2, 5000},
		}},
		{"7d", 7, 8, 5, 2, 1, 0.375, 50, 100_000, []bucket{
			{0, "2030-01-04T00:00:00.000Z", 1, 0, 100_000},
			{4, "2030-01-08T00:00:00.000Z", 0, 0, 0},
			{5, "2030-01-09T00:00:00.000Z", 2, 1, 70},
			{6, "2030-01-10T00:00:00.000Z", 5, 2, 5000},
		}},
		{"30d", 30, 10, 6, 3, 1, 0.4, 50, 100_000, []bucket{
			{0, "2029-12-12T00:00:00.000Z", 1, 1, 10},
			{22, "2030-01-03T00:00:00.000Z", 1, 0, 10},
			{29, "2030-01-10T00:00:00.000Z", 5, 2, 5000},
		}},
	}
	for _, c := range cases {
		in, err := fe.Svc.FlowInsights(ctx, p, f.ID, c.period)
		if err != nil {
			t.Fatalf("period %q: %v", c.period, err)
		}
		if in.Runs != c.runs || in.Succeeded != c.ok || in.Failed != c.failed || in.Timeout != c.timeout || in.FailureRate != c.rate {
			t.Errorf("period %q: runs %d (%d/%d/%d), rate %v; want %d (%d/%d/%d), %v", c.period,
				in.Runs, in.Succeeded, in.Failed, in.Timeout, in.FailureRate, c.runs, c.ok, c.failed, c.timeout, c.rate)
		}
		if in.DurationMs.P50 == nil || *in.DurationMs.P50 != c.p50 || in.DurationMs.P95 == nil || *in.DurationMs.P95 != c.p95 {
			t.Errorf("period %q: durations %s, want p50 %d, p95 %d", c.period, jsonText(t, in.DurationMs), c.p50, c.p95)
		}
		if len(in.Buckets) != c.buckets {
			t.Fatalf("period %q: %d buckets, want %d", c.period, len(in.Buckets), c.buckets)
		}
		var sum int64
		for _, b := range in.Buckets {
			sum += b.Runs
		}
		if sum != c.runs {
			t.Errorf("period %q: the buckets hold %d runs, the period %d", c.period, sum, c.runs)
		}
		for _, w := range c.some {
			b := in.Buckets[w.i]
			var p95 int64
			if b.P95Ms != nil {
				p95 = *b.P95Ms
			}
			got := jsonText(t, b)
			if !strings.Contains(got, `"start":"`+w.start+`"`) || b.Runs != w.runs || b.Failed != w.failed || p95 != w.p95 {
				t.Errorf("period %q bucket %d = %s, want start %s, %d runs, %d failed, p95 %d", c.period, w.i, got, w.start, w.runs, w.failed, w.p95)
			}
			if (b.Runs == 0) != (b.P95Ms == nil) {
				t.Errorf("period %q bucket %d: p95Ms %v for %d runs: null exactly when empty", c.period, w.i, b.P95Ms, b.Runs)
			}
		}
	}

	// A flow without runs: zeros and null percentiles, never a division.
	quiet := fe.ActiveFlow(t, p, "quiet")
	in, err := fe.Svc.FlowInsights(ctx, p, quiet.ID, "24h")
	if err != nil || in.Runs != 0 || in.FailureRate != 0 || in.DurationMs.P50 != nil || len(in.Buckets) != 24 {
		t.Errorf("a flow without runs: %s, %v", jsonText(t, in), err)
	}

	// The project overview: each flow's, and all of them merged (counts
	// and duration bins alike), in the same buckets.
	busy := fe.ActiveFlow(t, p, "busy")
	f = busy
	finish("2030-01-10T12:10:00Z", 9000, automation.RunFailed) // bin ≤ 10 s
	ov, err := fe.Svc.ProjectInsights(ctx, p, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ov.Flows) != 3 || ov.More || ov.Flows[0].Flow.Name != "counted" || ov.Flows[0].Insights.Runs != 6 ||
		ov.Flows[1].Insights.Runs != 0 || ov.Flows[2].Insights.Runs != 1 {
		t.Fatalf("overview: %s", jsonText(t, ov))
	}
	if tot := ov.Total; tot.Runs != 7 || tot.Failed != 2 || tot.Timeout != 1 || *tot.DurationMs.P95 != 10_000 ||
		*tot.DurationMs.P50 != 50 || tot.Buckets[23].Runs != 5 || *tot.Buckets[23].P95Ms != 10_000 || tot.Buckets[0].Runs != 1 {
		t.Errorf("overview total: %s", jsonText(t, tot))
	}
	counted := ov.Flows[0].Flow.ID

	_, err = fe.Svc.FlowInsights(ctx, p, counted, "1h")
	if e, ok := err.(*automation.Error); !ok || e.Code != "INVALID_PARAMETER" || !strings.Contains(e.Message, "period") ||
		!strings.Contains(e.Message, `"1h"`) {
		t.Errorf("period 1h: %v, want INVALID_PARAMETER naming period and the value", err)
	}
	other, _ := fe.Project(t, "other", automation.PlanTeam)
	_, err = fe.Svc.FlowInsights(ctx, other, f.ID, "")
	if e, ok := err.(*automation.Error); !ok || e.Code != "FLOW_NOT_FOUND" {
		t.Errorf("another project's flow: %v, want FLOW_NOT_FOUND", err)
	}
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
