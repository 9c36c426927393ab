package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/pgstore/pgtest"
)

// clusterEnv is the environment of a flowd node on the database at url:
// a 2 s duty lease (renewed every 500 ms) so that a takeover is seen in
// seconds, runs leased for 15 s, and SCHEDULE flows firing every second (FLOWD_TEST_TICK, a hook
// of the flowdtest build).
func clusterEnv(url, secret string) []string {
	return []string{"FLOWD_BACKEND=postgres", "FLOWD_DATABASE_URL=" + url, "FLOWD_SECRET_KEY=" + secret,
		"FLOWD_DUTY_LEASE=2s", "FLOWD_TEST_TICK=1s", "FLOWD_ALLOW_PRIVATE_NETWORKS=true",
		"FLOWD_WORKERS=4", "FLOWD_CODE_SANDBOX=false", "FLOWD_LOG_LEVEL=debug",
		// A run that A was executing when killed is taken up by B when its
		// lease (the timeout and 5 s) runs out.
		"FLOWD_RUN_TIMEOUT=10s"}
}

func newSecretKey(t testing.TB) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// logged counts the log lines of p with message msg and, when attr is
// given, that attribute ("duty":"cron").
func logged(p *proc, msg, attr string) int {
	n := 0
	for _, line := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(line, `"msg":"`+msg+`"`) && strings.Contains(line, attr) {
			n++
		}
	}
	return n
}

