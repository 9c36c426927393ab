package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// received is one request the fake external service got.
type received struct {
	Path, Auth, Token string
	Body              map[string]any
}

// recordingService is a fake external service that keeps what it gets.
func recordingService(t *testing.T) (*httptest.Server, func() []received) {
	var mu sync.Mutex
	var got []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		rec := received{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Token: r.Header.Get("X-Token")}
		_ = json.Unmarshal(raw, &rec.Body)
		mu.Lock()
		got = append(got, rec)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"sent":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// environment is one installation for the test: a flowd, flowctl on it,
// its key, and the ID of its connection named "Chat".
type environment struct {
	p    *proc
	ctl  *ctl
	key  string
	chat string
}

// newEnvironment starts a flowd with a "Chat" connection holding apiKey and
// the variables given (NAME=value; secret when the name ends in _SECRET).
func newEnvironment(t *testing.T, apiKey string, vars map[string]string) *environment {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	e := &environment{p: p, key: key, ctl: newCtl(t, "FLOWCTL_URL="+p.base, "FLOWCTL_API_KEY="+key)}
	out := e.ctl.ok(apiKey+"\n", "connections", "create", "--name", "Chat", "--app", "chat", "--api-key-stdin")
	e.chat = regexp.MustCompile(`con_[a-z0-9]+`).FindString(out)
	for name, value := range vars {
		args := []string{"variables", "set", name}
		if strings.HasSuffix(name, "_SECRET") {
			args = append(args, "--secret")
		}
		e.ctl.ok(value+"\n", args...) // from stdin, as a CI job would pass a secret
	}
	return e
}

// flowIDs maps the installation's flow names to their IDs.
func (e *environment) flowIDs(t *testing.T) map[string]string {
	t.Helper()
	var l struct {
		Data []struct{ ID, Name, Status string }
	}
	e.ctl.okJSON(&l, "flows", "list", "--all")
	out := map[string]string{}
	for _, f := range l.Data {
		out[f.Name] = f.ID
	}
	return out
}

// TestExportApplyToAnotherInstallation is the environments workflow end to
// end: the flows of one flowd are exported to a directory and applied to a
// second, empty flowd whose connection and variables differ; there they
// run the same, against that installation's values. Applying again
// changes nothing; --prune removes only what apply made.
func TestExportApplyToAnotherInstallation(t *testing.T) {
	ext, got := recordingService(t)
	dev := newEnvironment(t, "key-dev-1111", map[string]string{
		"BASE_URL": ext.URL + "/dev", "GREETING": "hello from dev", "TOKEN_SECRET": "tok-dev-2222", "HOOK_SECRET": "hook-dev-3333"})
	prod := newEnvironment(t, "key-prod-4444", map[string]string{
		"BASE_URL": ext.URL + "/prod", "GREETING": "hello from prod", "TOKEN_SECRET": "tok-prod-5555", "HOOK_SECRET": "hook-prod-6666"})
	if dev.chat == prod.chat || dev.chat == "" {
		t.Fatalf("connection IDs %q and %q: want two different ones", dev.chat, prod.chat)
	}

	// On dev: a flow builder flow that reads variables in a template and in
	// CODE, and calls the service through the connection by ID; a workflow
	// builder flow whose webhook authentication is a secret variable.
	var notify, hook struct{ ID string }
	api(t, dev.p, dev.key, "POST", "/api/v1/flows", `{"name": "Notify", "engine": "FLOW_BUILDER", "description": "tell chat", "steps": [
		{"name": "text", "type": "CODE", "code": "return {text: vars.GREETING + ', ' + trigger.body.who}"},
		{"name": "send", "type": "HTTP", "connectionId": "`+dev.chat+`", "method": "POST", "url": "{{ vars.BASE_URL }}/messages",
		 "headers": {"X-Token": "{{ vars.TOKEN_SECRET }}"}, "body": {"text": "{{ steps.text.text }}"}}]}`, 201, &notify)
	api(t, dev.p, dev.key, "POST", "/api/v1/flows", `{"name": "Orders", "engine": "WORKFLOW_BUILDER", "trigger": {"type": "WEBHOOK",
		"webhook": {"httpMethod": "POST", "path": "orders", "responseMode": "ON_COMPLETION",
		"authentication": {"type": "HEADER", "name": "X-Hook-Token", "value": "{{ vars.HOOK_SECRET }}"}}},
		"steps": [{"name": "ack", "type": "RESPOND", "statusCode": 200, "body": {"order": "{{ trigger.body.id }}", "env": "{{ vars.GREETING }}"}}]}`, 201, &hook)

	runBoth := func(e *environment, hookToken string) (flowRun, string) {
		t.Helper()
		ids := e.flowIDs(t)
		for _, id := range []string{ids["Notify"], ids["Orders"]} {
			api(t, e.p, e.key, "POST", "/api/v1/flows/"+id+"/enable", "", 200, nil)
		}
		_, run := postHook(t, e.p, e.key, ids["Notify"], "/api/v1/webhooks/"+ids["Notify"], `{"who": "ada"}`, nil)
		req, _ := http.NewRequest("POST", e.p.base+"/webhook/orders", strings.NewReader(`{"id": "o-7"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Hook-Token", hookToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("orders webhook = %d %s", resp.StatusCode, answer)
		}
		return run, strings.TrimSpace(string(answer))
	}
	devRun, devAnswer := runBoth(dev, "hook-dev-3333")
	if devRun.Status != "SUCCEEDED" || devAnswer != `{"env":"hello from dev","order":"o-7"}` {
		t.Fatalf("dev: run %s %q, orders answered %s", devRun.Status, devRun.Error, devAnswer)
	}

	// Export every flow of dev into a directory, as a repository holds them.
	repo := t.TempDir()
	dev.ctl.ok("", "export", "--all", "-d", repo)
	files, _ := filepath.Glob(filepath.Join(repo, "*.flow.json"))
	if len(files) != 2 {
		t.Fatalf("export --all wrote %v", files)
	}
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		for _, leak := range []string{dev.chat, "key-dev-1111", "tok-dev-2222", "hook-dev-3333", ext.URL, notify.ID, hook.ID} {
			if strings.Contains(string(raw), leak) {
				t.Errorf("%s holds %q, which belongs to the dev installation:\n%s", f, leak, raw)
			}
		}
	}

	// The plan on the empty prod: two creates; --dry-run exits 2.
	r := prod.ctl.run("", "apply", "-f", repo, "--dry-run")
	if r.code != 2 || !strings.Contains(r.stdout, "+ create Notify") || !strings.Contains(r.stdout, "+ create Orders") || r.stderr != "" {
		t.Fatalf("apply --dry-run on an empty server: exit %d\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if ids := prod.flowIDs(t); len(ids) != 0 {
		t.Fatalf("--dry-run changed the server: %v", ids)
	}
	out := prod.ctl.ok("", "apply", "-f", repo)
	if !strings.Contains(out, "applied: 2 change(s), 0 unchanged") {
		t.Fatalf("apply printed:\n%s", out)
	}

	// Applying again changes nothing, and says so.
	for range 2 {
		r = prod.ctl.run("", "apply", "-f", repo, "--dry-run")
		if r.code != 0 || !strings.Contains(r.stdout, "= unchanged Notify") || !strings.Contains(r.stdout, "= unchanged Orders") {
			t.Fatalf("apply --dry-run after apply: exit %d\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		if out := prod.ctl.ok("", "apply", "-f", repo); !strings.Contains(out, "applied: 0 change(s), 2 unchanged") {
			t.Fatalf("second apply printed:\n%s", out)
		}
	}

	// On prod the flows run the same, with prod's connection and values.
	before := len(got())
	prodRun, prodAnswer := runBoth(prod, "hook-prod-6666")
	if prodRun.Status != "SUCCEEDED" || prodAnswer != `{"env":"hello from prod","order":"o-7"}` {
		t.Fatalf("prod: run %s %q, orders answered %s", prodRun.Status, prodRun.Error, prodAnswer)
	}
	calls := got()
	if len(calls) != before+1 || before != 1 {
		t.Fatalf("the service got %d calls, want one from each installation: %+v", len(calls), calls)
	}
	wantDev := received{Path: "/dev/messages", Auth: "Bearer key-dev-1111", Token: "tok-dev-2222", Body: map[string]any{"text": "hello from dev, ada"}}
	wantProd := received{Path: "/prod/messages", Auth: "Bearer key-prod-4444", Token: "tok-prod-5555", Body: map[string]any{"text": "hello from prod, ada"}}
	for i, want := range []received{wantDev, wantProd} {
		if g := calls[i]; g.Path != want.Path || g.Auth != want.Auth || g.Token != want.Token || g.Body["text"] != want.Body["text"] {
			t.Errorf("call %d = %+v, want %+v", i, g, want)
		}
	}
	// The same steps and statuses, and no secret in prod's run record.
	if len(prodRun.Steps) != len(devRun.Steps) {
		t.Fatalf("prod steps %+v, dev steps %+v", prodRun.Steps, devRun.Steps)
	}
	for i := range devRun.Steps {
		if prodRun.Steps[i].Name != devRun.Steps[i].Name || prodRun.Steps[i].Status != devRun.Steps[i].Status {
			t.Errorf("step %d: prod %s %s, dev %s %s", i, prodRun.Steps[i].Name, prodRun.Steps[i].Status, devRun.Steps[i].Name, devRun.Steps[i].Status)
		}
	}
	var rawRun json.RawMessage
	api(t, prod.p, prod.key, "GET", "/api/v1/flows/"+prod.flowIDs(t)["Notify"]+"/runs/"+prodRun.ID, "", 200, &rawRun)
	if strings.Contains(string(rawRun), "tok-prod-5555") || strings.Contains(string(rawRun), "key-prod-4444") {
		t.Errorf("prod's run record holds a secret: %s", rawRun)
	}

	// An edited file is an update; a flow made by hand on prod is never
	// pruned; a file removed prunes the flow apply made.
	notifyFile := filepath.Join(repo, "Notify.flow.json")
	raw, _ := os.ReadFile(notifyFile)
	if err := os.WriteFile(notifyFile, []byte(strings.Replace(string(raw), `"tell chat"`, `"tell the chat"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	api(t, prod.p, prod.key, "POST", "/api/v1/flows", `{"name": "Made by hand", "engine": "FLOW_BUILDER"}`, 201, nil)
	if err := os.Remove(filepath.Join(repo, "Orders.flow.json")); err != nil {
		t.Fatal(err)
	}
	r = prod.ctl.run("", "apply", "-f", repo, "--prune", "--dry-run")
	if r.code != 2 || !strings.Contains(r.stdout, "~ update Notify") || !strings.Contains(r.stdout, "- delete Orders") || strings.Contains(r.stdout, "Made by hand") {
		t.Fatalf("apply --prune --dry-run: exit %d\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	prod.ctl.ok("", "apply", "-f", repo, "--prune")
	ids := prod.flowIDs(t)
	if _, ok := ids["Orders"]; ok || ids["Made by hand"] == "" || ids["Notify"] == "" {
		t.Errorf("after apply --prune the flows are %v: want Notify and Made by hand", ids)
	}
	if r := prod.ctl.run("", "apply", "-f", repo, "--prune", "--dry-run"); r.code != 0 {
		t.Errorf("apply --prune --dry-run after apply --prune: exit %d\n%s", r.code, r.stdout)
	}

	// Two flows with one name refuse the apply, naming both.
	api(t, prod.p, prod.key, "POST", "/api/v1/flows", `{"name": "Notify", "engine": "FLOW_BUILDER"}`, 201, nil)
	if stderr := prod.ctl.fails("apply", "-f", repo); !strings.Contains(stderr, `named "Notify"`) {
		t.Errorf("apply with a duplicate name: %s", stderr)
	}
}
