package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
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

// TestSecretFormsAndChildRunsMasked: a secret variable is masked at every
// boundary it crosses, through flowd's API. An HTTP step sends it in a
// query string and a header to a service that echoes the raw query (the
// URL-escaped form) and the header's base64 (standard and URL alphabets):
// the recorded output shows none of those forms. A parent passes it to a
// child with CALL_FLOW: the child computes with the value, yet its run
// record (trigger body, outputs, answer) and its parent's show it masked,
// and no answer shows the list of values masked.
func TestSecretFormsAndChildRunsMasked(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	const secret = "s3cr3t tok/en+&=4711"
	forms := map[string]string{
		"raw":           secret,
		"query-escaped": url.QueryEscape(secret),
		"path-escaped":  url.PathEscape(secret),
		"base64":        base64.StdEncoding.EncodeToString([]byte(secret)),
		"base64url":     base64.URLEncoding.EncodeToString([]byte(secret)),
	}
	for name, f := range maps.Clone(forms) {
		// As JSON writes it, & < > escaped: the API's answers do.
		if j, _ := json.Marshal(f); string(j[1:len(j)-1]) != f {
			forms[name+" in JSON"] = string(j[1 : len(j)-1])
		}
	}
	var seen atomic.Value
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := r.Header.Get("X-Token")
		seen.Store(tok)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"rawQuery": r.URL.RawQuery, "path": url.PathEscape(tok),
			"b64": base64.StdEncoding.EncodeToString([]byte(tok)), "b64url": base64.URLEncoding.EncodeToString([]byte(tok))})
	}))
	t.Cleanup(echo.Close)

	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	api(t, p, key, "PUT", "/api/v1/variables/TOKEN", fmt.Sprintf(`{"value": %q, "secret": true}`, secret), 200, nil)
	leaks := func(what, raw string) {
		t.Helper()
		for name, f := range forms {
			if strings.Contains(raw, f) {
				t.Errorf("%s shows the secret's %s form %q: %s", what, name, f, raw)
			}
		}
		if strings.Contains(raw, `"secrets"`) {
			t.Errorf("%s shows the list of values masked: %s", what, raw)
		}
	}

	t.Run("escaped and base64 forms", func(t *testing.T) {
		f := createEnabled(t, p, key, fmt.Sprintf(`{"name": "echo", "engine": "FLOW_BUILDER", "steps": [
			{"name": "call", "type": "HTTP", "url": %q, "query": {"k": "{{ vars.TOKEN }}"}, "headers": {"X-Token": "{{ vars.TOKEN }}"}}]}`, echo.URL+"/e"))
		runID := trigger(t, p, f, `{}`)
		if r := finalRun(t, p, key, f, runID); r.Status != "SUCCEEDED" {
			t.Fatalf("run %s %q", r.Status, r.Error)
		}
		if got, _ := seen.Load().(string); got != secret {
			t.Fatalf("the service got %q, want the secret itself", got)
		}
		raw := apiRaw(t, p, key, "GET", "/api/v1/flows/"+f+"/runs/"+runID, "", 200, nil)
		leaks("the run record", raw)
		if strings.Count(raw, "********") < 4 {
			t.Errorf("the run record masks fewer than the 4 echoed forms: %s", raw)
		}
	})

	t.Run("CALL_FLOW child", func(t *testing.T) {
		// The child never mentions vars: it masks what its caller gave it.
		child := createEnabled(t, p, key, `{"name": "child", "engine": "FLOW_BUILDER", "steps": [
			{"name": "use", "type": "SET", "values": {"len": "{{ len(trigger.body.token) }}", "echo": "{{ trigger.body.token }}", "note": "{{ trigger.body.note }}"}},
			{"name": "answer", "type": "RESPOND", "body": {"t": "{{ trigger.body.token }}", "len": "{{ steps.use.len }}"}}]}`)
		parent := createEnabled(t, p, key, fmt.Sprintf(`{"name": "parent", "engine": "FLOW_BUILDER", "steps": [
			{"name": "call", "type": "CALL_FLOW", "flowId": %q, "input": {"token": "{{ vars.TOKEN }}", "note": "plain text"}}]}`, child))
		runID := trigger(t, p, parent, `{}`)
		if r := finalRun(t, p, key, parent, runID); r.Status != "SUCCEEDED" {
			t.Fatalf("parent run %s %q", r.Status, r.Error)
		}
		leaks("the parent's run record", apiRaw(t, p, key, "GET", "/api/v1/flows/"+parent+"/runs/"+runID, "", 200, nil))
		kids := runsOf(t, p, key, child)
		if len(kids) != 1 {
			t.Fatalf("child flow has %d runs, want 1", len(kids))
		}
		var kid callRun
		raw := apiRaw(t, p, key, "GET", "/api/v1/flows/"+child+"/runs/"+kids[0].ID, "", 200, &kid)
		leaks("the child's run record", raw)
		if string(kid.Trigger.Body) != `{"note":"plain text","token":"********"}` {
			t.Errorf("child's trigger.body = %s, want the token masked and the note as is", kid.Trigger.Body)
		}
		if len(kid.Steps) < 1 || !strings.Contains(string(kid.Steps[0].Output), fmt.Sprintf(`"len":%d`, len(secret))) {
			t.Errorf("child's steps %+v: want it to have computed with the value (len %d)", kid.Steps, len(secret))
		}
		var search struct{ Data []json.RawMessage }
		rawList := apiRaw(t, p, key, "GET", "/api/v1/runs?flowId="+child, "", 200, &search)
		leaks("the run search", rawList)
	})
}