// TestPostgresNodes runs two flowd processes on one PostgreSQL database:
// a flow made on one is served by the other at once and its runs are read
// from either; a SCHEDULE flow fires once per tick, from the node holding
// the cron duty only; a node with another FLOWD_SECRET_KEY refuses to
// start; after kill -9 of the holder the other takes every duty over and
// serves alone.
func TestPostgresNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd processes on a PostgreSQL cluster")
	}
	url, secret := pgtest.URL(t), newSecretKey(t)
	var mu sync.Mutex
	calls := map[string]int{} // by run ID
	ext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Run string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		calls[body.Run]++
		mu.Unlock()
		w.Write([]byte(`{"ok":true}`))
	}))
	defer ext.Close()
	callsOf := func(run string) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[run]
	}

	env := clusterEnv(url, secret)
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	a := startFlowd(t, dirA, env...)
	key := initialKey(t, dirA) // the first node made the project
	testwait.Event(t, "node A to take the cron duty", func() bool { return logged(a, "cluster duty taken", `"duty":"cron"`) > 0 })
	b := startFlowd(t, dirB, env...)
	if strings.Contains(b.stdout.String(), "fsk_") {
		t.Errorf("node B made another project and key:\n%s", b.stdout)
	}

	// Another key is refused, naming the setting and never showing a key.
	other := newSecretKey(t)
	ctx, cancel := context.WithTimeout(context.Background(), testwait.Hang)
	defer cancel()
	bad := exec.CommandContext(ctx, flowdBin)
	bad.Env = append(append(bad.Environ(), clusterEnv(url, other)...), "FLOWD_ADDR="+freeAddr(t), "FLOWD_DATA_DIR="+filepath.Join(t.TempDir(), "c"))
	var badErr bytes.Buffer
	bad.Stderr = &badErr
	if err := bad.Run(); err == nil || !strings.Contains(badErr.String(), "FLOWD_SECRET_KEY") || strings.Contains(badErr.String(), other) || strings.Contains(badErr.String(), secret) {
		t.Errorf("a node with another FLOWD_SECRET_KEY: err %v, stderr:\n%s", err, badErr.String())
	}

	// A webhook flow made and enabled on A is served by B at once.
	var hook struct{ ID string }
	api(t, a, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "hook", "engine": "FLOW_BUILDER",
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"run": "{{ run.id }}"}}]}`, ext.URL), 201, &hook)
	api(t, a, key, "POST", "/api/v1/flows/"+hook.ID+"/enable", "", 200, nil)
	deliver := func(p *proc) string {
		t.Helper()
		resp, err := http.Post(p.base+"/api/v1/webhooks/"+hook.ID, "application/json", strings.NewReader(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct{ RunID string }
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || resp.StatusCode != 200 || got.RunID == "" {
			t.Fatalf("webhook on %s = %d (%v), run %q", p.base, resp.StatusCode, err, got.RunID)
		}
		return got.RunID
	}
	finished := func(reader *proc, flow, run string) {
		t.Helper()
		var r struct{ Status, Error string }
		testwait.Event(t, "run "+run+" to succeed, read from "+reader.base, func() bool {
			api(t, reader, key, "GET", "/api/v1/flows/"+flow+"/runs/"+run, "", 200, &r)
			return r.Status != "RUNNING"
		})
		if r.Status != "SUCCEEDED" || callsOf(run) != 1 {
			t.Fatalf("run %s: %s %q with %d calls, want SUCCEEDED with 1", run, r.Status, r.Error, callsOf(run))
		}
	}
	finished(a, hook.ID, deliver(b))
	finished(b, hook.ID, deliver(a))

	// A SCHEDULE flow made on B, which does not hold the cron duty: A
	// loads it at its next reload and fires it, once per tick.
	var sched struct{ ID string }
	api(t, b, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "tick", "engine": "FLOW_BUILDER",
		"trigger": {"type": "SCHEDULE", "schedule": {"cron": "* * * * *"}},
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"run": "{{ run.id }}"}}]}`, ext.URL), 201, &sched)
	api(t, b, key, "POST", "/api/v1/flows/"+sched.ID+"/enable", "", 200, nil)
	type summary struct{ ID, Status string }
	runsOf := func(p *proc) []summary {
		t.Helper()
		var page struct{ Data []summary }
		api(t, p, key, "GET", "/api/v1/flows/"+sched.ID+"/runs?limit=100", "", 200, &page)
		return page.Data
	}
	// A writes its log line after the run's commit, so a run can be read
	// from B before A has logged it: wait for both (on a loaded machine the
	// third run was read before A's third line, and a count taken then was
	// 2).
	testwait.Event(t, "three scheduled runs, each logged by node A", func() bool {
		return len(runsOf(b)) >= 3 && logged(a, "scheduled run started", "") >= 3
	})
	if n := logged(b, "scheduled run started", ""); n != 0 {
		t.Errorf("node B, not holding the cron duty, fired %d times", n)
	}

	// kill -9 of A: B takes every duty within the lease (2 s here, 20 s by
	// default), fires the schedule and serves webhooks alone.
	before := len(runsOf(b))
	killed := time.Now()
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	byA := map[string]bool{}
	for _, r := range runsOf(b) {
		byA[r.ID] = true
	}
	for _, d := range []string{"cron", "alerts", "sweep"} {
		testwait.Event(t, "node B to take the "+d+" duty", func() bool { return logged(b, "cluster duty taken", `"duty":"`+d+`"`) > 0 })
	}
	// Loose on a loaded machine: the promise is 30 s for a 20 s lease.
	if took := time.Since(killed); took > 30*time.Second {
		t.Errorf("node B took the duties %s after the kill, want within 30s", took)
	}
	// As above: B's log line follows its commit, so both are waited for.
	testwait.Event(t, "two more scheduled runs, fired and logged by B", func() bool {
		return len(runsOf(b)) >= before+2 && logged(b, "scheduled run started", "") >= 2
	})
	finished(b, hook.ID, deliver(b))
	// Every scheduled run made its call, whichever node ran it: once, but
	// for a run A was executing when it died, which B executes again.
	var ids []string
	testwait.Event(t, "the scheduled runs to finish", func() bool {
		ids = ids[:0]
		for _, r := range runsOf(b) {
			if r.Status == "RUNNING" {
				return false
			}
			ids = append(ids, r.ID)
		}
		return true
	})
	for _, id := range ids {
		if n := callsOf(id); n != 1 && (!byA[id] || n != 2) {
			t.Errorf("scheduled run %s made %d calls, want 1 (2 if A died in it)", id, n)
		}
	}
}

