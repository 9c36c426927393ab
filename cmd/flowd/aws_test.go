package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"flowservice/pkg/awstest"
)

// TestAWSBackendOnMoto runs flowd with FLOWD_BACKEND=aws against
// moto_server, provisioning its resources, and takes a webhook through
// DynamoDB, SQS and the in-process queue consumer to a SUCCEEDED run.
func TestAWSBackendOnMoto(t *testing.T) {
	t.Parallel() // its own flowd, directory, ports and moto_server
	moto, err := awstest.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { moto.Stop() })
	ext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"ok":true}`))
	}))
	defer ext.Close()

	dir := filepath.Join(t.TempDir(), "data")
	awsEnv := []string{"AWS_ENDPOINT_URL=" + moto.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=testing",
		"AWS_SECRET_ACCESS_KEY=testing", "AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null"}
	p := startFlowd(t, dir, append(awsEnv, "FLOWD_BACKEND=aws", "FLOWD_AWS_PROVISION=true", "FLOWD_AWS_PREFIX=flowdtest",
		"FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_WORKERS=1", "FLOWD_LOG_LEVEL=warn")...)
	key := initialKey(t, dir)

	// flowctl administers the same tables.
	ctl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(flowctlBin, append([]string{"--backend", "aws", "--aws-prefix", "flowdtest"}, args...)...)
		cmd.Env = append(os.Environ(), awsEnv...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("flowctl %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	if out := ctl("projects", "create", "acme", "--plan", "TEAM"); !strings.Contains(out, "acme") {
		t.Fatalf("projects create = %q", out)
	}
	// OAuth2 apps live in the stage's table, their secrets in Secrets Manager.
	add := exec.Command(flowctlBin, "--backend", "aws", "--aws-prefix", "flowdtest", "oauth-apps", "add", "gh",
		"--client-id", "cid", "--client-secret-stdin", "--authorize-url", "https://idp.example/authorize",
		"--token-url", "https://idp.example/token", "--scopes", "repo")
	add.Env, add.Stdin = append(os.Environ(), awsEnv...), strings.NewReader("client-secret")
	if out, err := add.CombinedOutput(); err != nil || !strings.Contains(string(out), "gh") {
		t.Fatalf("oauth-apps add on aws: %v %s", err, out)
	}
	if out := ctl("oauth-apps", "list"); !tableRow(out, "gh", "cid", "repo") {
		t.Errorf("oauth-apps list on aws:\n%s", out)
	}
	if got := status(t, p.base, ctl("keys", "create", "--project", "acme")); got != 200 {
		t.Fatalf("a key made by flowctl on the stage's tables gets %d from flowd, want 200", got)
	}

	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "on aws", "engine": "FLOW_BUILDER",
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"a": "{{ trigger.body.a }}"}}]}`, ext.URL), 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json", strings.NewReader(`{"a": "1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	runID := resp.Header.Get("X-Run-Id")
	if resp.StatusCode != 200 || runID == "" {
		t.Fatalf("webhook = %d, run %q", resp.StatusCode, runID)
	}
	var run struct{ Status, Error string }
	waitFor(t, "run "+runID+" to end", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/runs/"+runID, "", 200, &run)
		return run.Status != "RUNNING"
	})
	if run.Status != "SUCCEEDED" {
		t.Fatalf("run is %s (%s); want SUCCEEDED\nflowd stderr:\n%s", run.Status, run.Error, p.stderr)
	}

	// The flow language on the AWS backend: state in the stage's tables,
	// a WAIT through a delayed SQS message, nested steps.
	var lang struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "language on aws", "engine": "FLOW_BUILDER", "steps": [
		{"name": "before", "type": "SET", "values": {"prev": "{{ state.n ?? 0 }}"}},
		{"name": "count", "type": "STORE", "set": {"n": "{{ (state.n ?? 0) + 1 }}"}},
		{"name": "pause", "type": "WAIT", "duration": "2s"},
		{"name": "each", "type": "FOR_EACH", "items": "[1, 2]", "steps": [
			{"name": "double", "type": "SET", "values": {"v": "{{ item * 2 }}"}}]}]}`, 201, &lang)
	api(t, p, key, "POST", "/api/v1/flows/"+lang.ID+"/enable", "", 200, nil)
	for i, wantPrev := range []string{"0", "1"} {
		resp, err := http.Post(p.base+"/api/v1/webhooks/"+lang.ID, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		runID := resp.Header.Get("X-Run-Id")
		var run struct {
			Status, Error string
			Steps         []struct{ Output json.RawMessage }
		}
		waitFor(t, "run "+runID+" to end", func() bool {
			api(t, p, key, "GET", "/api/v1/flows/"+lang.ID+"/runs/"+runID, "", 200, &run)
			return run.Status != "RUNNING"
		})
		if run.Status != "SUCCEEDED" {
			t.Fatalf("run %d is %s (%s); want SUCCEEDED\nflowd stderr:\n%s", i, run.Status, run.Error, p.stderr)
		}
		if string(run.Steps[0].Output) != `{"prev":`+wantPrev+`}` || string(run.Steps[3].Output) != `{"items":[{"double":{"v":2}},{"double":{"v":4}}]}` {
			t.Errorf("run %d: steps %s / %s", i, run.Steps[0].Output, run.Steps[3].Output)
		}
	}
}
