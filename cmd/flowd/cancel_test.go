package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestCancelWaitingRun: over real HTTP on flowd, a run waiting at a WAIT
// step is cancelled: 200 with the run FAILED and its error CANCELLED, the
// step after the WAIT SKIPPED, the flow's stats
// counting it failed, the cancel in the audit log with the operator key
// that made it. A second cancel, a viewer's, and a cancel of a run that is
// not waiting are refused; the worker that comes for the run when its wait
// would have ended leaves it as it is.
func TestCancelWaitingRun(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_WORKERS=2", "FLOWD_LOG_LEVEL=warn")
	admin := initialKey(t, dir)
	mk := func(role string) string {
		out, err := flowctl(t, dir, "keys", "create", "--project", "default", "--role", role)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	operator, viewer := mk("operator"), mk("viewer")

	var f struct{ ID string }
	api(t, p, admin, "POST", "/api/v1/flows", `{"name": "Follow up", "engine": "FLOW_BUILDER", "steps": [
		{"name": "hold", "type": "WAIT", "duration": "1h"},
		{"name": "after", "type": "SET", "values": {"done": true}}]}`, 201, &f)
	api(t, p, admin, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
	start := func() string {
		t.Helper()
		resp, err := http.Post(p.base+"/api/v1/webhooks/"+f.ID, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get("X-Run-Id")
		if id == "" {
			t.Fatalf("webhook = %d without X-Run-Id", resp.StatusCode)
		}
		return id
	}
	runID := start()
	runPath := "/api/v1/flows/" + f.ID + "/runs/" + runID
	waitFor(t, "the run to wait at hold", func() bool {
		var r struct{ WaitingFor string }
		api(t, p, admin, "GET", runPath, "", 200, &r)
		return r.WaitingFor == "WAIT"
	})

	var refused struct {
		Error struct{ Code, Message string }
	}
	api(t, p, viewer, "POST", runPath+"/cancel", "", 403, &refused)
	if refused.Error.Code != "FORBIDDEN" {
		t.Errorf("viewer cancels: %+v, want FORBIDDEN", refused.Error)
	}

	type step struct{ Name, Status, Error string }
	var run struct {
		Status, Error, WaitingFor string
		Steps                     []step
	}
	api(t, p, operator, "POST", runPath+"/cancel", "", 200, &run)
	if run.Status != "FAILED" || !strings.HasPrefix(run.Error, "CANCELLED: ") || run.WaitingFor != "" {
		t.Fatalf("cancelled run = %+v, want FAILED with CANCELLED and no longer waiting", run)
	}
	// The WAIT step had done its part (it started the wait); the step
	// after it was never reached.
	if len(run.Steps) != 2 || run.Steps[0].Status != "SUCCEEDED" || run.Steps[1].Status != "SKIPPED" {
		t.Errorf("cancelled run's steps = %+v, want hold SUCCEEDED and after SKIPPED", run.Steps)
	}
	// What the API reads back is the finish the store wrote.
	api(t, p, admin, "GET", runPath, "", 200, &run)
	if run.Status != "FAILED" || !strings.HasPrefix(run.Error, "CANCELLED") {
		t.Errorf("run read back = %+v", run)
	}
	api(t, p, operator, "POST", runPath+"/cancel", "", 409, &refused)
	if refused.Error.Code != "RUN_NOT_WAITING" || !strings.Contains(refused.Error.Message, "FAILED already") {
		t.Errorf("second cancel: %+v, want 409 RUN_NOT_WAITING saying it is FAILED already", refused.Error)
	}
	api(t, p, operator, "POST", "/api/v1/flows/"+f.ID+"/runs/run_nope/cancel", "", 404, nil)

	var fl struct {
		RunCount    int64
		SuccessRate float64
	}
	api(t, p, admin, "GET", "/api/v1/flows/"+f.ID, "", 200, &fl)
	if fl.RunCount != 1 || fl.SuccessRate != 0 {
		t.Errorf("flow stats after the cancel = %+v, want 1 run, 0%% success", fl)
	}
	var audit struct {
		Data []struct {
			Action   string
			Actor    struct{ KeyID, Role string }
			Resource struct{ Type, ID string }
		}
	}
	api(t, p, admin, "GET", "/api/v1/audit", "", 200, &audit)
	found := false
	for _, e := range audit.Data {
		if e.Action == "run.cancel" {
			found = e.Resource.ID == runID && e.Actor.Role == "operator"
			break
		}
	}
	if !found {
		t.Errorf("no run.cancel entry for %s by the operator in %+v", runID, audit.Data)
	}

	// A flow without a WAIT: its run is final at once, never cancellable.
	var quick struct{ ID string }
	api(t, p, admin, "POST", "/api/v1/flows", `{"name": "Quick", "engine": "FLOW_BUILDER",
		"steps": [{"name": "s", "type": "SET", "values": {"a": 1}}]}`, 201, &quick)
	api(t, p, admin, "POST", "/api/v1/flows/"+quick.ID+"/enable", "", 200, nil)
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+quick.ID, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	qid := resp.Header.Get("X-Run-Id")
	waitRun(t, p, admin, quick.ID, qid)
	api(t, p, operator, "POST", "/api/v1/flows/"+quick.ID+"/runs/"+qid+"/cancel", "", 409, &refused)
	if refused.Error.Code != "RUN_NOT_WAITING" {
		t.Errorf("cancel of a finished run: %+v", refused.Error)
	}
}
