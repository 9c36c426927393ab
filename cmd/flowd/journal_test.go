package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestKillBetweenTwoHTTPSteps kills flowd (SIGKILL) while a run waits on
// its second HTTP step, after the first one answered. After a restart the
// run finishes, and the first step's service saw exactly one request: the
// restarted attempt resumed from the step journal instead of starting over.
func TestKillBetweenTwoHTTPSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills flowd processes")
	}
	var payCalls, notifyCalls atomic.Int32
	pay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		payCalls.Add(1)
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"charge":"ch_1"}`))
	}))
	defer pay.Close()
	reached := make(chan struct{}, 1)
	hold := make(chan struct{})
	notify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if notifyCalls.Add(1) == 1 {
			reached <- struct{}{}
			<-hold // the first request waits for the kill, and is never answered
			return
		}
		w.Write([]byte(`{"ok":true}`))
	}))
	defer notify.Close()
	defer close(hold)

	p2, key, flow := killWhenReached(t, fmt.Sprintf(`{"name": "pay then notify", "engine": "FLOW_BUILDER",
		"steps": [{"name": "pay", "type": "HTTP", "method": "POST", "url": %q, "body": {"amount": 5}},
		          {"name": "notify", "type": "HTTP", "method": "POST", "url": %q, "body": {"paid": "{{ steps.pay.status }}"}}]}`,
		pay.URL, notify.URL), reached, "its second step")
	defer p2.stop(t)
	waitFor(t, "the run to finish after the restart", func() bool {
		var page struct {
			Data []struct{ ID, Status string }
		}
		api(t, p2, key, "GET", "/api/v1/flows/"+flow.ID+"/runs", "", 200, &page)
		if len(page.Data) != 1 || page.Data[0].Status != "RUNNING" && page.Data[0].Status != "SUCCEEDED" {
			t.Fatalf("runs after the restart = %+v, want one run finishing SUCCEEDED", page.Data)
		}
		return page.Data[0].Status == "SUCCEEDED"
	})
	if payCalls.Load() != 1 || notifyCalls.Load() != 2 {
		t.Fatalf("pay saw %d requests and notify %d; want 1 and 2", payCalls.Load(), notifyCalls.Load())
	}
}

// TestKillBetweenTwoOnErrorSteps kills flowd (SIGKILL) while a failed
// run's onError steps run, after the first one (a post to Slack) answered
// and while the second waits. After a restart the run ends FAILED, and
// neither the failed step's service nor Slack saw a second request: the
// restarted attempt resumed the onError steps from the journal.
func TestKillBetweenTwoOnErrorSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills flowd processes")
	}
	var chargeCalls, slackCalls, pagerCalls atomic.Int32
	charge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chargeCalls.Add(1)
		w.WriteHeader(http.StatusPaymentRequired) // a 4xx: the run fails for good
		w.Write([]byte(`{"error":"declined"}`))
	}))
	defer charge.Close()
	slack := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slackCalls.Add(1)
		w.Write([]byte(`{"ok":true}`))
	}))
	defer slack.Close()
	reached := make(chan struct{}, 1)
	hold := make(chan struct{})
	pager := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pagerCalls.Add(1) == 1 {
			reached <- struct{}{}
			<-hold // the first request waits for the kill, and is never answered
			return
		}
		w.Write([]byte(`{"paged":true}`))
	}))
	defer pager.Close()
	defer close(hold)

	p2, key, flow := killWhenReached(t, fmt.Sprintf(`{"name": "charge or alert", "engine": "FLOW_BUILDER",
		"steps": [{"name": "charge", "type": "HTTP", "method": "POST", "url": %q, "body": {"amount": 5}}],
		"onError": [{"name": "slack", "type": "HTTP", "method": "POST", "url": %q, "body": {"text": "{{ error.step }} failed"}},
		            {"name": "pager", "type": "HTTP", "method": "POST", "url": %q, "body": {"run": "{{ run.id }}"}}]}`,
		charge.URL, slack.URL, pager.URL), reached, "its second onError step")
	defer p2.stop(t)
	var runID string
	waitFor(t, "the run to fail after the restart", func() bool {
		var page struct {
			Data []struct{ ID, Status string }
		}
		api(t, p2, key, "GET", "/api/v1/flows/"+flow.ID+"/runs", "", 200, &page)
		if len(page.Data) != 1 || page.Data[0].Status != "RUNNING" && page.Data[0].Status != "FAILED" {
			t.Fatalf("runs after the restart = %+v, want one run finishing FAILED", page.Data)
		}
		runID = page.Data[0].ID
		return page.Data[0].Status == "FAILED"
	})
	if chargeCalls.Load() != 1 || slackCalls.Load() != 1 || pagerCalls.Load() != 2 {
		t.Fatalf("charge saw %d requests, slack %d, pager %d; want 1, 1 and 2", chargeCalls.Load(), slackCalls.Load(), pagerCalls.Load())
	}
	var run struct {
		Error        string
		OnErrorSteps []struct{ Name, Status string }
	}
	api(t, p2, key, "GET", "/api/v1/flows/"+flow.ID+"/runs/"+runID, "", 200, &run)
	if !strings.Contains(run.Error, "step charge") || len(run.OnErrorSteps) != 2 ||
		run.OnErrorSteps[0].Status != "SUCCEEDED" || run.OnErrorSteps[1].Status != "SUCCEEDED" {
		t.Fatalf("run after the restart: %+v", run)
	}
}

// killWhenReached starts flowd, creates and enables the flow definition,
// sends it one webhook, kills flowd with SIGKILL once reached says the run
// got to the step under test (named by what, for the failure message), and
// starts flowd again on the same data.
func killWhenReached(t *testing.T, definition string, reached <-chan struct{}, what string) (p2 *proc, key string, flow struct{ ID string }) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	env := []string{"FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_RUN_TIMEOUT=10s", "FLOWD_LOG_LEVEL=warn"}
	p := startFlowd(t, dir, env...)
	key = initialKey(t, dir)
	api(t, p, key, "POST", "/api/v1/flows", definition, 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json", strings.NewReader(`{"order":1}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook: %v %v", resp, err)
	}
	resp.Body.Close()
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		var page struct{ Data []map[string]any }
		api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/runs", "", 200, &page)
		t.Fatalf("the run never reached %s: %v; log: %s", what, page.Data, p.stderr)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	return startFlowd(t, dir, env...), key, flow
}
