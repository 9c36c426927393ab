package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestInsightsThroughFlowd: webhooks sent to a real flowd, some signed
// right (the run succeeds) and some wrong (VERIFY_SIGNATURE fails it), are
// what GET .../insights counts once their runs are final: the finish's own
// write keeps the counters, so nothing lags the run.
func TestInsightsThroughFlowd(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "signed", "engine": "FLOW_BUILDER", "steps": [
		{"name": "check", "type": "VERIFY_SIGNATURE", "signature": {"header": "X-Sig", "prefix": "sha256=", "secret": "s3cret"}},
		{"name": "shape", "type": "SET", "values": {"n": "{{ trigger.body.n }}"}}]}`, 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)

	send := func(body, sig, want string) {
		t.Helper()
		h := http.Header{"X-Sig": {"sha256=" + sig}}
		if _, r := postHook(t, p, key, flow.ID, "/api/v1/webhooks/"+flow.ID, body, h); r.Status != want {
			t.Fatalf("webhook %s: run %s (%s), want %s", body, r.Status, r.Error, want)
		}
	}
	for _, body := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
		send(body, hmacHex("s3cret", body), "SUCCEEDED")
	}
	send(`{"n":4}`, hmacHex("wrong", `{"n":4}`), "FAILED")
	send(`{"n":5}`, "00", "FAILED")

	type insights struct {
		Runs, Succeeded, Failed, Timeout int64
		FailureRate                      float64
		DurationMs                       struct{ P50, P95 *int64 }
		Buckets                          []struct {
			Start        string
			Runs, Failed int64
			P95Ms        *int64
		}
	}
	for _, c := range []struct {
		query   string
		buckets int
	}{{"", 24}, {"?period=7d", 7}, {"?period=30d", 30}} {
		var in insights
		api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/insights"+c.query, "", 200, &in)
		if in.Runs != 5 || in.Succeeded != 3 || in.Failed != 2 || in.Timeout != 0 || in.FailureRate != 0.4 ||
			in.DurationMs.P50 == nil || in.DurationMs.P95 == nil || *in.DurationMs.P95 < *in.DurationMs.P50 {
			t.Errorf("insights%s: %+v, want 5 runs, 3 succeeded, 2 failed, rate 0.4, p50 ≤ p95", c.query, in)
		}
		var runs, failed int64
		for _, b := range in.Buckets {
			runs, failed = runs+b.Runs, failed+b.Failed
		}
		if len(in.Buckets) != c.buckets || runs != 5 || failed != 2 || !strings.HasSuffix(in.Buckets[0].Start, ":00:00.000Z") {
			t.Errorf("insights%s: %d buckets holding %d runs (%d failed), first at %s", c.query, len(in.Buckets), runs, failed, in.Buckets[0].Start)
		}
	}
	status, body := get(t, p.base+"/api/v1/flows/"+flow.ID+"/insights?period=year", "Bearer "+key)
	if status != 400 || !strings.Contains(body, "INVALID_PARAMETER") || !strings.Contains(body, "period") {
		t.Errorf("period=year: %d %s, want 400 INVALID_PARAMETER naming period", status, body)
	}
}
