package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestFlowInsights: GET .../insights answers the counters of runs finished
// at known times (the service's clock fixed), in the document's shape
// (the validating client checks every answer against openapi.json): 24
// hourly buckets by default, 7 daily for 7d; a bad period is 400
// INVALID_PARAMETER naming it, another project's flow 404.
func TestFlowInsights(t *testing.T) {
	now := time.Date(2030, 5, 20, 9, 30, 0, 0, time.UTC)
	srv, key := newTestServerClock(t, func() time.Time { return now })
	f := createFlow(t, srv, key, flowBuilderBody)
	p := projectOfKey(t, srv, key)
	for _, c := range []struct {
		at     time.Duration // before now
		ms     int64
		status automation.RunStatus
	}{
		{time.Minute, 120, automation.RunSucceeded},     // bin ≤ 150
		{2 * time.Minute, 120, automation.RunSucceeded}, // bin ≤ 150
		{3 * time.Minute, 2500, automation.RunFailed},   // bin ≤ 3000
		{5 * time.Hour, 60, automation.RunSucceeded},    // 04:xx, bin ≤ 70
		{30 * time.Hour, 60, automation.RunTimeout},     // yesterday, outside 24h
	} {
		fin := now.Add(-c.at)
		began := fin.Add(-time.Duration(c.ms) * time.Millisecond)
		ms := c.ms
		r := automation.Run{ID: automation.NewID(automation.PrefixRun), Project: p.ID, FlowID: f.ID, Status: c.status,
			Created: began, Started: &began, Finished: &fin, DurationMs: &ms, Steps: []automation.StepResult{},
			Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}}
		if err := srv.runs.store.InsertFinishedRun(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	type bucket struct {
		Start  string `json:"start"`
		Runs   int64  `json:"runs"`
		Failed int64  `json:"failed"`
		P95Ms  *int64 `json:"p95Ms"`
	}
	var in struct {
		Runs, Succeeded, Failed, Timeout int64
		FailureRate                      float64
		DurationMs                       struct{ P50, P95 *int64 }
		Buckets                          []bucket
	}
	call(t, srv, "GET", "/api/v1/flows/"+f.ID+"/insights", key, "").into(t, http.StatusOK, &in)
	if in.Runs != 4 || in.Succeeded != 3 || in.Failed != 1 || in.Timeout != 0 || in.FailureRate != 0.25 {
		t.Errorf("24h: %+v, want 4 runs (3 succeeded, 1 failed), failure rate 0.25", in)
	}
	if in.DurationMs.P50 == nil || *in.DurationMs.P50 != 150 || in.DurationMs.P95 == nil || *in.DurationMs.P95 != 3000 {
		t.Errorf("24h durations %+v, want p50 150, p95 3000", in.DurationMs)
	}
	if len(in.Buckets) != 24 || in.Buckets[0].Start != "2030-05-19T10:00:00.000Z" || in.Buckets[23].Start != "2030-05-20T09:00:00.000Z" {
		t.Fatalf("24h buckets: %d, from %+v", len(in.Buckets), in.Buckets[0])
	}
	if b := in.Buckets[23]; b.Runs != 3 || b.Failed != 1 || b.P95Ms == nil || *b.P95Ms != 3000 {
		t.Errorf("the current hour: %+v", b)
	}
	if b := in.Buckets[18]; b.Start != "2030-05-20T04:00:00.000Z" || b.Runs != 1 || b.P95Ms == nil || *b.P95Ms != 70 {
		t.Errorf("04:00: %+v", b)
	}
	if b := in.Buckets[0]; b.Runs != 0 || b.P95Ms != nil {
		t.Errorf("an hour without runs: %+v", b)
	}

	call(t, srv, "GET", "/api/v1/flows/"+f.ID+"/insights?period=7d", key, "").into(t, http.StatusOK, &in)
	if in.Runs != 5 || in.Timeout != 1 || in.FailureRate != 0.4 || len(in.Buckets) != 7 ||
		in.Buckets[6].Start != "2030-05-20T00:00:00.000Z" || in.Buckets[6].Runs != 4 || in.Buckets[5].Runs != 1 || in.Buckets[5].Failed != 1 {
		t.Errorf("7d: %+v", in)
	}

	for _, bad := range []string{"1h", "24H", "7d%20", "%00"} {
		e := call(t, srv, "GET", "/api/v1/flows/"+f.ID+"/insights?period="+bad, key, "").wantError(t, http.StatusBadRequest, "INVALID_PARAMETER")
		if !strings.Contains(e.Message, "period") || !strings.Contains(e.Message, "24h, 7d, 30d") {
			t.Errorf("period %s: %q does not name the parameter and its values", bad, e.Message)
		}
	}
	other := newProjectKey(t, srv, automation.PlanTeam)
	call(t, srv, "GET", "/api/v1/flows/"+f.ID+"/insights", other, "").wantError(t, http.StatusNotFound, "FLOW_NOT_FOUND")
	call(t, srv, "GET", "/api/v1/flows/flw_nosuchflow/insights", key, "").wantError(t, http.StatusNotFound, "FLOW_NOT_FOUND")
}
