package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
)

// keySink is the service the step after an APPROVAL calls: it counts the
// requests of each Idempotency-Key and, while hold is set, keeps each
// request open until its caller goes away (a killed flowd).
type keySink struct {
	mu      sync.Mutex
	keys    map[string]int
	hold    bool
	release chan struct{} // closed when hold ends
}

func newKeySink(t *testing.T) (*keySink, *httptest.Server) {
	s := &keySink{keys: map[string]int{}, release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The whole body read, the server notices the caller's death.
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.keys[r.Header.Get("Idempotency-Key")]++
		hold, release := s.hold, s.release
		s.mu.Unlock()
		if hold {
			select { // answered by no one: the caller dies first
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.Write([]byte(`{"ok": true}`))
	}))
	t.Cleanup(srv.Close)
	return s, srv
}

func (s *keySink) snapshot() (distinct, requests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.keys {
		distinct++
		requests += n
	}
	return distinct, requests
}

func (s *keySink) setHold(h bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold && !h {
		close(s.release)
		s.release = make(chan struct{})
	}
	s.hold = h
}

// kill9 kills flowd with SIGKILL (no cleanup at all) and waits for it.
func kill9(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
}

// TestKill9AroundApprovals: flowd is killed with SIGKILL while runs wait
// on an APPROVAL, again while the step after the decisions is calling
// out (the call held open by the service), and again right after a batch
// of decisions is answered (between the decision and the next step).
// After each restart every run finishes exactly once (the flow counts
// each run once, each run SUCCEEDED with its decision), and the service
// saw one Idempotency-Key per run, however often the call was made.
func TestKill9AroundApprovals(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills flowd processes")
	}
	const runs = 20
	dir := filepath.Join(t.TempDir(), "data")
	env := []string{"FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_RATE_LIMIT=0"}
	p := startFlowd(t, dir, env...)
	key := initialKey(t, dir)
	sink, srv := newKeySink(t)
	flowID := createEnabled(t, p, key, fmt.Sprintf(`{"name": "pay out", "engine": "FLOW_BUILDER", "steps": [
		{"name": "ok", "type": "APPROVAL", "title": "Pay {{ trigger.body.n }}?", "timeout": "720h"},
		{"name": "pay", "type": "HTTP", "method": "POST", "url": %q, "body": {"n": "{{ trigger.body.n }}"}}]}`, srv.URL))
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = trigger(t, p, flowID, fmt.Sprintf(`{"n": %d}`, i))
	}
	parked := func(p *proc) {
		t.Helper()
		testwait.For(t, 120*time.Second, "every run to wait on its approval", func() bool {
			var l struct{ Data []struct{ RunID string } }
			api(t, p, key, "GET", "/api/v1/approvals?limit=100", "", 200, &l)
			return len(l.Data) == runs
		})
	}
	parked(p)

	// 1. Killed while every run waits.
	kill9(t, p)
	p = startFlowd(t, dir, env...)
	parked(p)

	// 2. Killed while the step after the decisions calls out.
	sink.setHold(true)
	for _, id := range ids[:runs/2] {
		api(t, p, key, "POST", "/api/v1/runs/"+id+"/approvals/ok", `{"decision": "approve"}`, 200, nil)
	}
	testwait.Event(t, "a call after a decision to be in flight", func() bool { d, _ := sink.snapshot(); return d > 0 })
	kill9(t, p)
	sink.setHold(false)
	p = startFlowd(t, dir, env...)

	// 3. Killed right after decisions are answered.
	for _, id := range ids[runs/2:] {
		api(t, p, key, "POST", "/api/v1/runs/"+id+"/approvals/ok", `{"decision": "approve"}`, 200, nil)
	}
	kill9(t, p)
	p = startFlowd(t, dir, env...)

	for _, id := range ids {
		r := finalRun(t, p, key, flowID, id)
		var out approvalOut
		stepOutput(t, r, "ok", &out)
		if r.Status != "SUCCEEDED" || out.Decision != "approved" || len(out.Decisions) != 1 {
			t.Errorf("run %s = %s %s, approval %+v", id, r.Status, r.Error, out)
		}
	}
	var f struct{ RunCount int64 }
	testwait.For(t, 30*time.Second, "the flow to count every run", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+flowID, "", 200, &f)
		return f.RunCount >= runs
	})
	distinct, requests := sink.snapshot()
	t.Logf("%d runs: the service saw %d requests with %d distinct Idempotency-Keys", runs, requests, distinct)
	if f.RunCount != runs || distinct != runs {
		t.Fatalf("flow counts %d runs, the service saw %d distinct keys (%d requests); want %d and %d", f.RunCount, distinct, requests, runs, runs)
	}
}

// TestApprovalTimeoutAfterRestart: a run waits on an APPROVAL with a
// one-minute timeout; flowd is killed with SIGKILL and started again
// long before the expiry. The timeout still fires: idle workers look for
// due entries every second (runworker's Poll), so the attempt at the
// expiry is claimed within a second of it, and the run goes on with
// "timeout". Nothing else would claim it (the wait below would run out),
// so the bound on the finish only says "promptly": ten seconds, far above
// the second the poll takes, because on a loaded two-core machine with
// other builds beside it a process can stall for seconds. The log shows
// the figure.
func TestApprovalTimeoutAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills flowd; waits a minute")
	}
	dir := filepath.Join(t.TempDir(), "data")
	env := []string{"FLOWD_LOG_LEVEL=warn"}
	p := startFlowd(t, dir, env...)
	key := initialKey(t, dir)
	flowID := createEnabled(t, p, key, `{"name": "short", "engine": "FLOW_BUILDER", "steps": [
		{"name": "ok", "type": "APPROVAL", "title": "go?", "timeout": "1m"},
		{"name": "after", "type": "SET", "values": {"d": "{{ steps.ok.decision }}"}}]}`)
	runID := trigger(t, p, flowID, `{}`)
	var expires time.Time
	testwait.For(t, 60*time.Second, "the run to wait on its approval", func() bool {
		var l struct {
			Data []struct{ ExpiresAt time.Time }
		}
		api(t, p, key, "GET", "/api/v1/approvals", "", 200, &l)
		if len(l.Data) == 1 {
			expires = l.Data[0].ExpiresAt
		}
		return len(l.Data) == 1
	})
	kill9(t, p)
	p = startFlowd(t, dir, env...)
	if !time.Now().Before(expires) {
		t.Fatalf("the restart took past the expiry %v; nothing to show", expires)
	}
	var r struct {
		Status   string
		Finished time.Time
		Steps    []struct {
			Name     string
			Finished time.Time
		}
	}
	testwait.For(t, 150*time.Second, "the run to end at its timeout", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, "", 200, &r)
		return r.Status != "RUNNING"
	})
	full := finalRun(t, p, key, flowID, runID)
	var out approvalOut
	stepOutput(t, full, "ok", &out)
	late := r.Finished.Sub(expires)
	t.Logf("expiry %v, run finished %v (%v after)", expires, r.Finished, late)
	if r.Status != "SUCCEEDED" || out.Decision != "timeout" || late < 0 || late > 10*time.Second {
		t.Fatalf("run %s, decision %q, finished %v after the expiry; want SUCCEEDED with timeout, claimed by the 1 s poll within 10 s", r.Status, out.Decision, late)
	}
}
