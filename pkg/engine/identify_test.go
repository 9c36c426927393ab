package engine

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"net/http"
	"net/http/httptest"

	"flowservice/pkg/automation"
)

// TestOutboundRequestsSayWhoSends: every HTTP step names the service, the
// run and the depth in a chain of flows, over whatever the step set.
func TestOutboundRequestsSayWhoSends(t *testing.T) {
	ext := newExternal(t)
	e := New(Config{AllowPrivateNetworks: true, UserAgent: UserAgent("https://flows.example.com/hooks")})
	f := flowOf(automation.Step{Name: "call", Type: automation.StepHTTP, URL: ext.URL + "/echo",
		Headers: map[string]string{"User-Agent": "curl/8", "X-Flow-Depth": "0", "X-Flow-Run": "run_fake"}})
	for _, tt := range []struct{ inbound, want string }{{"", "1"}, {"3", "4"}, {"junk", "1"}} {
		r := runOf(`{}`)
		if tt.inbound != "" {
			r.Trigger.Headers["x-flow-depth"] = tt.inbound
		}
		if res := e.Execute(context.Background(), f, r); res.Run.Status != automation.RunSucceeded {
			t.Fatalf("run %s: %s", res.Run.Status, res.Run.Error)
		}
		h := ext.header()
		if ua := h.Get("User-Agent"); !strings.HasPrefix(ua, "flowd/") || !strings.HasSuffix(ua, " (+https://flows.example.com)") {
			t.Errorf("User-Agent = %q, want flowd/<version> (+https://flows.example.com)", ua)
		}
		if got := h.Get("X-Flow-Run"); got != "run_1" {
			t.Errorf("X-Flow-Run = %q, want run_1", got)
		}
		if got := h.Get("X-Flow-Depth"); got != tt.want {
			t.Errorf("inbound depth %q: X-Flow-Depth = %q, want %s", tt.inbound, got, tt.want)
		}
	}
}

// TestRetryBackoffHasAFloor: a flow asking for 1 ms between retries gets
// automation.MinStepBackoff at least, so a retry loop cannot flood a
// third party.
func TestRetryBackoffHasAFloor(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		at = append(at, time.Now())
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	e := newEngine(t, nil, true)
	f := flowOf(automation.Step{Name: "call", Type: automation.StepHTTP, URL: srv.URL,
		Retry: &automation.StepRetry{Attempts: 4, Backoff: "1ms", MaxBackoff: "1ms"}})
	res := e.Execute(context.Background(), f, runOf(`{}`))
	if res.Run.Status != automation.RunFailed || res.Run.Steps[0].Attempts != 4 {
		t.Fatalf("run %s, %d attempts; want FAILED after 4", res.Run.Status, res.Run.Steps[0].Attempts)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 4 {
		t.Fatalf("%d requests, want 4", len(at))
	}
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < automation.MinStepBackoff {
			t.Errorf("gap %d is %s, under the floor of %s", i, gap, automation.MinStepBackoff)
		}
	}
}

func TestParseFlowDepth(t *testing.T) {
	for in, want := range map[string]int{"": 0, "3": 3, " 5 ": 5, "-2": 0, "x": 0, "99999999999999999999": 0, strconv.Itoa(1 << 20): 1000} {
		if got := automation.ParseFlowDepth(in); got != want {
			t.Errorf("ParseFlowDepth(%q) = %d, want %d", in, got, want)
		}
	}
}
