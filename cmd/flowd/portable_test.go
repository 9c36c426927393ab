package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestApplyCarriesBoundsAndCalledFlows: a flow exported from one flowd and
// applied to another keeps its concurrency and throttle, and its CALL_FLOW
// step, whose flowId is the first installation's, calls the second's flow
// of the name export wrote beside it, made in the same apply (before its
// caller, although its file comes after). Applying again changes nothing;
// a file calling a name the server has none or two of is refused with the
// step named; a bound removed from the file is removed from the flow.
func TestApplyCarriesBoundsAndCalledFlows(t *testing.T) {
	dev := newEnvironment(t, "key-dev-1111", map[string]string{"GREETING": "hello from dev"})
	prod := newEnvironment(t, "key-prod-4444", map[string]string{"GREETING": "hello from prod"})

	var sub, main struct{ ID string }
	api(t, dev.p, dev.key, "POST", "/api/v1/flows", `{"name": "Sub", "engine": "FLOW_BUILDER",
		"steps": [{"name": "greet", "type": "SET", "values": {"text": "{{ vars.GREETING }}, {{ trigger.body.who }}"}}]}`, 201, &sub)
	api(t, dev.p, dev.key, "POST", "/api/v1/flows", `{"name": "Main", "engine": "FLOW_BUILDER",
		"concurrency": {"limit": 2, "key": "trigger.body.who"}, "throttle": {"limit": 30, "period": "1m"},
		"steps": [{"name": "enrich", "type": "CALL_FLOW", "flowId": "`+sub.ID+`", "input": {"who": "{{ trigger.body.who }}"}}]}`, 201, &main)

	repo := t.TempDir()
	dev.ctl.ok("", "export", "--all", "-d", repo)
	mainFile := filepath.Join(repo, "Main.flow.json")
	raw, err := os.ReadFile(mainFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Definition struct {
			Concurrency, Throttle map[string]any
			Steps                 []struct{ FlowID, Flow string }
		}
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	d := doc.Definition
	if d.Concurrency["limit"] != 2.0 || d.Concurrency["key"] != "trigger.body.who" || d.Throttle["limit"] != 30.0 || d.Throttle["period"] != "1m" ||
		len(d.Steps) != 1 || d.Steps[0].Flow != "Sub" || d.Steps[0].FlowID != sub.ID {
		t.Fatalf("Main's exported document lacks its bounds or the called flow's name:\n%s", raw)
	}

	// Main.flow.json comes first, yet Sub is created first: Main's step
	// names it.
	out := prod.ctl.ok("", "apply", "-f", repo)
	if !strings.Contains(out, "applied: 2 change(s), 0 unchanged") {
		t.Fatalf("apply printed:\n%s", out)
	}
	ids := prod.flowIDs(t)
	var got struct {
		Concurrency, Throttle map[string]any
		Steps                 []struct{ FlowID, Flow string }
	}
	api(t, prod.p, prod.key, "GET", "/api/v1/flows/"+ids["Main"], "", 200, &got)
	if got.Concurrency["limit"] != 2.0 || got.Concurrency["key"] != "trigger.body.who" || got.Throttle["limit"] != 30.0 || got.Throttle["period"] != "1m" {
		t.Errorf("prod's Main has concurrency %v throttle %v, want dev's", got.Concurrency, got.Throttle)
	}
	if len(got.Steps) != 1 || got.Steps[0].FlowID != ids["Sub"] || ids["Sub"] == sub.ID || got.Steps[0].Flow != "" {
		t.Fatalf("prod's Main calls %+v, want prod's Sub %s (dev's is %s)", got.Steps, ids["Sub"], sub.ID)
	}
	for _, id := range []string{ids["Sub"], ids["Main"]} {
		api(t, prod.p, prod.key, "POST", "/api/v1/flows/"+id+"/enable", "", 200, nil)
	}
	_, run := postHook(t, prod.p, prod.key, ids["Main"], "/api/v1/webhooks/"+ids["Main"], `{"who": "ada"}`, nil)
	if run.Status != "SUCCEEDED" || !strings.Contains(string(run.Steps[0].Output), `"text":"hello from prod, ada"`) {
		t.Fatalf("prod's Main: %s %q, enrich output %s; want prod's Sub's answer", run.Status, run.Error, run.Steps[0].Output)
	}

	// The IDs differ, the names match: nothing to do.
	if r := prod.ctl.run("", "apply", "-f", repo, "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "= unchanged Main") {
		t.Fatalf("apply --dry-run after apply: exit %d\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	// A bound the file no longer has is removed.
	var edit map[string]any
	json.Unmarshal(raw, &edit)
	delete(edit["definition"].(map[string]any), "throttle")
	edited, _ := json.Marshal(edit)
	if err := os.WriteFile(mainFile, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := prod.ctl.ok("", "apply", "-f", repo); !strings.Contains(out, "~ update Main") {
		t.Fatalf("apply without the throttle printed:\n%s", out)
	}
	got.Throttle = nil
	api(t, prod.p, prod.key, "GET", "/api/v1/flows/"+ids["Main"], "", 200, &got)
	if got.Throttle != nil || got.Concurrency["limit"] != 2.0 {
		t.Errorf("after removing the throttle from the file: concurrency %v throttle %v", got.Concurrency, got.Throttle)
	}

	// A third installation with no Sub, then with two: refused, naming
	// Main's step.
	other := newEnvironment(t, "key-other-7777", nil)
	only := t.TempDir()
	if err := os.WriteFile(filepath.Join(only, "Main.flow.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	r := other.ctl.run("", "apply", "-f", only)
	if r.code == 0 || !strings.Contains(r.stderr, `steps[0].flow "Sub" (step "enrich"): this project has no flow of that name`) {
		t.Errorf("apply calling a flow the server lacks: exit %d\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for range 2 {
		api(t, other.p, other.key, "POST", "/api/v1/flows", `{"name": "Sub", "engine": "FLOW_BUILDER"}`, 201, nil)
	}
	r = other.ctl.run("", "apply", "-f", only)
	if r.code == 0 || !strings.Contains(r.stderr, `steps[0].flow "Sub" (step "enrich"): 2 flows of this project have that name`) {
		t.Errorf("apply calling a name the server has twice: exit %d\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if _, ok := other.flowIDs(t)["Main"]; ok {
		t.Errorf("a refused apply created Main")
	}
}
