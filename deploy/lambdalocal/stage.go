package lambdalocal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"flowservice/deploy/samenv"
	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/s3payloads"
)

var jsonUnmarshal = json.Unmarshal

// Stage is one stage's resources on moto_server, as `sam deploy` would make
// them, seeded with what the events/ files refer to: a project and its API
// key, an enabled form flow (__FLOW_ID__), the two WORKFLOW_BUILDER flows
// the workflowhook events call, and a queued run of the form flow
// (__RUN_ID__).
type Stage struct {
	Name   string
	AWS    aws.Config
	Config awsapp.Config
	// Placeholders are the values of the events' __NAME__ placeholders.
	Placeholders map[string]string
	// Store is the stage's store, for seeding more and checking answers.
	Store   *dynamostore.Store
	Service *automation.Service
	Project automation.Project

	tpl    *samenv.Template
	values samenv.Values
}

// FormFlow is the flow __FLOW_ID__ names: a FLOW_BUILDER webhook flow.
const FormFlow = `{"name": "Form intake", "engine": "FLOW_BUILDER",
	"steps": [{"name": "shape", "type": "SET", "values": {"email": "{{ trigger.body.data.email }}"}}]}`

// The WORKFLOW_BUILDER flows of workflowhook-post.json and
// workflowhook-head.json.
const (
	deployFlow = `{"name": "Deploy notifier", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "deploys/github", "responseMode": "ON_COMPLETION"}},
		"steps": [{"name": "reply", "type": "RESPOND", "statusCode": 202, "body": {"ref": "{{ trigger.body.data.ref }}"}}]}`
	probeFlow = `{"name": "Status probe", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "HEAD", "path": "deploys/status"}}}`
)

// NewStage provisions stage name (resources flow-<name>-...) on the
// moto_server of awsCfg, reads the functions' environment from the SAM
// template src, and seeds it.
func NewStage(ctx context.Context, awsCfg aws.Config, src []byte, name string) (*Stage, error) {
	tpl, err := samenv.Parse(src)
	if err != nil {
		return nil, err
	}
	prefix := "flow-" + name
	cfg, err := awsdev.Provision(ctx, awsCfg, prefix, awsapp.Config{SecretPrefix: awsdev.SecretPrefix(prefix)})
	if err != nil {
		return nil, err
	}
	s := &Stage{Name: name, AWS: awsCfg, Config: cfg, tpl: tpl, values: tpl.FromConfig(cfg, name, awsCfg.Region, "123456789012")}
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = true })
	s.Store = dynamostore.New(dynamodb.NewFromConfig(awsCfg), cfg.Tables, dynamostore.WithPayloads(s3payloads.New(s3c, cfg.PayloadBucket)))
	if s.Service, err = awsdev.NewAdminService(awsCfg, prefix); err != nil {
		return nil, err
	}
	if err := s.seed(ctx); err != nil {
		return nil, fmt.Errorf("lambdalocal: seed: %w", err)
	}
	return s, nil
}

func (s *Stage) seed(ctx context.Context) error {
	var err error
	if s.Project, err = s.Service.CreateProject(ctx, "acme", automation.PlanEnterprise); err != nil {
		return err
	}
	key, _, err := s.Service.CreateAPIKey(ctx, s.Project.ID)
	if err != nil {
		return err
	}
	form, err := s.Flow(ctx, FormFlow, true)
	if err != nil {
		return err
	}
	for _, def := range []string{deployFlow, probeFlow} {
		if _, err := s.Flow(ctx, def, true); err != nil {
			return err
		}
	}
	run, err := s.QueuedRun(ctx, form.ID, json.RawMessage(`{"event": "form.submitted", "data": {"email": "ada@example.com"}}`))
	if err != nil {
		return err
	}
	s.Placeholders = map[string]string{
		"__API_KEY__": key, "__PROJECT_ID__": s.Project.ID, "__FLOW_ID__": form.ID, "__RUN_ID__": run.ID,
	}
	// The approval link and callback URL of webhook-approval-post.json and
	// webhook-callback-post.json: waitpoints of runs of their own.
	for ph, kind := range map[string]automation.WaitpointKind{"__APPROVAL_TOKEN__": automation.WaitApproval, "__CALLBACK_TOKEN__": automation.WaitCallback} {
		waiting, err := s.QueuedRun(ctx, form.ID, json.RawMessage(`{}`))
		if err != nil {
			return err
		}
		if s.Placeholders[ph], err = Waitpoint(ctx, s.Store, waiting, "wait", kind); err != nil {
			return err
		}
	}
	return nil
}

