package deploy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsdev"
)

// TestDisableStopsRunningRunOnLambda: the runner handler is in a FOR_EACH
// of calls when the api handler (another Service, as another Lambda is)
// disables the flow: the runner stops at its next step, the fake sees no
// call after the one in flight, and the run ends FAILED "flow disabled".
func TestDisableStopsRunningRunOnLambda(t *testing.T) {
	recordGrants(t)
	e := newE2E(t, 5, automation.RunPolicy{MaxAttempts: 3})
	var calls atomic.Int64
	third, release := make(chan struct{}), make(chan struct{})
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 3 {
			close(third)
			<-release // in flight while the flow is disabled
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(fake.Close)
	status, f := call(t, e.api, "POST", "/api/v1/flows", e.key, fmt.Sprintf(`{"name": "Flood", "engine": "FLOW_BUILDER",
		"steps": [{"name": "each", "type": "FOR_EACH", "items": "trigger.body.xs", "steps": [
			{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"i": "{{ index }}"}}]}]}`, fake.URL))
	if status != 201 {
		t.Fatalf("create flow = %d %v", status, f)
	}
	flowID := f["id"].(string)
	if status, b := call(t, e.api, "POST", "/api/v1/flows/"+flowID+"/enable", e.key, ""); status != 200 {
		t.Fatalf("enable = %d %v", status, b)
	}
	xs := make([]string, 100)
	for i := range xs {
		xs[i] = fmt.Sprint(i)
	}
	status, b := call(t, e.hook, "POST", "/api/v1/webhooks/"+flowID, "", `{"xs": [`+strings.Join(xs, ",")+`]}`)
	if status != 200 {
		t.Fatalf("webhook = %d %v", status, b)
	}
	runID := b["runId"].(string)

	polled := make(chan error, 1)
	go func() {
		_, err := awsdev.PollOnce(context.Background(), e.sqs, e.cfg.QueueURL, time.Second, e.runner)
		polled <- err
	}()
	select {
	case <-third:
	case err := <-polled:
		t.Fatalf("the runner returned before the third call (%d calls): %v", calls.Load(), err)
	case <-time.After(30 * time.Second):
		t.Fatalf("the fake saw %d calls, want a third", calls.Load())
	}
	if status, b := call(t, e.api, "POST", "/api/v1/flows/"+flowID+"/disable", e.key, ""); status != 200 {
		t.Fatalf("disable = %d %v", status, b)
	}
	close(release)
	if err := <-polled; err != nil {
		t.Fatal(err)
	}

	status, run := call(t, e.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, e.key, "")
	if status != 200 || run["status"] != "FAILED" || run["error"] != automation.StoppedMessage {
		t.Errorf("run = %d %v %q, want FAILED %q", status, run["status"], run["error"], automation.StoppedMessage)
	}
	// The runner's handler returned: nothing of the run is executing, so
	// the count is final.
	if n := calls.Load(); n != 3 {
		t.Errorf("the fake saw %d calls, want 3 (none after the one in flight when the flow was disabled)", n)
	}
}
