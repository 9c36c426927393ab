package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApplySettles: hand-written minimal flow files (no trigger, no
// method, no path, a called flow by name, a webhook secret typed inline)
// are applied three times; the second and third apply plan no change and
// the flows stay at version 1, their webhook path the one the first apply
// gave. A changed inline secret is a change (the server compares it with
// the stored value, never showing it); "********" keeps the stored value
// and is no change; a changed description updates without a new version.
func TestApplySettles(t *testing.T) {
	e := newEnvironment(t, "key-1111", nil)
	repo := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(repo, name+".flow.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("Hello", `{"apiVersion": "v1", "kind": "Flow", "name": "Hello", "engine": "FLOW_BUILDER",
	  "definition": {"steps": [{"name": "get", "type": "HTTP", "url": "https://example.com/x"},
	                           {"name": "set", "type": "SET", "values": {"a": 1}}]}}`)
	orders := `{"apiVersion": "v1", "kind": "Flow", "name": "Orders", "engine": "WORKFLOW_BUILDER", "description": "DESC",
	  "definition": {"trigger": {"type": "WEBHOOK", "webhook": {"authentication": {"type": "HEADER", "name": "X-Token", "value": "SECRET"}}},
	                 "steps": [{"name": "call", "type": "CALL_FLOW", "flow": "Hello", "wait": false},
	                           {"name": "ack", "type": "RESPOND", "statusCode": 200, "body": {"ok": true}}]}}`
	write("Orders", strings.NewReplacer("DESC", "", "SECRET", "tok-1").Replace(orders))

	type flowInfo struct {
		ID, Name string
		Version  int64
		Trigger  struct{ Webhook struct{ Path string } }
	}
	flows := func() map[string]flowInfo {
		t.Helper()
		out := map[string]flowInfo{}
		for name, id := range e.flowIDs(t) {
			var f flowInfo
			api(t, e.p, e.key, "GET", "/api/v1/flows/"+id, "", 200, &f)
			out[name] = f
		}
		return out
	}
	if out := e.ctl.ok("", "apply", "-f", repo); !strings.Contains(out, "applied: 2 change(s), 0 unchanged") {
		t.Fatalf("first apply printed:\n%s", out)
	}
	first := flows()
	path := first["Orders"].Trigger.Webhook.Path
	if path == "" {
		t.Fatalf("Orders has no webhook path: %+v", first["Orders"])
	}
	for i := 2; i <= 3; i++ {
		if r := e.ctl.run("", "apply", "-f", repo, "--dry-run"); r.code != 0 || strings.Contains(r.stdout, "~") {
			t.Fatalf("apply --dry-run number %d: exit %d, want 0 (no changes)\n%s\nstderr: %s", i, r.code, r.stdout, r.stderr)
		}
		if out := e.ctl.ok("", "apply", "-f", repo); !strings.Contains(out, "applied: 0 change(s), 2 unchanged") {
			t.Fatalf("apply number %d printed:\n%s", i, out)
		}
		for name, f := range flows() {
			if f.Version != 1 {
				t.Errorf("after apply number %d, %s is at version %d, want 1", i, name, f.Version)
			}
		}
	}
	if got := flows()["Orders"].Trigger.Webhook.Path; got != path {
		t.Errorf("Orders' webhook path went from %q to %q", path, got)
	}

	// Another inline secret: a change of the trigger, one new version.
	write("Orders", strings.NewReplacer("DESC", "", "SECRET", "tok-2").Replace(orders))
	if r := e.ctl.run("", "apply", "-f", repo, "--dry-run"); r.code != 2 || !strings.Contains(r.stdout, "~ update Orders ("+first["Orders"].ID+"): definition.trigger") ||
		!strings.Contains(r.stdout, "= unchanged Hello") {
		t.Fatalf("apply --dry-run with another secret: exit %d\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	e.ctl.ok("", "apply", "-f", repo)
	if f := flows()["Orders"]; f.Version != 2 || f.Trigger.Webhook.Path != path {
		t.Errorf("after the secret changed, Orders is at version %d, path %q; want 2, %q", f.Version, f.Trigger.Webhook.Path, path)
	}
	// The mask keeps the stored value: no change. A new description is a
	// change, but of no definition: no new version.
	write("Orders", strings.NewReplacer("DESC", "", "SECRET", "********").Replace(orders))
	if r := e.ctl.run("", "apply", "-f", repo, "--dry-run"); r.code != 0 {
		t.Fatalf("apply --dry-run with the secret masked: exit %d\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	write("Orders", strings.NewReplacer("DESC", "takes orders", "SECRET", "********").Replace(orders))
	if out := e.ctl.ok("", "apply", "-f", repo); !strings.Contains(out, "~ update Orders ("+first["Orders"].ID+"): description\n") {
		t.Fatalf("apply with a new description printed:\n%s", out)
	}
	if f := flows()["Orders"]; f.Version != 2 {
		t.Errorf("a new description published version %d", f.Version)
	}
	if r := e.ctl.run("", "apply", "-f", repo, "--dry-run"); r.code != 0 {
		t.Fatalf("apply --dry-run after the description: exit %d\n%s", r.code, r.stdout)
	}
}

// TestApplyPruneUnderRateLimit: with 60 flows and a rate limit that the
// plan's requests pass (FLOWD_RATE_LIMIT=20: bursts of 41), apply and
// apply --prune wait out the 429s the server answers, as its Retry-After
// says, and finish; --prune pages through the whole list and deletes the
// 59 flows whose files are gone.
func TestApplyPruneUnderRateLimit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_RATE_LIMIT=20", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	c := newCtl(t, "FLOWCTL_URL="+p.base, "FLOWCTL_API_KEY="+key)
	repo := t.TempDir()
	const n = 60
	for i := range n {
		doc := fmt.Sprintf(`{"apiVersion": "v1", "kind": "Flow", "name": "f%02d", "engine": "FLOW_BUILDER",
		  "definition": {"steps": [{"name": "set", "type": "SET", "values": {"i": %d}}]}}`, i, i)
		if err := os.WriteFile(filepath.Join(repo, fmt.Sprintf("f%02d.flow.json", i)), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// 61 requests (the list, 60 creates), then 61 (the list, 60 compares):
	// past the burst of 41 either way.
	if out := c.ok("", "apply", "-f", repo); !strings.Contains(out, fmt.Sprintf("applied: %d change(s), 0 unchanged", n)) {
		t.Fatalf("apply of %d files printed:\n%s", n, out)
	}
	if out := c.ok("", "apply", "-f", repo); !strings.Contains(out, fmt.Sprintf("applied: 0 change(s), %d unchanged", n)) {
		t.Fatalf("apply again printed:\n%s", out)
	}
	// --prune: the list (paged, all of it), one compare, 59 deletes.
	for i := 1; i < n; i++ {
		if err := os.Remove(filepath.Join(repo, fmt.Sprintf("f%02d.flow.json", i))); err != nil {
			t.Fatal(err)
		}
	}
	out := c.ok("", "apply", "-f", repo, "--prune")
	if got := strings.Count(out, "- delete f"); got != n-1 || !strings.Contains(out, "= unchanged f00") {
		t.Fatalf("apply --prune planned %d deletes, want %d:\n%s", got, n-1, out)
	}
	ids := map[string]string{}
	var l struct{ Data []struct{ ID, Name string } }
	c.okJSON(&l, "flows", "list", "--all")
	for _, f := range l.Data {
		ids[f.Name] = f.ID
	}
	if len(ids) != 1 || ids["f00"] == "" {
		t.Errorf("after apply --prune the flows are %v, want f00 alone", ids)
	}
}