// Waitpoint opens a waitpoint of kind for step of run r, as an APPROVAL
// step or a WAIT for a callback does before the run parks, and returns
// its token.
func Waitpoint(ctx context.Context, ws automation.WaitpointStore, r automation.Run, step string, kind automation.WaitpointKind) (string, error) {
	token, hash := automation.NewWaitpointToken()
	now := time.Now().UTC().Truncate(time.Millisecond)
	_, err := ws.UpdateWaitpoint(ctx, r.Project, r.ID, step, func(w *automation.Waitpoint, found bool) (bool, error) {
		*w = automation.Waitpoint{Project: r.Project, RunID: r.ID, FlowID: r.FlowID, FlowName: "Form intake", Step: step, Kind: kind,
			Title: "Send the offer?", Attempt: 1, Status: automation.WaitpointPending, Decisions: []automation.Decision{},
			Created: now, ExpiresAt: now.Add(72 * time.Hour), TokenHash: hash}
		return false, nil
	})
	return token, err
}

// Flow creates a flow of the stage's project from its JSON definition,
// enabled when active.
func (s *Stage) Flow(ctx context.Context, def string, active bool) (automation.Flow, error) {
	var in automation.FlowInput
	if err := json.Unmarshal([]byte(def), &in); err != nil {
		return automation.Flow{}, err
	}
	f, err := s.Service.CreateFlow(ctx, s.Project, in)
	if err != nil {
		return f, err
	}
	if active {
		f, err = s.Service.EnableFlow(ctx, s.Project, f.ID)
	}
	return f, err
}

// QueuedRun writes a RUNNING run of flowID with body as its trigger body:
// the store half of what a receiver does before it queues the run's
// message.
func (s *Stage) QueuedRun(ctx context.Context, flowID string, body json.RawMessage) (automation.Run, error) {
	run := automation.Run{
		ID: automation.NewID(automation.PrefixRun), Project: s.Project.ID, FlowID: flowID, Status: automation.RunRunning,
		Trigger: automation.TriggerData{Method: "POST", Headers: map[string]string{}, Query: map[string]string{}, Body: body},
		Steps:   []automation.StepResult{}, Created: time.Now().UTC().Truncate(time.Millisecond),
	}
	return run, s.Store.CreateRun(ctx, run)
}

// Env is the environment sam gives function fn (a logical ID): the
// template's variables resolved for this stage, AWS_ENDPOINT_URL pointing
// at moto_server as `--env-vars` sets it, the credentials and region sam
// passes from the caller, and the runtime's own AWS_LAMBDA_* variables.
// `--env-vars` only overrides variables the template declares, so an
// undeclared AWS_ENDPOINT_URL is an error here as it would be a function
// calling real AWS under sam.
func (s *Stage) Env(fn string) (map[string]string, error) {
	all, err := s.tpl.Env(s.values, nil)
	if err != nil {
		return nil, err
	}
	env, ok := all[fn]
	if !ok {
		return nil, fmt.Errorf("lambdalocal: template.yaml has no function %s", fn)
	}
	if _, ok := env["AWS_ENDPOINT_URL"]; !ok {
		return nil, fmt.Errorf("lambdalocal: template.yaml does not declare AWS_ENDPOINT_URL for %s: sam local invoke --env-vars could not point it at moto", fn)
	}
	env["AWS_ENDPOINT_URL"] = *s.AWS.BaseEndpoint
	env["AWS_REGION"], env["AWS_DEFAULT_REGION"] = s.AWS.Region, s.AWS.Region
	env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = "testing", "testing"
	memory, timeout := s.tpl.Settings(fn)
	env["AWS_LAMBDA_FUNCTION_NAME"] = "flow-" + s.Name + "-" + strings.ToLower(strings.TrimSuffix(fn, "Function"))
	env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = strconv.Itoa(memory)
	env["AWS_LAMBDA_FUNCTION_TIMEOUT"] = strconv.Itoa(timeout)
	env["AWS_LAMBDA_FUNCTION_VERSION"] = "$LATEST"
	env["AWS_LAMBDA_FUNCTION_HANDLER"] = "bootstrap"
	env["AWS_LAMBDA_LOG_GROUP_NAME"] = "/aws/lambda/" + env["AWS_LAMBDA_FUNCTION_NAME"]
	env["AWS_LAMBDA_LOG_STREAM_NAME"] = "local"
	return env, nil
}

var placeholder = regexp.MustCompile(`__[A-Z][A-Z_]*__`)

