package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"flowservice/internal/testwait"
)

func get(t testing.TB, url, auth string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitRun polls a run until it is final.
func waitRun(t testing.TB, p *proc, key, flowID, runID string) string {
	t.Helper()
	var r struct{ Status string }
	testwait.For(t, testwait.Hang, "run "+runID+" to finish", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, "", 200, &r)
		return r.Status != "RUNNING"
	})
	return r.Status
}

// TestHealthAndMetrics: GET /healthz and GET /metrics on a real flowd,
// open on loopback; the metrics count a webhook and its finished run.
func TestHealthAndMetrics(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_MEMORY_LIMIT=256MiB")
	key := initialKey(t, dir)

	if status, body := get(t, p.base+"/healthz", ""); status != 200 || strings.TrimSpace(body) != `{"status":"ok"}` {
		t.Errorf("GET /healthz = %d %s", status, body)
	}
	var f struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name":"m","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"a":"1"}}]}`, 201, &f)
	api(t, p, key, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+f.ID, "application/json", strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	runID := resp.Header.Get("X-Run-Id")
	if status := waitRun(t, p, key, f.ID, runID); status != "SUCCEEDED" {
		t.Fatalf("run %s", status)
	}
	resp, err = http.Post(p.base+"/api/v1/webhooks/flw_nope", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	status, body := get(t, p.base+"/metrics", "")
	if status != 200 {
		t.Fatalf("GET /metrics = %d %s", status, body)
	}
	for _, want := range []string{
		`flowd_webhooks_received_total{outcome="accepted",receiver="flow_builder"} 1`,
		`flowd_webhooks_received_total{outcome="not_found",receiver="flow_builder"} 1`,
		`flowd_runs_finished_total{status="SUCCEEDED"} 1`,
		`flowd_run_duration_seconds_count 1`,
		`flowd_step_duration_seconds_count{type="SET"} 1`,
		`flowd_queue_depth 0`,
		`flowd_queue_stats_up 1`,
		`flowd_store_latency_seconds_count{op="enqueue"} 1`,
		`flowd_store_latency_seconds_count{op="finish_run"} 1`,
		`process_resident_memory_bytes`,
		`go_gc_gomemlimit_bytes 2.68435456e+08`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestMetricsToken: with FLOWD_METRICS_TOKEN set, /metrics wants it.
func TestMetricsToken(t *testing.T) {
	p := startFlowd(t, filepath.Join(t.TempDir(), "data"), "FLOWD_METRICS_TOKEN=m3trics-token")
	if status, body := get(t, p.base+"/metrics", ""); status != 401 || !strings.Contains(body, `"UNAUTHORIZED"`) {
		t.Errorf("no token: %d %s", status, body)
	}
	if status, _ := get(t, p.base+"/metrics", "Bearer wrong"); status != 401 {
		t.Errorf("wrong token: %d", status)
	}
	if status, body := get(t, p.base+"/metrics", "Bearer m3trics-token"); status != 200 || !strings.Contains(body, "flowd_queue_depth") {
		t.Errorf("right token: %d %.200s", status, body)
	}
	if strings.Contains(p.stderr.String(), "m3trics-token") {
		t.Error("the token is in the log")
	}
}
