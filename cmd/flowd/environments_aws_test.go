package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"flowservice/pkg/awstest"
)

// TestApplyOnAWSBackend runs flowctl apply against flowd on the AWS
// adapters (DynamoDB, Secrets Manager and SQS on moto_server), which serve
// the same management API as the Lambda functions: variables (a secret one
// in Secrets Manager), a flow file applied, run with the variables and the
// connection by name, exported back and applied again with no change; a
// flow with bounds calling another by name keeps them and calls it.
func TestApplyOnAWSBackend(t *testing.T) {
	t.Parallel() // its own flowd, directory, ports and moto_server
	moto, err := awstest.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { moto.Stop() })
	ext, got := recordingService(t)

	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "AWS_ENDPOINT_URL="+moto.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=testing",
		"AWS_SECRET_ACCESS_KEY=testing", "AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null", "FLOWD_BACKEND=aws", "FLOWD_AWS_PROVISION=true", "FLOWD_AWS_PREFIX=envtest",
		"FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_WORKERS=1", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	c := newCtl(t, "FLOWCTL_URL="+p.base, "FLOWCTL_API_KEY="+key)
	c.ok("key-aws-1212\n", "connections", "create", "--name", "Chat", "--app", "chat", "--api-key-stdin")
	c.ok("", "variables", "set", "BASE_URL", ext.URL+"/aws")
	c.ok("tok-aws-3434\n", "variables", "set", "TOKEN", "--secret")
	if out := c.ok("", "variables", "list"); !tableRow(out, "TOKEN", "true", "********") || strings.Contains(out, "tok-aws-3434") {
		t.Errorf("variables list:\n%s", out)
	}

	repo := t.TempDir()
	doc := `{"apiVersion": "v1", "kind": "Flow", "name": "Notify", "description": "", "engine": "FLOW_BUILDER",
	  "definition": {"steps": [{"name": "send", "type": "HTTP", "connection": "Chat", "method": "POST",
	    "url": "{{ vars.BASE_URL }}/messages", "headers": {"X-Token": "{{ vars.TOKEN }}"}, "body": {"who": "{{ trigger.body.who }}"}}]}}`
	if err := os.WriteFile(filepath.Join(repo, "Notify.flow.json"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	// A flow with bounds that calls Notify by name (the flowId is another
	// installation's): apply creates Notify first, then resolves the name.
	caller := `{"apiVersion": "v1", "kind": "Flow", "name": "Caller", "description": "", "engine": "FLOW_BUILDER",
	  "definition": {"concurrency": {"limit": 1}, "throttle": {"limit": 5, "period": "1m"},
	    "steps": [{"name": "notify", "type": "CALL_FLOW", "flowId": "flw_ofanotherinstallation", "flow": "Notify", "wait": false}]}}`
	if err := os.WriteFile(filepath.Join(repo, "Caller.flow.json"), []byte(caller), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("", "apply", "-f", repo); !strings.Contains(out, "+ create Notify") || !strings.Contains(out, "+ create Caller") {
		t.Fatalf("apply:\n%s", out)
	}
	ids := (&environment{ctl: c}).flowIDs(t)
	id := ids["Notify"]
	var got1 struct {
		Concurrency, Throttle map[string]any
		Steps                 []struct{ FlowID string }
	}
	api(t, p, key, "GET", "/api/v1/flows/"+ids["Caller"], "", 200, &got1)
	if len(got1.Steps) != 1 || got1.Steps[0].FlowID != id || got1.Concurrency["limit"] != 1.0 || got1.Throttle["period"] != "1m" {
		t.Errorf("Caller on DynamoDB: %+v, want its bounds and a call to Notify %s", got1, id)
	}
	var listed struct {
		Data []struct {
			Name     string
			Version  int64
			HasDraft bool
		}
	}
	c.okJSON(&listed, "flows", "list")
	if len(listed.Data) != 2 || listed.Data[0].Version != 1 || listed.Data[0].HasDraft {
		t.Errorf("flows listed on DynamoDB: %+v, want version 1 and no draft", listed.Data)
	}
	api(t, p, key, "POST", "/api/v1/flows/"+id+"/enable", "", 200, nil)
	_, run := postHook(t, p, key, id, "/api/v1/webhooks/"+id, `{"who": "ada"}`, nil)
	if run.Status != "SUCCEEDED" {
		t.Fatalf("run %s %q\nflowd stderr:\n%s", run.Status, run.Error, p.stderr)
	}
	if calls := got(); len(calls) != 1 || calls[0].Path != "/aws/messages" || calls[0].Auth != "Bearer key-aws-1212" ||
		calls[0].Token != "tok-aws-3434" || calls[0].Body["who"] != "ada" {
		t.Errorf("the service got %+v", calls)
	}

	// The server's own export, written over the file, applies as unchanged.
	c.ok("", "export", "--all", "-d", repo)
	if r := c.run("", "apply", "-f", repo, "--dry-run"); r.code != 0 || !strings.Contains(r.stdout, "= unchanged Notify") || !strings.Contains(r.stdout, "= unchanged Caller") {
		t.Errorf("apply --dry-run after export: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