// Event reads an events/ file and fills in its placeholders.
func (s *Stage) Event(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := placeholder.ReplaceAllStringFunc(string(b), func(m string) string {
		if v, ok := s.Placeholders[m]; ok {
			return v
		}
		return m
	})
	if m := placeholder.FindString(out); m != "" {
		return nil, fmt.Errorf("lambdalocal: %s: no value for placeholder %s", filepath.Base(path), m)
	}
	return []byte(out), nil
}

// FunctionOf is the function an events/ file is for: the part of its name
// before the first "-" (api-list-flows.json is the api function's).
func FunctionOf(eventFile string) string {
	fn, _, _ := strings.Cut(filepath.Base(eventFile), "-")
	return fn
}

// Check judges a function's answer to an events/ file: the status and the
// parts of the body that show the function did what the event asks.
func (s *Stage) Check(ctx context.Context, eventFile string, payload []byte) error {
	name := filepath.Base(eventFile)
	switch FunctionOf(name) {
	case "code":
		var res struct {
			Output struct{ Type, Signed string }
			Logs   []string
			Error  string
		}
		if err := json.Unmarshal(payload, &res); err != nil {
			return fmt.Errorf("answer is not the code function's result: %w", err)
		}
		if res.Error != "" || res.Output.Type != "invoice.paid" || len(res.Output.Signed) != 64 || len(res.Logs) != 1 {
			return fmt.Errorf("want output {type: invoice.paid, signed: 64 hex digits} and one log line")
		}
		return nil
	case "runner":
		var res events.SQSEventResponse
		if err := json.Unmarshal(payload, &res); err != nil {
			return fmt.Errorf("answer is not a batch response: %w", err)
		}
		if len(res.BatchItemFailures) != 0 {
			return fmt.Errorf("batch item failures %v, want none", res.BatchItemFailures)
		}
		run, err := s.Store.Run(ctx, s.Project.ID, s.Placeholders["__FLOW_ID__"], s.Placeholders["__RUN_ID__"])
		if err != nil {
			return fmt.Errorf("the run: %w", err)
		}
		if run.Status != automation.RunSucceeded {
			return fmt.Errorf("run %s is %s (%s), want SUCCEEDED", run.ID, run.Status, run.Error)
		}
		return nil
	}
	var resp events.APIGatewayProxyResponse
	if err := json.Unmarshal(payload, &resp); err != nil || resp.StatusCode == 0 {
		return fmt.Errorf("answer is not a proxy response (%v)", err)
	}
	want := map[string]int{"api-create-flow.json": 201, "workflowhook-post.json": 202}[name]
	if want == 0 {
		want = 200
	}
	if resp.StatusCode != want {
		return fmt.Errorf("status %d, want %d", resp.StatusCode, want)
	}
	hdr := http.Header(resp.MultiValueHeaders)
	if name == "workflowhook-head.json" {
		if resp.Body != "" || !strings.HasPrefix(hdr.Get("X-Run-Id"), "run_") || hdr.Get("Content-Length") == "" {
			return fmt.Errorf("want no body, X-Run-Id and Content-Length")
		}
		return nil
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	flowID := s.Placeholders["__FLOW_ID__"]
	ok := true
	switch name {
	case "api-list-flows.json", "api-list-connections.json", "api-list-runs.json":
		_, ok = body["data"].([]any)
	case "api-get-flow.json":
		ok = body["id"] == flowID
	case "api-enable-flow.json":
		ok = body["id"] == flowID && body["status"] == "ACTIVE"
	case "api-create-flow.json":
		id, _ := body["id"].(string)
		ok = strings.HasPrefix(id, automation.PrefixFlow)
	case "api-get-webhook.json":
		ok = strings.HasSuffix(fmt.Sprint(body["webhookUrl"]), "/api/v1/webhooks/"+flowID)
	case "webhook-post.json":
		id, _ := body["runId"].(string)
		ok = body["status"] == "RUNNING" && strings.HasPrefix(id, automation.PrefixRun)
	case "workflowhook-post.json":
		ok = body["ref"] == "refs/heads/main"
	case "webhook-approval-post.json":
		ok = body["status"] == automation.WaitpointDecided && body["decision"] == automation.DecisionApproved
	case "webhook-callback-post.json":
		ok = body["status"] == "RESUMED"
	case "api-mcp-tools-list.json":
		// A JSON-RPC answer listing the project's tool flows (the stage
		// seeds none with an inputSchema: an empty list, not an error).
		res, _ := body["result"].(map[string]any)
		_, ok = res["tools"].([]any)
		ok = ok && body["error"] == nil
	}
	if !ok {
		return fmt.Errorf("unexpected body %.300s", resp.Body)
	}
	return nil
}
