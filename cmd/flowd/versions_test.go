package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"flowservice/internal/testwait"
)

// pinnedRun is a run as GET …/runs/{runId} shows it, with its version.
type pinnedRun struct {
	flowRun
	FlowVersion *int64
	Draft       bool
}

// versionedSteps is a flow's steps that call the stand-in under /<tag>/.
func versionedSteps(base, tag string) string {
	return fmt.Sprintf(`[
		{"name": "first", "type": "HTTP", "method": "POST", "url": "%[1]s/%[2]s/first", "body": {}},
		{"name": "pause", "type": "WAIT", "duration": "2s"},
		{"name": "second", "type": "HTTP", "method": "POST", "url": "%[1]s/%[2]s/second", "body": {}}]`, base, tag)
}

// TestRunPinnedAcrossPublishAndKill9: a run waiting at a WAIT step when
// version 2 is published (PUT /api/v1/flows/{flowId}) and version 3 (a draft, published),
// with flowd killed (SIGKILL) and started again on its directory, resumes
// on version 1, the version it started on; a new run takes version 3.
func TestRunPinnedAcrossPublishAndKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd twice")
	}
	svc := newStandIn(t)
	dir := filepath.Join(t.TempDir(), "data")
	env := []string{"FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_CODE_SANDBOX=false"}
	p := startFlowd(t, dir, env...)
	key := initialKey(t, dir)
	id := createCodeFlow(t, p, key, `{"name": "pinned", "engine": "FLOW_BUILDER", "steps": `+versionedSteps(svc.URL, "v1")+`}`)
	runID := hook(t, p, id)
	var r pinnedRun
	testwait.For(t, testwait.Hang, "the run to wait at its WAIT step", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+id+"/runs/"+runID, "", 200, &r)
		return r.NextAttemptAt != nil && len(r.Steps) == 3 && r.Steps[1].Status == "SUCCEEDED"
	})
	if r.FlowVersion == nil || *r.FlowVersion != 1 || r.Draft {
		t.Fatalf("run started on version %v (draft %v), want 1", r.FlowVersion, r.Draft)
	}

	var f struct {
		Version  int64
		HasDraft bool
	}
	api(t, p, key, "POST", "/api/v1/flows/"+id, `{"steps": `+versionedSteps(svc.URL, "v2")+`}`, 200, &f)
	if f.Version != 2 {
		t.Fatalf("PUT with steps: version %d, want 2", f.Version)
	}
	api(t, p, key, "PUT", "/api/v1/flows/"+id+"/draft", `{"steps": `+versionedSteps(svc.URL, "v3")+`}`, 200, nil)
	api(t, p, key, "POST", "/api/v1/flows/"+id+"/publish", `{"message": "v3 from a draft"}`, 200, &f)
	if f.Version != 3 || f.HasDraft {
		t.Fatalf("after publish: version %d hasDraft %v, want 3 false", f.Version, f.HasDraft)
	}

	if err := p.cmd.Process.Kill(); err != nil { // SIGKILL: no cleanup at all
		t.Fatal(err)
	}
	<-p.exited
	p2 := startFlowd(t, dir, env...)
	defer p2.stop(t)
	done := finishedRun(t, p2, key, id, runID)
	if done.Status != "SUCCEEDED" {
		t.Fatalf("pinned run after the restart: %+v", done)
	}
	n := map[string]int{}
	for _, c := range svc.take("*") {
		n[c.Path]++
	}
	if n["/v1/first"] != 1 || n["/v1/second"] != 1 || len(n) != 2 {
		t.Fatalf("calls %v; want /v1/first and /v1/second once each and nothing else", n)
	}

	// A new run executes the live version.
	next := hook(t, p2, id)
	testwait.For(t, testwait.Hang, "the new run to call version 3's first step", func() bool {
		return len(svc.calls("/v3/first")) == 1
	})
	api(t, p2, key, "GET", "/api/v1/flows/"+id+"/runs/"+next, "", 200, &r)
	if r.FlowVersion == nil || *r.FlowVersion != 3 {
		t.Fatalf("new run on version %v, want 3", r.FlowVersion)
	}

	var versions struct {
		Data []struct {
			Version            int64
			Message, CreatedBy string
		}
	}
	api(t, p2, key, "GET", "/api/v1/flows/"+id+"/versions", "", 200, &versions)
	if len(versions.Data) != 3 || versions.Data[0].Version != 3 || versions.Data[0].Message != "v3 from a draft" ||
		versions.Data[2].Version != 1 || !strings.HasPrefix(versions.Data[0].CreatedBy, "key_") {
		t.Fatalf("versions %+v", versions.Data)
	}
}

