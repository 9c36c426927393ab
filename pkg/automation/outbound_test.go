package automation_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
)

// outboundFake is a service that records, per run (X-Flow-Run), when each
// request arrived.
type outboundFake struct {
	mu    sync.Mutex
	calls map[string][]time.Time
}

func newOutboundFake(t *testing.T) (*outboundFake, string) {
	f := &outboundFake{calls: map[string][]time.Time{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.calls[r.Header.Get("X-Flow-Run")] = append(f.calls[r.Header.Get("X-Flow-Run")], time.Now())
		f.mu.Unlock()
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *outboundFake) of(runID string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.calls[runID]...)
}

// loopOf is a FOR_EACH over trigger.body.xs of one HTTP call to url.
func loopOf(url string) automation.Step {
	return automation.Step{Name: "each", Type: automation.StepForEach, Items: json.RawMessage(`"trigger.body.xs"`),
		Steps: []automation.Step{{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: url, Body: json.RawMessage(`{"i": "{{ index }}"}`)}}}
}

func startItems(t *testing.T, svc *automation.Service, f automation.Flow, n int) automation.Run {
	t.Helper()
	xs := make([]int, n)
	body, _ := json.Marshal(map[string]any{"xs": xs})
	r, err := svc.StartRun(context.Background(), f, automation.TriggerData{Method: "POST", Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestOutboundQuotaHoldsRequests: past its outboundPerMinute quota a
// project's HTTP step waits instead of failing, while another project's
// run calls out at once.
func TestOutboundQuotaHoldsRequests(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	free, _ := e.Project(t, "free", automation.PlanFree)
	// Two a minute: one request at once (the burst), the next 30 s later.
	if _, err := e.svc.SetProjectLimits(ctx, "free", map[string]int64{"outboundPerMinute": 2}, nil); err != nil {
		t.Fatal(err)
	}
	fake, url := newOutboundFake(t)
	limited := startItems(t, e.svc, e.ActiveFlow(t, free, "flood", loopOf(url)), 5)
	actx, cancel := context.WithCancel(ctx)
	done := make(chan automation.Attempt, 1)
	go func() {
		at, _ := e.svc.ExecuteRun(actx, limited.Project, limited.ID)
		done <- at
	}()
	testwait.For(t, testwait.Hang, "the limited run's first call", func() bool { return len(fake.of(limited.ID)) == 1 })

	// Another project is not held by the first one's quota.
	other := startItems(t, e.svc, e.ActiveFlow(t, e.project, "other", loopOf(url)), 5)
	if at, err := e.svc.ExecuteRun(ctx, other.Project, other.ID); err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("the other project's run = %s %q, %v", at.Run.Status, at.Run.Error, err)
	}
	if n := len(fake.of(other.ID)); n != 5 {
		t.Fatalf("the other project's run made %d calls, want 5", n)
	}
	// Meanwhile the limited run made no second call: it waits, RUNNING.
	if n := len(fake.of(limited.ID)); n != 1 {
		t.Fatalf("the limited run made %d calls within its quota's first 30 s, want 1", n)
	}
	cancel()
	at := <-done
	if at.Run.Status == automation.RunFailed && at.Outcome != automation.OutcomeRetry {
		t.Fatalf("the waiting run failed for good (%v): %q; want it given back for another attempt", at.Outcome, at.Run.Error)
	}
}

// TestOutboundQuotaSpacesRequests: a run over its project's quota goes on
// at the quota's pace and succeeds: 120 a minute is a burst of 2, then one
// request every 500 ms, so 6 requests span at least 2 s.
func TestOutboundQuotaSpacesRequests(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	team, _ := e.Project(t, "team", automation.PlanTeam)
	if _, err := e.svc.SetProjectLimits(ctx, "team", map[string]int64{"outboundPerMinute": 120}, nil); err != nil {
		t.Fatal(err)
	}
	fake, url := newOutboundFake(t)
	r := startItems(t, e.svc, e.ActiveFlow(t, team, "paced", loopOf(url)), 6)
	at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("run = %s %q, %v; want SUCCEEDED", at.Run.Status, at.Run.Error, err)
	}
	calls := fake.of(r.ID)
	if len(calls) != 6 {
		t.Fatalf("%d calls, want 6", len(calls))
	}
	if span := calls[5].Sub(calls[0]); span < 1900*time.Millisecond {
		t.Errorf("6 calls at 120 a minute spanned %s, want at least 2 s", span)
	}
}
