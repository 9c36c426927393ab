package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/awstest"
)

// TestDisablingFlowStopsItsRunningRun: a run in a long FOR_EACH of HTTP
// calls stops at its next step once its flow is disabled: the service it
// calls sees no call after the one in flight, and the run ends FAILED
// "flow disabled".
func TestDisablingFlowStopsItsRunningRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	testDisableStops(t, p, initialKey(t, dir))
}

// TestDisablingFlowStopsItsRunningRunOnAWS is the same on the AWS
// adapters (DynamoDB, SQS on moto_server), where the journal write's
// transaction checks the flow.
func TestDisablingFlowStopsItsRunningRunOnAWS(t *testing.T) {
	moto, err := awstest.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { moto.Stop() })
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "AWS_ENDPOINT_URL="+moto.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=testing",
		"AWS_SECRET_ACCESS_KEY=testing", "AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null", "FLOWD_BACKEND=aws", "FLOWD_AWS_PROVISION=true", "FLOWD_AWS_PREFIX=flowstop",
		"FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_WORKERS=1", "FLOWD_LOG_LEVEL=warn")
	testDisableStops(t, p, initialKey(t, dir))
}

func testDisableStops(t *testing.T, p *proc, key string) {
	var calls atomic.Int64
	fifth, release := make(chan struct{}), make(chan struct{})
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 5 {
			close(fifth)
			<-release // in flight while the flow is disabled
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer fake.Close()

	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "flood", "engine": "FLOW_BUILDER", "steps": [
		{"name": "each", "type": "FOR_EACH", "items": "trigger.body.xs", "steps": [
			{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"i": "{{ index }}"}}]},
		{"name": "after", "type": "HTTP", "method": "GET", "url": %q}]}`, fake.URL, fake.URL), 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	xs := make([]string, 500)
	for i := range xs {
		xs[i] = fmt.Sprint(i)
	}
	var started struct{ RunID string }
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json",
		strings.NewReader(`{"xs": [`+strings.Join(xs, ",")+`]}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook: %v %v", resp, err)
	}
	err = json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}

	select {
	case <-fifth:
	case <-time.After(20 * time.Second):
		t.Fatalf("the fake saw %d calls, want the fifth; log: %s", calls.Load(), p.stderr)
	}
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/disable", "", 200, nil)
	close(release)

	var run struct{ Status, Error string }
	testwait.For(t, 20*time.Second, "the run ends", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/runs/"+started.RunID, "", 200, &run)
		return run.Status != "RUNNING"
	})
	if run.Status != "FAILED" || run.Error != "flow disabled" {
		t.Errorf("run ended %s %q, want FAILED \"flow disabled\"", run.Status, run.Error)
	}
	// The run is final, so nothing of it can call again: the count is final.
	if n := calls.Load(); n != 5 {
		t.Errorf("the fake saw %d calls, want 5 (none after the one in flight when the flow was disabled)", n)
	}
}

// TestDeletingFlowStopsItsRunningRun: deleting a flow stops its running
// run at its next step before it removes it. With one worker, another
// flow's run finishing afterwards proves the stopped attempt has ended, so
// the count of calls it made is final.
func TestDeletingFlowStopsItsRunningRun(t *testing.T) {
	var calls, others atomic.Int64
	fifth, release := make(chan struct{}), make(chan struct{})
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/other" {
			others.Add(1)
		} else if calls.Add(1) == 5 {
			close(fifth)
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer fake.Close()
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_WORKERS=1", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	var flow, other struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "flood", "engine": "FLOW_BUILDER", "steps": [
		{"name": "each", "type": "FOR_EACH", "items": "trigger.body.xs", "steps": [
			{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"i": "{{ index }}"}}]}]}`, fake.URL), 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "other", "engine": "FLOW_BUILDER", "steps": [
		{"name": "call", "type": "HTTP", "method": "POST", "url": %q}]}`, fake.URL+"/other"), 201, &other)
	for _, id := range []string{flow.ID, other.ID} {
		api(t, p, key, "POST", "/api/v1/flows/"+id+"/enable", "", 200, nil)
	}
	xs := make([]string, 200)
	for i := range xs {
		xs[i] = fmt.Sprint(i)
	}
	hook := func(id, body string) {
		t.Helper()
		resp, err := http.Post(p.base+"/api/v1/webhooks/"+id, "application/json", strings.NewReader(body))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("webhook: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	hook(flow.ID, `{"xs": [`+strings.Join(xs, ",")+`]}`)
	select {
	case <-fifth:
	case <-time.After(20 * time.Second):
		t.Fatalf("the fake saw %d calls, want the fifth; log: %s", calls.Load(), p.stderr)
	}
	api(t, p, key, "DELETE", "/api/v1/flows/"+flow.ID, "", 204, nil)
	hook(other.ID, `{}`) // queued behind the one worker, busy with the stopped run
	close(release)
	testwait.For(t, 20*time.Second, "the other flow's run on the freed worker", func() bool { return others.Load() == 1 })
	if n := calls.Load(); n != 5 {
		t.Errorf("the fake saw %d calls of the deleted flow, want 5 (none after the one in flight when it was deleted)", n)
	}
}
