package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestSelfCallingFlowStopsAtDepthFive: a flow whose HTTP step calls its own
// webhook would run forever; the depth its requests carry stops the chain
// at the sixth run, whose call is refused 508 LOOP_DETECTED.
func TestSelfCallingFlowStopsAtDepthFive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "loop", "engine": "FLOW_BUILDER", "steps": [{"name": "noop", "type": "SET", "values": {}}]}`, 201, &flow)
	self := p.base + "/api/v1/webhooks/" + flow.ID
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID, fmt.Sprintf(`{"steps": [
		{"name": "again", "type": "HTTP", "method": "POST", "url": %q, "body": {"hop": true}, "continueOnFail": true}]}`, self), 200, nil)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	resp, err := http.Post(self, "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first webhook: %v %v", resp, err)
	}
	resp.Body.Close()

	type run struct {
		ID, Status string
		Steps      []struct{ Output struct{ Status int } }
	}
	var runs, refused int
	waitFor(t, "the chain to end: its deepest call refused and every run finished", func() bool {
		var page struct{ Data []run }
		api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/runs?limit=100", "", 200, &page)
		finished := 0
		runs, refused = len(page.Data), 0
		for _, r := range page.Data {
			if r.Status == "SUCCEEDED" {
				finished++
				var full run
				api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/runs/"+r.ID, "", 200, &full)
				if len(full.Steps) == 1 && full.Steps[0].Output.Status == http.StatusLoopDetected {
					refused++
				}
			}
		}
		// Once the deepest run's call was refused and every run finished, no
		// request is left that could start another run: the count is final.
		return refused > 0 && finished == len(page.Data)
	})
	if runs != 6 || refused != 1 {
		t.Fatalf("%d runs, %d refused with 508; want 6 runs (depths 0 to 5) and 1 refusal", runs, refused)
	}
}

// TestDeliveriesPastDepthFiveRefused: both receivers answer 508 with the
// error envelope to a delivery that says it is the sixth in a chain.
func TestDeliveriesPastDepthFiveRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "d", "engine": "FLOW_BUILDER", "steps": [{"name": "noop", "type": "SET", "values": {}}]}`, 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	for depth, want := range map[string]int{"5": http.StatusOK, "6": http.StatusLoopDetected} {
		req, _ := http.NewRequest("POST", p.base+"/api/v1/webhooks/"+flow.ID, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Flow-Depth", depth)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error struct{ Code string } }
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("X-Flow-Depth %s: %d with a body that is not JSON: %v", depth, resp.StatusCode, err)
		}
		if resp.StatusCode != want || (want == http.StatusLoopDetected && body.Error.Code != "LOOP_DETECTED") {
			t.Errorf("X-Flow-Depth %s: %d %q, want %d", depth, resp.StatusCode, body.Error.Code, want)
		}
	}
}
