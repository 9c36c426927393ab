package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"flowservice/deploy/lambdalocal"
	"flowservice/deploy/samenv"
	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/awstest"
	"flowservice/pkg/dynamostore"
)

// TestInvokeEnvFile does what `make invoke-<function>` does, minus Docker:
// it provisions a stage on moto as `samenv -moto` does, generates the
// env-vars file, and then builds each function from that file's variables
// the way sam's container starts it (awsapp.Build over the environment) and
// passes it every events/ file of that function. The same file generated
// from the template's Outputs, as describe-stacks would list them for that
// stack, is identical: --stack covers every variable a function reads.
func TestInvokeEnvFile(t *testing.T) {
	ctx := context.Background()
	awsCfg := awstest.Start(t)
	raw := make([]byte, 4)
	_, _ = rand.Read(raw)
	stage := "t" + hex.EncodeToString(raw)
	prefix := "flow-" + stage
	cfg, err := awsdev.Provision(ctx, awsCfg, prefix, awsapp.Config{SecretPrefix: awsdev.SecretPrefix(prefix)})
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := samenv.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	vals := tpl.FromConfig(cfg, stage, awsCfg.Region, "123456789012")
	envFile, err := tpl.Env(vals, map[string]string{"AWS_ENDPOINT_URL": *awsCfg.BaseEndpoint})
	if err != nil {
		t.Fatal(err)
	}
	if fns := tpl.Functions(); !reflect.DeepEqual(fns, []string{"ApiFunction", "CodeFunction", "RunnerFunction", "WebhookFunction", "WorkflowHookFunction"}) {
		t.Fatalf("functions %v", fns)
	}
	// The traces' optional parameters are empty unless a deployment sets
	// them: an empty endpoint is traces off (pkg/tracing), empty headers
	// and sampler argument are the SDK's defaults.
	// So are OpenID Connect's: an empty issuer is sign-in by password and
	// API key only.
	optional := map[string]bool{"OTEL_EXPORTER_OTLP_ENDPOINT": true, "OTEL_EXPORTER_OTLP_HEADERS": true, "OTEL_TRACES_SAMPLER_ARG": true,
		"OIDC_ISSUER": true, "OIDC_CLIENT_ID": true, "OIDC_CLIENT_SECRET_ARN": true, "OIDC_ALLOWED_DOMAINS": true}
	for fn, vars := range envFile {
		for k, v := range vars {
			if v == "" && !optional[k] || strings.Contains(v, "${") {
				t.Errorf("%s: %s=%q is unresolved", fn, k, v)
			}
		}
	}

	// The stack path: describe-stacks output built from the template's
	// Outputs for this stack.
	outs, err := tpl.EvalOutputs(vals)
	if err != nil {
		t.Fatal(err)
	}
	desc := map[string]any{"StackId": "arn:aws:cloudformation:" + awsCfg.Region + ":123456789012:stack/" + prefix + "/1",
		"Parameters": []map[string]string{{"ParameterKey": "Stage", "ParameterValue": stage}}}
	var list []map[string]string
	for k, v := range outs {
		list = append(list, map[string]string{"OutputKey": k, "OutputValue": v})
	}
	desc["Outputs"] = list
	b, _ := json.Marshal(map[string]any{"Stacks": []any{desc}})
	fromStack, err := tpl.FromStack(b)
	if err != nil {
		t.Fatal(err)
	}
	stackEnv, err := tpl.Env(fromStack, map[string]string{"AWS_ENDPOINT_URL": *awsCfg.BaseEndpoint})
	if err != nil {
		t.Fatalf("env from stack outputs: %v", err)
	}
	if !reflect.DeepEqual(stackEnv, envFile) {
		t.Errorf("env from the stack's outputs differs:\n%v\nwant\n%v", stackEnv, envFile)
	}

	// What the container has: the file's variables, and the credentials
	// and region sam passes from the caller's profile.
	getenv := func(fn string) func(string) string {
		vars := maps.Clone(envFile[fn])
		vars["AWS_REGION"], vars["AWS_ACCESS_KEY_ID"], vars["AWS_SECRET_ACCESS_KEY"] = awsCfg.Region, "testing", "testing"
		vars["LOG_LEVEL"] = "error"
		return func(k string) string { return vars[k] }
	}
	api, err := awsapp.Build(getenv("ApiFunction"), management.NewHandler)
	if err != nil {
		t.Fatalf("api cold start: %v", err)
	}
	hook, err := awsapp.Build(getenv("WebhookFunction"), awsapp.NewWebhookHandler)
	if err != nil {
		t.Fatalf("webhook cold start: %v", err)
	}
	wfhook, err := awsapp.Build(getenv("WorkflowHookFunction"), awsapp.NewWorkflowHookHandler)
	if err != nil {
		t.Fatalf("workflowhook cold start: %v", err)
	}
	runner, err := awsapp.Build(getenv("RunnerFunction"), awsapp.NewRunnerHandler)
	if err != nil {
		t.Fatalf("runner cold start: %v", err)
	}

	// A project and key, as flowctl --backend aws makes them.
	admin, err := awsdev.NewAdminService(awsCfg, prefix)
	if err != nil {
		t.Fatal(err)
	}
	project, err := admin.CreateProject(ctx, "acme", automation.PlanEnterprise)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := admin.CreateAPIKey(ctx, project.ID)
	if err != nil {
		t.Fatal(err)
	}
	ph := map[string]string{"__API_KEY__": key, "__PROJECT_ID__": project.ID}

	resp := invoke(t, api, event(t, "api-create-flow.json", ph))
	if resp.StatusCode != 201 {
		t.Fatalf("api-create-flow.json: %d %s", resp.StatusCode, resp.Body)
	}
	ph["__FLOW_ID__"], _ = decodeBody(t, resp)["id"].(string)
	files, err := filepath.Glob("../events/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("events: %v", err)
	}
	// The code function reads nothing from its environment: TestCodeBootstrap
	// runs code-invoke.json through its bootstrap.
	seen := map[string]bool{"api-create-flow.json": true, "code-invoke.json": true}
	for _, fn := range []string{"RunnerFunction", "WorkflowHookFunction"} {
		if got := envFile[fn]["CODE_FUNCTION"]; got != prefix+"-code" {
			t.Errorf("%s: CODE_FUNCTION=%q, want %q", fn, got, prefix+"-code")
		}
	}
	for _, f := range []string{"api-enable-flow.json", "api-get-flow.json", "api-get-webhook.json", "api-list-flows.json",
		"api-list-runs.json", "api-list-connections.json"} {
		seen[f] = true
		if resp := invoke(t, api, event(t, f, ph)); resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", f, resp.StatusCode, resp.Body)
		}
	}

	seen["webhook-post.json"] = true
	resp = invoke(t, hook, event(t, "webhook-post.json", ph))
	runID, _ := decodeBody(t, resp)["runId"].(string)
	if resp.StatusCode != 200 || runID == "" {
		t.Fatalf("webhook-post.json: %d %s", resp.StatusCode, resp.Body)
	}

	seen["runner-batch.json"] = true
	ph["__RUN_ID__"] = runID
	var batch events.SQSEvent
	if err := json.Unmarshal(event(t, "runner-batch.json", ph), &batch); err != nil {
		t.Fatal(err)
	}
	out, err := runner(ctx, batch)
	if err != nil || len(out.BatchItemFailures) != 0 {
		t.Errorf("runner-batch.json: %+v %v", out, err)
	}

	seen["workflowhook-post.json"] = true
	var in automation.FlowInput
	if err := json.Unmarshal([]byte(`{"name": "Deploy notifier", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "deploys/github", "responseMode": "ON_COMPLETION"}},
		"steps": [{"name": "reply", "type": "RESPOND", "statusCode": 202, "body": {"ref": "{{ trigger.body.data.ref }}"}}]}`), &in); err != nil {
		t.Fatal(err)
	}
	flow, err := admin.CreateFlow(ctx, project, in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.EnableFlow(ctx, project, flow.ID); err != nil {
		t.Fatal(err)
	}
	resp = invoke(t, wfhook, event(t, "workflowhook-post.json", ph))
	if resp.StatusCode != 202 || decodeBody(t, resp)["ref"] != "refs/heads/main" {
		t.Errorf("workflowhook-post.json: %d %s", resp.StatusCode, resp.Body)
	}

	// A HEAD delivery to an IMMEDIATE flow: its run ID in X-Run-Id, no body.
	seen["workflowhook-head.json"] = true
	var probe automation.FlowInput
	if err := json.Unmarshal([]byte(`{"name": "Status probe", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "HEAD", "path": "deploys/status"}}}`), &probe); err != nil {
		t.Fatal(err)
	}
	if flow, err = admin.CreateFlow(ctx, project, probe); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.EnableFlow(ctx, project, flow.ID); err != nil {
		t.Fatal(err)
	}
	resp = invoke(t, wfhook, event(t, "workflowhook-head.json", ph))
	if resp.StatusCode != 200 || resp.Body != "" || !strings.HasPrefix(header(resp, "X-Run-Id"), "run_") || header(resp, "Content-Length") == "" {
		t.Errorf("workflowhook-head.json: %d %v %q, want 200 with X-Run-Id and Content-Length, no body", resp.StatusCode, resp.MultiValueHeaders, resp.Body)
	}

	// An approval link's answer and a callback, to waitpoints of runs
	// parked as the runner parks them.
	store := dynamostore.New(dynamodb.NewFromConfig(awsCfg), dynamostore.TableNames(prefix))
	for _, c := range []struct {
		file, placeholder string
		kind              automation.WaitpointKind
		want              string
	}{
		{"webhook-approval-post.json", "__APPROVAL_TOKEN__", automation.WaitApproval, `"decision":"approved"`},
		{"webhook-callback-post.json", "__CALLBACK_TOKEN__", automation.WaitCallback, `"status":"RESUMED"`},
	} {
		seen[c.file] = true
		r := automation.Run{ID: automation.NewID(automation.PrefixRun), Project: project.ID, FlowID: ph["__FLOW_ID__"],
			Status: automation.RunRunning, Steps: []automation.StepResult{}, Created: time.Now().UTC().Truncate(time.Millisecond)}
		if err := store.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		if ph[c.placeholder], err = lambdalocal.Waitpoint(ctx, store, r, "wait", c.kind); err != nil {
			t.Fatal(err)
		}
		if resp := invoke(t, hook, event(t, c.file, ph)); resp.StatusCode != 200 || !strings.Contains(resp.Body, c.want) {
			t.Errorf("%s: %d %s, want 200 with %s", c.file, resp.StatusCode, resp.Body, c.want)
		}
	}

	// An MCP client's tools/list through the api function (/mcp).
	seen["api-mcp-tools-list.json"] = true
	if resp := invoke(t, api, event(t, "api-mcp-tools-list.json", ph)); resp.StatusCode != 200 || !strings.Contains(resp.Body, `"tools":[`) {
		t.Errorf("api-mcp-tools-list.json: %d %s, want 200 with the tools list", resp.StatusCode, resp.Body)
	}

	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s is not exercised with the generated env file", f)
		}
	}
}
