package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// setLimits overrides limits of flowd's one project with flowctl and
// restarts flowd, which then reads them at once.
func setLimits(t *testing.T, p *proc, dir string, args ...string) *proc {
	t.Helper()
	var projects []struct{ Name string }
	out, err := flowctl(t, dir, "projects", "list", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &projects) != nil || len(projects) != 1 {
		t.Fatalf("projects list: %v %s", err, out)
	}
	if out, err := flowctl(t, dir, append([]string{"projects", "set-limits", projects[0].Name}, args...)...); err != nil {
		t.Fatalf("set-limits: %v\n%s", err, out)
	}
	p.stop(t)
	return startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
}

// TestQuotaConcurrentFlowCreates: 60 creates at once against a flows
// limit of 50 store exactly 50 flows; the other 10 are 403 QUOTA_EXCEEDED
// (the count is made in the insert's own transaction).
func TestQuotaConcurrentFlowCreates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	p = setLimits(t, p, dir, "--flows", "50")

	const creates = 60
	codes := make([]int, creates)
	bodies := make([]string, creates)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range creates {
		wg.Go(func() {
			body := fmt.Sprintf(`{"name": "c%d", "engine": "FLOW_BUILDER", "steps": [{"name": "noop", "type": "SET", "values": {}}]}`, i)
			req, _ := http.NewRequest("POST", p.base+"/api/v1/flows", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			<-start
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				bodies[i] = err.Error()
				return
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			codes[i], bodies[i] = resp.StatusCode, string(raw)
		})
	}
	close(start)
	wg.Wait()
	created, refused := 0, 0
	for i, c := range codes {
		switch {
		case c == http.StatusCreated:
			created++
		case c == http.StatusForbidden && strings.Contains(bodies[i], `"QUOTA_EXCEEDED"`):
			refused++
		default:
			t.Errorf("create %d: %d %s", i, c, bodies[i])
		}
	}
	var info struct{ Usage struct{ Flows int64 } }
	api(t, p, key, "GET", "/api/v1/project", "", 200, &info)
	if created != 50 || refused != 10 || info.Usage.Flows != 50 {
		t.Fatalf("60 creates at once against 50: %d created, %d refused, the project holds %d; want 50, 10, 50",
			created, refused, info.Usage.Flows)
	}
}

// TestVersionsBoundAndStoredBytes: a flow keeps at most versionsPerFlow
// versions, the oldest pruned as new ones are published, except the one a
// waiting run is pinned to; GET /api/v1/project counts the kept versions
// in storedBytes, so a stream of large updates no longer grows it without
// bound.
func TestVersionsBoundAndStoredBytes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	p = setLimits(t, p, dir, "--versionsPerFlow", "5")

	var info struct {
		Limits map[string]*int64
		Usage  struct{ StoredBytes int64 }
	}
	stored := func() int64 {
		t.Helper()
		api(t, p, key, "GET", "/api/v1/project", "", 200, &info)
		return info.Usage.StoredBytes
	}
	before := stored()
	if l := info.Limits["versionsPerFlow"]; l == nil || *l != 5 {
		t.Fatalf("limits.versionsPerFlow = %v, want 5", l)
	}

	// Each version holds a 100 KB constant, and waits an hour.
	const pad = 100_000
	steps := func(tag string) string {
		return `[{"name": "hold", "type": "WAIT", "duration": "1h"},
			{"name": "pad", "type": "SET", "values": {"tag": "` + tag + `", "pad": "` + strings.Repeat("p", pad) + `"}}]`
	}
	var flow struct {
		ID      string
		Version int64
	}
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "bounded", "engine": "FLOW_BUILDER", "steps": `+steps("v1")+`}`, 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	if grown := stored() - before; grown < pad {
		t.Fatalf("storedBytes grew by %d with a %d-byte version, want at least that", grown, pad)
	}
	// A run of version 1 waits (RUNNING) for an hour: its version stays.
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook: %d", resp.StatusCode)
	}
	for i := 2; i <= 20; i++ {
		api(t, p, key, "POST", "/api/v1/flows/"+flow.ID, `{"steps": `+steps(fmt.Sprintf("v%d", i))+`}`, 200, &flow)
	}
	if flow.Version != 20 {
		t.Fatalf("after 19 updates the flow is at version %d, want 20", flow.Version)
	}
	var versions struct {
		Data []struct{ Version int64 }
	}
	api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/versions?limit=100", "", 200, &versions)
	var kept []int64
	for _, v := range versions.Data {
		kept = append(kept, v.Version)
	}
	if fmt.Sprint(kept) != "[20 19 18 17 16 1]" {
		t.Fatalf("versions kept = %v, want the newest 5 and version 1, which a waiting run is pinned to", kept)
	}
	api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/versions/1", "", 200, nil)
	api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/versions/2", "", 404, nil)
	// Six versions of 100 KB are kept, not twenty.
	if grown := stored() - before; grown < 6*pad || grown > 10*pad {
		t.Fatalf("storedBytes grew by %d with six %d-byte versions kept of twenty published, want about %d", grown, pad, 6*pad)
	}
}