// TestRetryFromFailedStepKeepsItsVersion: a run that failed on version 1,
// retried from its failed step after version 2 was published, runs the
// failed step as version 1 has it; a retry from START runs version 2.
func TestRetryFromFailedStepKeepsItsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	svc := newStandIn(t)
	svc.fail = "bad"
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_CODE_SANDBOX=false")
	defer p.stop(t)
	key := initialKey(t, dir)
	steps := func(tag string) string {
		return fmt.Sprintf(`[
			{"name": "a", "type": "HTTP", "method": "POST", "url": "%[1]s/%[2]s/a", "body": {}},
			{"name": "b", "type": "HTTP", "method": "POST", "url": "%[1]s/%[2]s/lines", "body": {"sku": "bad"}}]`, svc.URL, tag)
	}
	id := createCodeFlow(t, p, key, `{"name": "retried", "engine": "FLOW_BUILDER", "steps": `+steps("v1")+`}`)
	failed := finishedRun(t, p, key, id, hook(t, p, id))
	if failed.Status != "FAILED" {
		t.Fatalf("first run %+v, want FAILED at b", failed)
	}
	api(t, p, key, "POST", "/api/v1/flows/"+id, `{"steps": `+steps("v2")+`}`, 200, nil)
	svc.mu.Lock()
	svc.fail = ""
	svc.mu.Unlock()
	svc.take("*")

	var retried pinnedRun
	api(t, p, key, "POST", "/api/v1/flows/"+id+"/runs/"+failed.ID+"/retry", `{"from": "FAILED_STEP"}`, 201, &retried)
	if done := finishedRun(t, p, key, id, retried.ID); done.Status != "SUCCEEDED" {
		t.Fatalf("retry from the failed step: %+v", done)
	}
	if retried.FlowVersion == nil || *retried.FlowVersion != 1 {
		t.Fatalf("retry from the failed step on version %v, want 1", retried.FlowVersion)
	}
	if got := svc.take("*"); len(got) != 1 || got[0].Path != "/v1/lines" {
		t.Fatalf("retry from the failed step called %+v; want version 1's b alone", got)
	}

	var again pinnedRun
	api(t, p, key, "POST", "/api/v1/flows/"+id+"/runs/"+failed.ID+"/retry", `{"from": "START"}`, 201, &again)
	if done := finishedRun(t, p, key, id, again.ID); done.Status != "SUCCEEDED" {
		t.Fatalf("retry from START: %+v", done)
	}
	if again.FlowVersion == nil || *again.FlowVersion != 2 {
		t.Fatalf("retry from START on version %v, want 2", again.FlowVersion)
	}
	n := map[string]int{}
	for _, c := range svc.take("*") {
		n[c.Path]++
	}
	if n["/v2/a"] != 1 || n["/v2/lines"] != 1 || len(n) != 2 {
		t.Fatalf("retry from START called %v; want version 2's steps", n)
	}
}

