package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"flowservice/internal/testwait"
)

// ctlRun is one flowctl invocation's outcome.
type ctlRun struct {
	stdout, stderr string
	code           int
}

// ctl runs flowctl against a server, in an empty working directory and with
// no FLOWCTL_* or FLOWD_DATA_DIR from the test's environment, plus env.
type ctl struct {
	t   *testing.T
	env []string
	dir string
	all []ctlRun // every invocation, to check what was ever printed
}

func newCtl(t *testing.T, env ...string) *ctl {
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FLOWCTL_") && !strings.HasPrefix(kv, "FLOWD_") {
			base = append(base, kv)
		}
	}
	return &ctl{t: t, env: append(base, env...), dir: t.TempDir()}
}

func (c *ctl) run(stdin string, args ...string) ctlRun {
	c.t.Helper()
	cmd := exec.Command(flowctlBin, args...)
	cmd.Env, cmd.Dir = c.env, c.dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := ctlRun{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("flowctl %v: %v", args, err)
	}
	c.all = append(c.all, r)
	return r
}

// ok runs flowctl and fails the test unless it exits 0 with an empty stderr.
func (c *ctl) ok(stdin string, args ...string) string {
	c.t.Helper()
	r := c.run(stdin, args...)
	if r.code != 0 || r.stderr != "" {
		c.t.Fatalf("flowctl %v: exit %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// okJSON runs flowctl -o json and decodes its stdout into v.
func (c *ctl) okJSON(v any, args ...string) string {
	c.t.Helper()
	out := c.ok("", append([]string{"-o", "json"}, args...)...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("flowctl -o json %v printed %q: %v", args, out, err)
	}
	if !strings.HasPrefix(out, "{\n  \"") {
		c.t.Errorf("flowctl -o json %v is not indented JSON:\n%s", args, out)
	}
	return out
}

// fails runs flowctl, wants a non-zero exit and returns stderr.
func (c *ctl) fails(args ...string) string {
	c.t.Helper()
	r := c.run("", args...)
	if r.code == 0 {
		c.t.Fatalf("flowctl %v exited 0, want an error\nstdout:\n%s", args, r.stdout)
	}
	if r.stdout != "" {
		c.t.Errorf("flowctl %v failed but printed on stdout:\n%s", args, r.stdout)
	}
	return r.stderr
}

// tableRow reports whether the table has a line whose fields, split on
// runs of spaces, start with want.
func tableRow(table string, want ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
		if len(f) >= len(want) && strings.Join(f[:len(want)], "\x00") == strings.Join(want, "\x00") {
			return true
		}
	}
	return false
}

type runPage struct {
	Data []struct {
		ID, Status string
	}
	Cursor  *string
	HasMore bool
}

// waitRuns polls runs list until n runs of the flow have finished.
func (c *ctl) waitRuns(flowID string, n int) runPage {
	c.t.Helper()
	var p runPage
	testwait.For(c.t, testwait.Hang, "finished runs of "+flowID, func() bool {
		p = runPage{}
		c.okJSON(&p, "runs", "list", flowID, "--all")
		done := 0
		for _, r := range p.Data {
			if r.Status != "RUNNING" {
				done++
			}
		}
		return done >= n
	})
	return p
}

// TestFlowctlAgainstServer drives flows, runs and connections through a
// running flowd's API with flowctl, as a user would from a terminal.
func TestFlowctlAgainstServer(t *testing.T) {
	const secret = "sk-from-stdin-0f9e8d7c" // the external service's key
	var mu sync.Mutex
	var gotAuth []string
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotAuth = append(gotAuth, r.Header.Get("Authorization"))
		mu.Unlock()
		if r.URL.Path == "/fail" {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"sent":true}`)
	}))
	defer fake.Close()

	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true")
	raw, err := os.ReadFile(filepath.Join(dir, "initial-api-key"))
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(raw))

	// The URL from FLOWCTL_URL, the key from --data-dir's initial-api-key.
	c := newCtl(t, "FLOWCTL_URL="+p.base)
	dd := []string{"--data-dir", dir}
	at := func(args ...string) []string { return append(append([]string{}, dd...), args...) }

	// connections create reads the key from stdin; the server uses it.
	out := c.ok(secret+"\n", at("connections", "create", "--name", "Chat bot", "--app", "chat", "--api-key-stdin")...)
	conID := regexp.MustCompile(`con_[a-z0-9]+`).FindString(out)
	if conID == "" || !tableRow(out, conID, "Chat bot", "chat", "API_KEY", "ACTIVE") {
		t.Fatalf("connections create printed:\n%s", out)
	}
	if r := c.run("", at("connections", "create", "--name", "x", "--app", "chat")...); r.code == 0 || !strings.Contains(r.stderr, "--api-key-stdin") {
		t.Errorf("connections create without --api-key-stdin: exit %d, stderr %q", r.code, r.stderr)
	}
	var cons struct{ Data []struct{ ID, Status string } }
	c.okJSON(&cons, at("connections", "list")...)
	if len(cons.Data) != 1 || cons.Data[0].ID != conID {
		t.Fatalf("connections list -o json: %+v, want %s", cons.Data, conID)
	}
	if out := c.ok("", at("connections", "list")...); !tableRow(out, "ID", "NAME", "APP", "TYPE", "STATUS", "CREATED") || !tableRow(out, conID, "Chat bot") {
		t.Errorf("connections list:\n%s", out)
	}

	// From here the key comes from FLOWCTL_API_KEY.
	c.env = append(c.env, "FLOWCTL_API_KEY="+key)

	defFile := filepath.Join(t.TempDir(), "intake.json")
	def := `{"name": "Form intake", "engine": "FLOW_BUILDER", "description": "Leads to chat", "steps": [
	  {"name": "submitted", "type": "FILTER", "condition": "trigger.body.event == \"form.submitted\""},
	  {"name": "call", "type": "HTTP", "connectionId": "` + conID + `", "method": "POST", "url": "` + fake.URL + `/ok",
	   "body": {"email": "{{ trigger.body.email }}"}}]}`
	if err := os.WriteFile(defFile, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	out = c.ok("", "flows", "create", "-f", defFile)
	flowID := regexp.MustCompile(`(?m)^ID:\s+(flw_[a-z0-9]+)$`).FindStringSubmatch(out)
	if flowID == nil || !regexp.MustCompile(`(?m)^Status:\s+INACTIVE$`).MatchString(out) ||
		!tableRow(out, "1", "submitted", "FILTER") || !tableRow(out, "2", "call", "HTTP") {
		t.Fatalf("flows create printed:\n%s", out)
	}
	id := flowID[1]

	// A second flow from stdin, whose HTTP step fails.
	failing := strings.ReplaceAll(strings.ReplaceAll(def, "/ok", "/fail"), "Form intake", "Failing")
	var f2 struct{ ID, Status string }
	if err := json.Unmarshal([]byte(c.ok(failing, "-o", "json", "flows", "create", "-f", "-")), &f2); err != nil || f2.Status != "INACTIVE" {
		t.Fatalf("flows create -f - -o json: %+v, %v", f2, err)
	}

	out = c.ok("", "flows", "list")
	if !tableRow(out, "ID", "NAME", "STATUS", "ENGINE", "TRIGGER", "RUNS", "SUCCESS", "LAST RUN") ||
		!tableRow(out, id, "Form intake", "INACTIVE", "FLOW_BUILDER", "WEBHOOK", "0", "-", "-") ||
		!tableRow(out, f2.ID, "Failing", "INACTIVE") {
		t.Errorf("flows list:\n%s", out)
	}
	r := c.run("", "flows", "list", "--limit", "1")
	if r.code != 0 || !strings.Contains(r.stdout, id) || strings.Contains(r.stdout, f2.ID) || !strings.Contains(r.stderr, "--all") {
		t.Errorf("flows list --limit 1: exit %d\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	var fl struct {
		Data    []struct{ ID string }
		HasMore bool
	}
	c.okJSON(&fl, "flows", "list", "--limit", "1", "--all")
	if len(fl.Data) != 2 || fl.Data[0].ID != id || fl.Data[1].ID != f2.ID || fl.HasMore {
		t.Errorf("flows list --limit 1 --all -o json: %+v", fl)
	}
	c.okJSON(&fl, "flows", "list", "--limit", "1")
	if len(fl.Data) != 1 || !fl.HasMore {
		t.Errorf("flows list --limit 1 -o json: %+v, want the API's first page", fl)
	}

	out = c.ok("", "flows", "enable", id)
	if !regexp.MustCompile(`(?m)^Status:\s+ACTIVE$`).MatchString(out) {
		t.Fatalf("flows enable:\n%s", out)
	}
	c.okJSON(&fl, "flows", "list", "--status", "active")
	if len(fl.Data) != 1 || fl.Data[0].ID != id {
		t.Errorf("flows list --status active: %+v", fl.Data)
	}

	hookURL := p.base + "/api/v1/webhooks/" + id
	if out := c.ok("", "flows", "webhook", id); !tableRow(out, "FLOW", "METHOD", "URL", "ENABLED") || !tableRow(out, id, "POST", hookURL, "true") {
		t.Errorf("flows webhook:\n%s", out)
	}
	var hook struct {
		WebhookURL string
		Method     string
	}
	c.okJSON(&hook, "flows", "webhook", id)
	if hook.WebhookURL != hookURL || hook.Method != "POST" {
		t.Fatalf("flows webhook -o json: %+v", hook)
	}
	post := func(u string) int {
		t.Helper()
		resp, err := http.Post(u, "application/json", strings.NewReader(`{"event": "form.submitted", "email": "ada@example.com"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(hook.WebhookURL); got != 200 {
		t.Fatalf("POST %s = %d", hook.WebhookURL, got)
	}

	runs := c.waitRuns(id, 1)
	if len(runs.Data) != 1 || runs.Data[0].Status != "SUCCEEDED" {
		t.Fatalf("runs: %+v, want one SUCCEEDED", runs.Data)
	}
	runID := runs.Data[0].ID
	if out := c.ok("", "runs", "list", id); !tableRow(out, "ID", "STATUS", "WAITING FOR", "CREATED", "DURATION", "ATTEMPTS", "ERROR") || !tableRow(out, runID, "SUCCEEDED") {
		t.Errorf("runs list:\n%s", out)
	}
	out = c.ok("", "runs", "get", id, runID)
	if !regexp.MustCompile(`(?m)^Status:\s+SUCCEEDED$`).MatchString(out) ||
		!tableRow(out, "STEP", "TYPE", "STATUS", "ATTEMPTS", "DURATION", "ERROR") ||
		!regexp.MustCompile(`(?m)^submitted\s+FILTER\s+SUCCEEDED\s+1\s+\d+(\.\d+)?[µnm]?s\s+-$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^call\s+HTTP\s+SUCCEEDED\s+1\s+\d+(\.\d+)?[µnm]?s\s+-$`).MatchString(out) {
		t.Errorf("runs get:\n%s", out)
	}
	var run struct {
		ID, Status string
		Steps      []struct{ Name, Status string }
	}
	c.okJSON(&run, "runs", "get", id, runID)
	if run.ID != runID || len(run.Steps) != 2 || run.Steps[1].Status != "SUCCEEDED" {
		t.Errorf("runs get -o json: %+v", run)
	}
	mu.Lock()
	if len(gotAuth) != 1 || gotAuth[0] != "Bearer "+secret {
		t.Errorf("the external service got Authorization %q, want the key given on stdin", gotAuth)
	}
	mu.Unlock()

	out = c.ok("", "runs", "retry", id, runID)
	retried := regexp.MustCompile(`(?m)^ID:\s+(run_[a-z0-9]+)$`).FindStringSubmatch(out)
	if retried == nil || retried[1] == runID || !regexp.MustCompile(`(?m)^Status:\s+RUNNING$`).MatchString(out) {
		t.Fatalf("runs retry:\n%s", out)
	}
	c.waitRuns(id, 2)
	var ok runPage
	c.okJSON(&ok, "runs", "list", id, "--status", "SUCCEEDED")
	if len(ok.Data) != 2 || ok.Data[0].ID != retried[1] {
		t.Errorf("runs list --status SUCCEEDED: %+v, want the retry first, then %s", ok.Data, runID)
	}

	// A failed step shows its error in the table.
	c.ok("", "flows", "enable", f2.ID)
	if got := post(p.base + "/api/v1/webhooks/" + f2.ID); got != 200 {
		t.Fatalf("POST to the failing flow = %d", got)
	}
	fr := c.waitRuns(f2.ID, 1)
	if fr.Data[0].Status != "FAILED" {
		t.Fatalf("failing flow's run: %+v", fr.Data)
	}
	out = c.ok("", "runs", "get", f2.ID, fr.Data[0].ID)
	if !regexp.MustCompile(`(?m)^call\s+HTTP\s+FAILED\s+1\s+\d+(\.\d+)?[µnm]?s\s+\S.*400`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^Error:\s+\S`).MatchString(out) || strings.Contains(out, "Error:    -") {
		t.Errorf("runs get of a failed run:\n%s", out)
	}
	if out := c.ok("", "runs", "list", f2.ID); !tableRow(out, fr.Data[0].ID, "FAILED") {
		t.Errorf("runs list of a failed run:\n%s", out)
	}
	// Retry from the failed step: a new run that names the run it resumed.
	out = c.ok("", "runs", "retry", f2.ID, fr.Data[0].ID, "--from", "failed_step")
	if !regexp.MustCompile(`(?m)^Resumed from:\s+` + fr.Data[0].ID + `$`).MatchString(out) {
		t.Errorf("runs retry --from failed_step:\n%s", out)
	}
	if stderr := c.fails("runs", "retry", f2.ID, fr.Data[0].ID, "--from", "MIDDLE"); !strings.Contains(stderr, "START") {
		t.Errorf("runs retry --from MIDDLE: %s", stderr)
	}

	out = c.ok("", "flows", "disable", id)
	if !regexp.MustCompile(`(?m)^Status:\s+INACTIVE$`).MatchString(out) {
		t.Errorf("flows disable:\n%s", out)
	}
	if got := post(hookURL); got != 404 {
		t.Errorf("POST to a disabled flow's webhook = %d, want 404", got)
	}
	if out := c.ok("", "flows", "delete", id); out != "deleted "+id+"\n" {
		t.Errorf("flows delete printed %q", out)
	}

	// Errors: the envelope on stderr, exit 1.
	stderr := c.fails("flows", "get", id)
	if !regexp.MustCompile(`^flowctl: FLOW_NOT_FOUND: flow "` + id + `" not found \(request [0-9a-f]+\)\n$`).MatchString(stderr) {
		t.Errorf("flows get of a deleted flow: stderr %q", stderr)
	}
	if stderr := c.fails("runs", "list", id); !strings.HasPrefix(stderr, "flowctl: FLOW_NOT_FOUND: ") {
		t.Errorf("runs list of a deleted flow: stderr %q", stderr)
	}
	badKey := "fsk_thisisnotakey0123456789"
	stderr = c.fails("--api-key", badKey, "flows", "list")
	if !regexp.MustCompile(`^flowctl: UNAUTHORIZED: .+ \(request [0-9a-f]+\)\n$`).MatchString(stderr) || strings.Contains(stderr, badKey) {
		t.Errorf("bad key: stderr %q", stderr)
	}
	bad := newCtl(t, "FLOWCTL_URL="+p.base, "FLOWCTL_API_KEY="+badKey)
	if stderr := bad.fails("flows", "list"); !strings.HasPrefix(stderr, "flowctl: UNAUTHORIZED: ") || strings.Contains(stderr, badKey) {
		t.Errorf("bad FLOWCTL_API_KEY: stderr %q", stderr)
	}
	if stderr := newCtl(t, "FLOWCTL_URL="+p.base).fails("flows", "list"); !strings.Contains(stderr, "no API key") {
		t.Errorf("no key anywhere: stderr %q", stderr)
	}
	down := "http://" + freeAddr(t)
	stderr = c.fails("--url", down, "flows", "list")
	if !strings.HasPrefix(stderr, "flowctl: cannot reach flowd at "+down+": ") || !strings.Contains(stderr, "connection refused") || strings.Contains(stderr, key) {
		t.Errorf("server down: stderr %q", stderr)
	}
	if stderr := c.fails("flows", "list", "--limit", "0"); !strings.HasPrefix(stderr, "flowctl: INVALID_PARAMETER: ") {
		t.Errorf("--limit 0: stderr %q", stderr)
	}
	if stderr := c.fails("flows", "create", "-f", "-"); !strings.Contains(stderr, "not valid JSON") {
		t.Errorf("empty definition: stderr %q", stderr)
	}

	if out := c.ok("", "connections", "delete", conID); out != "deleted "+conID+"\n" {
		t.Errorf("connections delete printed %q", out)
	}
	if out := c.ok("", "-o", "json", "flows", "delete", f2.ID); out != "" {
		t.Errorf("flows delete -o json printed %q", out)
	}

	// Neither key was ever printed: not by flowctl, not by flowd.
	for i, r := range append(c.all, ctlRun{stdout: p.stdout.String(), stderr: p.stderr.String()}) {
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("output %d shows the connection's key:\n%s\n%s", i, r.stdout, r.stderr)
		}
	}
	for i, r := range c.all {
		if strings.Contains(r.stdout+r.stderr, key) {
			t.Errorf("flowctl output %d shows the API key:\n%s\n%s", i, r.stdout, r.stderr)
		}
	}
}
