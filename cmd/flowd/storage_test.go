package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStoredBytesQuotaRefusesWebhooks: GET /api/v1/project shows the
// bytes a project keeps; past its storedBytes quota both receivers answer
// 429 with Retry-After and a JSON error naming the quota, and start no run.
func TestStoredBytesQuotaRefusesWebhooks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	var projects []struct{ Name string }
	out, err := flowctl(t, dir, "projects", "list", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &projects) != nil || len(projects) != 1 {
		t.Fatalf("projects list: %v %s", err, out)
	}
	if out, err := flowctl(t, dir, "projects", "set-limits", projects[0].Name, "--storedBytes", "20000"); err != nil {
		t.Fatalf("set-limits: %v\n%s", err, out)
	}
	p.stop(t) // a new flowd reads the limits at once
	p = startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")

	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "keep", "engine": "FLOW_BUILDER", "steps": [{"name": "noop", "type": "SET", "values": {}}]}`, 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	hook := func() *http.Response {
		t.Helper()
		resp, err := http.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json",
			strings.NewReader(`{"pad": "`+strings.Repeat("x", 30_000)+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if resp := hook(); resp.StatusCode != http.StatusOK {
		t.Fatalf("first webhook: %d", resp.StatusCode)
	} else {
		resp.Body.Close()
	}

	var info struct {
		Limits map[string]*int64
		Usage  struct{ StoredBytes int64 }
	}
	api(t, p, key, "GET", "/api/v1/project", "", 200, &info)
	if info.Usage.StoredBytes < 30_000 || info.Limits["storedBytes"] == nil || *info.Limits["storedBytes"] != 20_000 {
		t.Fatalf("project after a 30 KB run: usage %d, limit %v; want over 30000 of 20000", info.Usage.StoredBytes, info.Limits["storedBytes"])
	}

	resp := hook()
	var refused struct {
		Error struct{ Code, Message string }
	}
	err = json.NewDecoder(resp.Body).Decode(&refused)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || err != nil || refused.Error.Code != "QUOTA_EXCEEDED" ||
		!strings.Contains(refused.Error.Message, "limits.storedBytes") {
		t.Fatalf("webhook over storedBytes = %d %+v (%v); want 429 QUOTA_EXCEEDED naming limits.storedBytes", resp.StatusCode, refused.Error, err)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("429 with Retry-After %q", resp.Header.Get("Retry-After"))
	}
	var runs struct{ Data []any }
	api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/runs", "", 200, &runs)
	if len(runs.Data) != 1 {
		t.Errorf("%d runs, want 1: the refused delivery started a run", len(runs.Data))
	}
}