// TestPostgresPeopleAcrossNodes: a person invited through node A's API
// sets up their account through node B's dashboard, signs in with their
// password on B, and the session works on A; removed on A, their session
// ends on B at the next request. People live in the shared database, not
// in a node.
func TestPostgresPeopleAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd processes on a PostgreSQL cluster")
	}
	dbURL, secret := pgtest.URL(t), newSecretKey(t)
	env := clusterEnv(dbURL, secret)
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	a := startFlowd(t, dirA, env...)
	key := initialKey(t, dirA)
	b := startFlowd(t, dirB, env...)

	var inv struct{ ID, Email, SetupURL string }
	api(t, a, key, "POST", "/api/v1/users", `{"email": "Ada@Example.com", "role": "editor"}`, 201, &inv)
	i := strings.Index(inv.SetupURL, "/ui/setup?token=")
	if inv.ID == "" || i < 0 || !strings.HasPrefix(inv.SetupURL, a.base) {
		t.Fatalf("invitation %+v: want a user and a set-up link on node A", inv)
	}
	link := b.base + inv.SetupURL[i:] // the person opens it on the other node

	// browser is a client with its own cookies; both nodes are 127.0.0.1,
	// so a cookie set by one is sent to the other, as behind a load
	// balancer.
	browser := func() *http.Client {
		jar, _ := cookiejar.New(nil)
		return &http.Client{Jar: jar}
	}
	csrfRE := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	read := func(resp *http.Response, err error) (int, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	form := func(c *http.Client, page, action string, v url.Values) (int, string) {
		t.Helper()
		st, body := read(c.Get(page))
		m := csrfRE.FindStringSubmatch(body)
		if st != http.StatusOK || m == nil {
			t.Fatalf("GET %s = %d, want a form: %s", page, st, body)
		}
		v.Set("csrf", m[1])
		return read(c.PostForm(action, v))
	}
	signedIn := func(c *http.Client, p *proc, what string) {
		t.Helper()
		st, body := read(c.Get(p.base + "/ui/flows"))
		if st != http.StatusOK || !strings.Contains(body, "<h1>Flows</h1>") || !strings.Contains(body, "ada@example.com") {
			t.Fatalf("%s: GET %s/ui/flows = %d, want the flows page of ada@example.com: %s", what, p.base, st, body)
		}
	}

	setup := browser()
	pw := "correct horse battery"
	st, body := form(setup, link, b.base+"/ui/setup", url.Values{
		"token": {inv.SetupURL[i+len("/ui/setup?token="):]}, "password": {pw}, "confirm": {pw}})
	if st != http.StatusOK || !strings.Contains(body, "<h1>Flows</h1>") {
		t.Fatalf("set-up on node B = %d: %s", st, body)
	}
	signedIn(setup, a, "the session made on B, on A")

	// A password sign-in on B, with the password set through B and the
	// invitation made on A.
	ada := browser()
	st, body = form(ada, b.base+"/ui/signin", b.base+"/ui/signin", url.Values{"email": {"ada@example.com"}, "password": {pw}})
	if st != http.StatusOK || !strings.Contains(body, "<h1>Flows</h1>") {
		t.Fatalf("password sign-in on node B = %d: %s", st, body)
	}
	signedIn(ada, b, "signed in on B")
	signedIn(ada, a, "signed in on B, on A")

	// Removed through A: the session ends on B at its next request.
	api(t, a, key, "DELETE", "/api/v1/users/"+inv.ID, "", 204, nil)
	st, body = read(ada.Get(b.base + "/ui/flows"))
	if st != http.StatusOK || strings.Contains(body, "<h1>Flows</h1>") || !strings.Contains(body, `name="password"`) {
		t.Fatalf("after removal on A, GET B /ui/flows = %d, want the sign-in page: %s", st, body)
	}
}
