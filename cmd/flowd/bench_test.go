package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkWebhookAccept measures what a sender waits for: a flow builder
// webhook answered 200 by a real flowd process, which means the run and its
// queue entry are committed to SQLite (WAL, synchronous=FULL, group commit). Workers
// execute the (one SET step) runs meanwhile, as in production.
func BenchmarkWebhookAccept(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "data")
	p := startFlowd(b, dir, "FLOWD_LOG_LEVEL=error")
	key := initialKey(b, dir)
	var flow struct{ ID string }
	api(b, p, key, "POST", "/api/v1/flows", `{"name": "bench", "engine": "FLOW_BUILDER",
		"steps": [{"name": "s", "type": "SET", "values": {"ref": "{{ trigger.body.ref }}"}}]}`, 201, &flow)
	api(b, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	url := p.base + "/api/v1/webhooks/" + flow.ID
	body := []byte(`{"event":"push","data":{"ref":"refs/heads/main"},"ref":"main"}`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.SetParallelism(4) // 4 × GOMAXPROCS concurrent senders
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	if mb, ok := peakRSS(p.cmd.Process.Pid); ok {
		b.ReportMetric(mb, "flowd-peak-RSS-MB")
	}
}

// peakRSS reads a process's peak resident set size (VmHWM) in MB.
func peakRSS(pid int) (float64, bool) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			return float64(kb) / 1024, err == nil
		}
	}
	return 0, false
}
