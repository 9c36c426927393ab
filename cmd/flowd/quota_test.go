package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestProjectQuotas: the limits answer on GET /api/v1/project, an
// operator overrides them with flowctl, the flows limit refuses a create
// with 403 QUOTA_EXCEEDED, and the webhooks limit answers 429 with
// Retry-After and starts no run.
func TestProjectQuotas(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)

	type info struct {
		Plan   string
		Limits map[string]*int64
		Usage  struct{ Flows int64 }
	}
	var before info
	api(t, p, key, "GET", "/api/v1/project", "", 200, &before)
	// flowd's first project is ENTERPRISE: nothing is limited but the
	// versions each flow keeps.
	if before.Plan != "ENTERPRISE" || len(before.Limits) != 8 || before.Limits["flows"] != nil || before.Usage.Flows != 0 ||
		before.Limits["versionsPerFlow"] == nil || *before.Limits["versionsPerFlow"] != 1000 {
		t.Fatalf("the first project: %+v; want ENTERPRISE with seven unlimited limits, 1000 versions per flow and no flows", before)
	}
	var projects []struct{ Name string }
	out, err := flowctl(t, dir, "projects", "list", "-o", "json")
	if err != nil {
		t.Fatalf("projects list: %v %s", err, out)
	}
	if err := json.Unmarshal([]byte(out), &projects); err != nil || len(projects) != 1 {
		t.Fatalf("projects list: %v %s", err, out)
	}
	if out, err := flowctl(t, dir, "projects", "set-limits", projects[0].Name, "--flows", "2", "--webhooksPerSecond", "3", "--storedBytes", "unlimited"); err != nil ||
		!strings.Contains(out, "flows") || !strings.Contains(out, "(override)") {
		t.Fatalf("set-limits: %v\n%s", err, out)
	}
	if out, err := flowctl(t, dir, "projects", "set-limits", projects[0].Name, "--flows", "many"); err == nil {
		t.Fatalf("set-limits --flows many succeeded: %s", out)
	}
	// The running flowd reads a project's limits again within 10 s; a new
	// one reads them at once.
	p.stop(t)
	p = startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	var after info
	api(t, p, key, "GET", "/api/v1/project", "", 200, &after)
	if *after.Limits["flows"] != 2 || *after.Limits["webhooksPerSecond"] != 3 || after.Limits["storedBytes"] != nil {
		t.Fatalf("after set-limits: %+v", after.Limits)
	}

	var flow struct{ ID string }
	def := `{"name": "q%d", "engine": "FLOW_BUILDER", "steps": [{"name": "noop", "type": "SET", "values": {}}]}`
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(def, 1), 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(def, 2), 201, nil)
	var refused struct {
		Error struct{ Code, Message string }
	}
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(def, 3), 403, &refused)
	if refused.Error.Code != "QUOTA_EXCEEDED" || !strings.Contains(refused.Error.Message, "limits.flows") {
		t.Fatalf("third flow: %+v", refused.Error)
	}
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)

	// A burst of 10 against a limit of 3 per second (bursts of 3): the
	// first 3 are taken, and some of the rest are refused with 429.
	accepted, limited := 0, 0
	for range 10 {
		resp, err := http.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			accepted++
		case http.StatusTooManyRequests:
			limited++
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
				t.Errorf("429 with Retry-After %q", resp.Header.Get("Retry-After"))
			}
		default:
			t.Fatalf("webhook: %d", resp.StatusCode)
		}
	}
	if accepted < 3 || limited == 0 {
		t.Fatalf("10 deliveries at once: %d accepted, %d refused; want at least 3 accepted and some refused", accepted, limited)
	}
	var runs struct{ Data []any }
	api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/runs?limit=100", "", 200, &runs)
	if len(runs.Data) != accepted {
		t.Fatalf("%d runs for %d accepted deliveries: a refused delivery started a run", len(runs.Data), accepted)
	}
}

// TestRunsPerMinuteQuota: with runsPerMinute 3, of 8 deliveries in a row
// at most 3 a minute start a run (6 should the minute turn meanwhile);
// the others are 429 QUOTA_EXCEEDED with a Retry-After within the minute
// and start nothing; GET /api/v1/project shows the limit and the count.
func TestRunsPerMinuteQuota(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	var projects []struct{ Name string }
	out, err := flowctl(t, dir, "projects", "list", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &projects) != nil || len(projects) != 1 {
		t.Fatalf("projects list: %v %s", err, out)
	}
	if out, err := flowctl(t, dir, "projects", "set-limits", projects[0].Name, "--runsPerMinute", "3"); err != nil || !strings.Contains(out, "runsPerMinute") {
		t.Fatalf("set-limits: %v\n%s", err, out)
	}
	p.stop(t)
	p = startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "q", "engine": "FLOW_BUILDER", "steps": [{"name": "noop", "type": "SET", "values": {}}]}`, 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)

	accepted, limited := 0, 0
	for range 8 {
		resp, err := http.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct{ Code, Message string }
		}
		json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			accepted++
		case http.StatusTooManyRequests:
			limited++
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > 60 ||
				body.Error.Code != "QUOTA_EXCEEDED" || !strings.Contains(body.Error.Message, "limits.runsPerMinute") {
				t.Errorf("429 with Retry-After %q, %+v", resp.Header.Get("Retry-After"), body.Error)
			}
		default:
			t.Fatalf("webhook: %d", resp.StatusCode)
		}
	}
	if accepted < 3 || accepted > 6 || limited != 8-accepted {
		t.Fatalf("8 deliveries: %d accepted, %d refused; want 3 a minute accepted, the rest refused", accepted, limited)
	}
	var runs struct{ Data []any }
	api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/runs?limit=100", "", 200, &runs)
	if len(runs.Data) != accepted {
		t.Fatalf("%d runs for %d accepted deliveries: a refused delivery started a run", len(runs.Data), accepted)
	}
	var info struct {
		Limits, Usage map[string]*int64
	}
	api(t, p, key, "GET", "/api/v1/project", "", 200, &info)
	if l, u := info.Limits["runsPerMinute"], info.Usage["runsPerMinute"]; l == nil || *l != 3 || u == nil || *u > 3 {
		t.Errorf("GET /api/v1/project: limits %v usage %v; want runsPerMinute 3 and at most 3 used", info.Limits, info.Usage)
	}
}