// hook sends an empty JSON webhook to a flow builder flow and returns the
// run ID.
func hook(t *testing.T, p *proc, id string) string {
	t.Helper()
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+id, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var acc struct{ RunID string }
	if err := json.NewDecoder(resp.Body).Decode(&acc); err != nil || acc.RunID == "" {
		t.Fatalf("webhook answered %d without a run ID (%v)", resp.StatusCode, err)
	}
	return acc.RunID
}

// calls returns the requests seen on path so far, keeping them.
func (s *standIn) calls(path string) []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []call
	for _, c := range s.got {
		if c.Path == path {
			out = append(out, c)
		}
	}
	return out
}

// TestFlowctlVersions: flowctl flows draft, publish, versions and restore
// against a running flowd.
func TestFlowctlVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	defer p.stop(t)
	key := initialKey(t, dir)
	c := newCtl(t, "FLOWCTL_URL="+p.base, "FLOWCTL_API_KEY="+key)
	var f struct {
		ID       string
		Version  int64
		HasDraft bool
	}
	out := c.ok(`{"name": "versioned", "engine": "FLOW_BUILDER", "steps": [{"name": "one", "type": "SET", "values": {"v": 1}}]}`,
		"-o", "json", "flows", "create", "-f", "-")
	if err := json.Unmarshal([]byte(out), &f); err != nil || f.Version != 1 {
		t.Fatalf("flows create: %s", out)
	}
	out = c.ok(`{"steps": [{"name": "two", "type": "SET", "values": {"v": 2}}]}`, "flows", "draft", f.ID, "-f", "-")
	if !strings.Contains(out, "version 1") || !tableRow(out, "1", "two", "SET") {
		t.Fatalf("flows draft -f:\n%s", out)
	}
	if out = c.ok("", "flows", "get", f.ID); !strings.Contains(out, "Draft:") || !tableRow(out, "1", "one", "SET") {
		t.Fatalf("flows get with a draft:\n%s", out)
	}
	if out = c.ok("", "flows", "list"); !tableRow(out, "ID", "NAME", "STATUS", "ENGINE", "TRIGGER", "RUNS", "SUCCESS", "LAST RUN", "VERSION", "DRAFT") ||
		!regexp.MustCompile(`(?m)^`+f.ID+`\s.*\s1\s+draft$`).MatchString(out) {
		t.Fatalf("flows list with a draft:\n%s", out)
	}
	if out = c.ok("", "flows", "publish", f.ID, "-m", "second"); !tableRow(out, "1", "two", "SET") {
		t.Fatalf("flows publish:\n%s", out)
	}
	if r := c.run("", "flows", "publish", f.ID); r.code == 0 || !strings.Contains(r.stderr, "DRAFT_NOT_FOUND") {
		t.Fatalf("flows publish without a draft: exit %d, stderr %q", r.code, r.stderr)
	}
	out = c.ok("", "flows", "versions", f.ID)
	if !tableRow(out, "VERSION", "CREATED", "BY", "MESSAGE") || !tableRow(out, "2") || !strings.Contains(out, "second") {
		t.Fatalf("flows versions:\n%s", out)
	}
	if out = c.ok("", "flows", "versions", f.ID, "1"); !strings.Contains(out, `"one"`) {
		t.Fatalf("flows versions FLOW_ID 1:\n%s", out)
	}
	c.okJSON(&f, "flows", "restore", f.ID, "1")
	if f.Version != 3 {
		t.Fatalf("flows restore: version %d, want 3", f.Version)
	}
	c.ok(`{"steps": []}`, "flows", "draft", f.ID, "-f", "-")
	if out = c.ok("", "flows", "draft", f.ID, "--discard"); !strings.Contains(out, "deleted") {
		t.Fatalf("flows draft --discard:\n%s", out)
	}
	if r := c.run("", "flows", "draft", f.ID); r.code == 0 || !strings.Contains(r.stderr, "DRAFT_NOT_FOUND") {
		t.Fatalf("flows draft without one: exit %d, stderr %q", r.code, r.stderr)
	}
}
