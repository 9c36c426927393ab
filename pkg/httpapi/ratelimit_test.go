package httpapi

import (
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestRateLimit: past its burst a project gets 429 with Retry-After, while
// another project and unauthenticated callers are unaffected.
func TestRateLimit(t *testing.T) {
	base, key := newTestServer(t)
	other := newProjectKey(t, base, automation.PlanTeam)
	srv := serve(t, NewAPI(base.svc, nil, WithRateLimit(RateLimit{PerSecond: 0.5, Burst: 3})))

	for i := range 3 {
		if r := call(t, srv, "GET", "/api/v1/flows", key, ""); r.status != 200 {
			t.Fatalf("request %d within the burst = %d", i+1, r.status)
		}
	}
	r := call(t, srv, "GET", "/api/v1/flows", key, "")
	r.wantError(t, 429, "RATE_LIMITED")
	if got := r.header.Get("Retry-After"); got != "2" && got != "1" {
		t.Fatalf("Retry-After = %q, want the seconds until a token (about 2 at 0.5/s)", got)
	}
	if r := call(t, srv, "GET", "/api/v1/flows", other, ""); r.status != 200 {
		t.Fatalf("another project = %d, want 200: buckets are per project", r.status)
	}
	call(t, srv, "GET", "/api/v1/flows", "fsk_wrong", "").wantError(t, 401, "UNAUTHORIZED")
	if r := call(t, srv, "GET", "/api/v1/openapi.json", "", ""); r.status != 200 {
		t.Fatalf("the public document is rate limited: %d", r.status)
	}
}

func TestLimiterRefillsAndForgets(t *testing.T) {
	l := &limiter{rl: RateLimit{PerSecond: 10, Burst: 1}, buckets: map[string]*bucket{}}
	t0 := time.Now()
	if ok, _ := l.allow("p", t0); !ok {
		t.Fatal("first request refused")
	}
	if ok, wait := l.allow("p", t0); ok || wait <= 0 || wait > 100*time.Millisecond {
		t.Fatalf("second at once = %v, wait %v; want refused for up to 100ms", ok, wait)
	}
	if ok, _ := l.allow("p", t0.Add(100*time.Millisecond)); !ok {
		t.Fatal("refused after the refill interval")
	}
	// Idle buckets are swept on a later call.
	for i := range 1100 {
		l.allow("q", t0.Add(idleBucket+time.Duration(i+1)*time.Second))
	}
	if _, ok := l.buckets["p"]; ok {
		t.Fatal("an idle bucket was kept")
	}
}
