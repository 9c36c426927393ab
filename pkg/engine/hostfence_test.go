package engine

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"flowservice/pkg/automation"
)

// loopback6 is a service on [::1] that counts what it gets; the test is
// skipped where the machine has no IPv6 loopback.
func loopback6(t *testing.T) (port string, hits *atomic.Int64, auth *atomic.Value) {
	t.Helper()
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	hits, auth = new(atomic.Int64), new(atomic.Value)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		auth.Store(r.Header.Get("Authorization"))
		w.Write([]byte(`{"ok":true}`))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ = net.SplitHostPort(ln.Addr().String())
	return port, hits, auth
}

// TestFencedConnectionRefusesZonedHost: a connection fenced to
// *.example.com is not sent to http://[::1%25.example.com]/, whose host
// string ends with ".example.com" but whose dial goes to ::1. The step
// fails naming the zone, and nothing reaches the loopback listener, even
// with private networks allowed (so that only the fence stands between).
// A redirect to such a host is refused the same way.
func TestFencedConnectionRefusesZonedHost(t *testing.T) {
	const key = "sk_fenced_zone_4711"
	port, hits, auth := loopback6(t)
	creds := newCredentials()
	creds.add("con_1", key, "", nil)
	c := creds.conns["con_1"]
	c.AllowedHosts = []string{"*.example.com"}
	creds.conns["con_1"] = c
	e := newEngine(t, creds, true)

	for _, u := range []string{
		"http://[::1%25.example.com]:" + port + "/",
		"http://[::ffff:127.0.0.1%25x.example.com]:" + port + "/",
	} {
		f := flowOf(automation.Step{Name: "call", Type: automation.StepHTTP, ConnectionID: "con_1", URL: u})
		r := e.Execute(context.Background(), f, runOf(`{}`)).Run
		if r.Status != automation.RunFailed || !strings.Contains(r.Error, "IPv6 zone") {
			t.Errorf("%s: run %s %q, want FAILED naming the IPv6 zone", u, r.Status, r.Error)
		}
		if strings.Contains(r.Error, key) {
			t.Errorf("the error shows the key: %q", r.Error)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback listener got %d requests (Authorization %v), want none", n, auth.Load())
	}

	// Unfenced, the same listener is reachable by its plain address: the
	// listener works, so the zero above is the fence's doing.
	ext := newExternal(t)
	f := flowOf(automation.Step{Name: "call", Type: automation.StepHTTP, URL: "http://[::1]:" + port + "/"})
	if r := e.Execute(context.Background(), f, runOf(`{}`)).Run; r.Status != automation.RunSucceeded || hits.Load() != 1 {
		t.Fatalf("plain [::1] = %s %q, %d hits; want SUCCEEDED and 1", r.Status, r.Error, hits.Load())
	}
	// A redirect to a zoned host fails the step without following it.
	f = flowOf(automation.Step{Name: "call", Type: automation.StepHTTP,
		URL: ext.URL + "/to?url=" + "http://%5B::1%2525.example.com%5D:" + port + "/"})
	if r := e.Execute(context.Background(), f, runOf(`{}`)).Run; r.Status != automation.RunFailed || !strings.Contains(r.Error, "redirected") ||
		!strings.Contains(r.Error, "IPv6 zone") {
		t.Errorf("redirect to a zoned host = %s %q, want FAILED naming the zone", r.Status, r.Error)
	}
	if hits.Load() != 1 {
		t.Errorf("the redirect reached the loopback listener (%d hits)", hits.Load())
	}
}
