package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestZonedHostThroughFlowd: a connection fenced to *.example.com, in a
// flow whose URL comes from an anonymous webhook's body, is not sent to
// http://[::1%25.example.com]/ (a host string ending with ".example.com"
// whose dial goes to ::1): the run fails naming the IPv6 zone and the
// loopback listener gets nothing, the token least of all. Private networks
// are allowed, so that only the fence stands in the way.
func TestZonedHostThroughFlowd(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	var hits atomic.Int64
	var sawAuth atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		sawAuth.Store(r.Header.Get("Authorization"))
		w.Write([]byte(`{"ok":true}`))
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true")
	key := initialKey(t, dir)
	const token = "sk_fenced_zone_through_flowd"
	var c struct{ ID string }
	api(t, p, key, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "fenced", "app": "svc", "type": "API_KEY",
		"value": {"apiKey": %q}, "allowedHosts": ["*.example.com"]}`, token), 201, &c)
	var f struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "zoned", "engine": "FLOW_BUILDER",
		"steps": [{"name": "call", "type": "HTTP", "connectionId": %q, "url": "{{ trigger.body.url }}"}]}`, c.ID), 201, &f)
	api(t, p, key, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)

	for _, u := range []string{
		"http://[::1%25.example.com]:" + port + "/",
		"http://[::ffff:127.0.0.1%25x.example.com]:" + port + "/",
	} {
		_, r := postHook(t, p, key, f.ID, "/api/v1/webhooks/"+f.ID, fmt.Sprintf(`{"url": %q}`, u), nil)
		if r.Status != "FAILED" || !strings.Contains(r.Error, "IPv6 zone") {
			t.Errorf("%s: run %s %q, want FAILED naming the IPv6 zone", u, r.Status, r.Error)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the loopback listener got %d requests (Authorization %v): the fence let the token out", n, sawAuth.Load())
	}
}
