package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/awsapp"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/emf"
	"flowservice/pkg/sqsqueue"
)

// cfnTemplate is the part of a CloudFormation template the tests read.
type cfnTemplate struct {
	Parameters map[string]struct {
		Default any `json:"Default"`
	} `json:"Parameters"`
	Resources map[string]struct {
		Type       string         `json:"Type"`
		Condition  string         `json:"Condition"`
		Properties map[string]any `json:"Properties"`
		Metadata   map[string]any `json:"Metadata"`
		DependsOn  any            `json:"DependsOn"`
	} `json:"Resources"`
	Conditions map[string]any `json:"Conditions"`
}

// translate runs the SAM transform over template.yaml as CloudFormation does
// on deploy (testdata/translate.py, with the samtranslator package that
// cfn-lint depends on) and returns the resulting template.
func translate(t *testing.T, params map[string]any) cfnTemplate {
	t.Helper()
	p, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	translated.Lock()
	defer translated.Unlock()
	if tpl, ok := translated.m[string(p)]; ok {
		return tpl
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("the template tests need python3 with samtranslator (pip install cfn-lint)")
	}
	cmd := exec.Command("python3", "testdata/translate.py", "../template.yaml", string(p))
	// The translator needs a region; nothing it does leaves the machine.
	cmd.Env = append(os.Environ(), "AWS_DEFAULT_REGION=us-east-1", "AWS_EC2_METADATA_DISABLED=true")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("translate template.yaml: %v\n%s", err, stderr.String())
	}
	var tpl cfnTemplate
	if err := json.Unmarshal(out, &tpl); err != nil {
		t.Fatalf("translated template: %v", err)
	}
	translated.m[string(p)] = tpl
	return tpl
}

// translated caches translations by parameters: each takes a second.
var translated = struct {
	sync.Mutex
	m map[string]cfnTemplate
}{m: map[string]cfnTemplate{}}

// ipCondition returns the CIDRs of the resource policy's Deny statement on a
// translated REST API, and whether a policy exists at all.
func ipCondition(t *testing.T, tpl cfnTemplate, api string) (cidrs []any, hasPolicy bool) {
	t.Helper()
	r, ok := tpl.Resources[api]
	if !ok || r.Type != "AWS::ApiGateway::RestApi" {
		t.Fatalf("%s: not an AWS::ApiGateway::RestApi in the translated template (%q)", api, r.Type)
	}
	body, _ := r.Properties["Body"].(map[string]any)
	policy, ok := body["x-amazon-apigateway-policy"].(map[string]any)
	if !ok {
		if _, direct := r.Properties["Policy"]; direct {
			t.Fatalf("%s: policy outside the OpenAPI body; test needs updating", api)
		}
		return nil, false
	}
	stmts, _ := policy["Statement"].([]any)
	var allow bool
	for _, s := range stmts {
		st := s.(map[string]any)
		switch st["Effect"] {
		case "Allow":
			allow = st["Action"] == "execute-api:Invoke"
		case "Deny":
			cond, _ := st["Condition"].(map[string]any)
			nip, _ := cond["NotIpAddress"].(map[string]any)
			cidrs, _ = nip["aws:SourceIp"].([]any)
		}
	}
	if !allow {
		t.Errorf("%s: resource policy has no Allow execute-api:Invoke statement: %v", api, stmts)
	}
	return cidrs, true
}

// TestReceiverResourcePolicy checks that the platform-wide CIDRs really end
// up in the resource policy of both receiver APIs, as a flat list of
// strings, and that the management API has none. A misspelt key under
// Auth.ResourcePolicy, or a list nested in a list, passes cfn-lint but
// drops or breaks the allowlist.
func TestReceiverResourcePolicy(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		want   []any
	}{
		{"defaults", nil, []any{"0.0.0.0/0", "::/0"}},
		{"platform ranges", map[string]any{"AllowedCidrs": []string{"192.0.2.0/24", "2001:db8::/32"}}, []any{"192.0.2.0/24", "2001:db8::/32"}},
		{"one range", map[string]any{"AllowedCidrs": []string{"198.51.100.7/32"}}, []any{"198.51.100.7/32"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl := translate(t, tt.params)
			for _, api := range []string{"EngineApi", "WorkflowApi"} {
				got, ok := ipCondition(t, tpl, api)
				if !ok {
					t.Errorf("%s: no resource policy in the translated RestApi", api)
					continue
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("%s: Deny NotIpAddress aws:SourceIp = %#v, want %#v", api, got, tt.want)
				}
			}
			if _, ok := ipCondition(t, tpl, "ManagementApi"); ok {
				t.Error("ManagementApi has a resource policy; the platform allowlist is for the receivers only")
			}
		})
	}
}

// functions returns the translated Lambda functions by logical ID.
func functions(tpl cfnTemplate) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range tpl.Resources {
		if r.Type == "AWS::Lambda::Function" {
			out[id] = r.Properties
		}
	}
	return out
}

func number(t *testing.T, what string, v any) int {
	t.Helper()
	switch n := v.(type) {
	case float64:
		return int(n)
	case string:
		i, err := strconv.Atoi(n)
		if err == nil {
			return i
		}
	}
	t.Fatalf("%s = %#v, want a number", what, v)
	return 0
}

func envOf(fn map[string]any) map[string]any {
	env, _ := fn["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	return vars
}

func duration(t *testing.T, what string, v any) time.Duration {
	t.Helper()
	s, _ := v.(string)
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s = %#v: %v", what, v, err)
	}
	return d
}

// TestQueueAndRunner checks the SQS wiring: the visibility timeout exceeds
// the runner's timeout (a message must not reappear while an attempt runs),
// the runner reports failures per record, there is a dead-letter queue, and
// the runner's timeout leaves room for one attempt.
func TestQueueAndRunner(t *testing.T) {
	tpl := translate(t, nil)
	runner := functions(tpl)["RunnerFunction"]
	if runner == nil {
		t.Fatal("no RunnerFunction")
	}
	timeout := number(t, "RunnerFunction Timeout", runner["Timeout"])
	q := tpl.Resources["RunQueue"].Properties
	if vt := number(t, "RunQueue VisibilityTimeout", q["VisibilityTimeout"]); vt < 6*timeout {
		t.Errorf("RunQueue VisibilityTimeout %d s is under six times the runner's Timeout %d s (AWS's advice for an SQS event source)", vt, timeout)
	}
	if attempt := duration(t, "RUN_TIMEOUT", envOf(runner)["RUN_TIMEOUT"]); attempt >= time.Duration(timeout)*time.Second {
		t.Errorf("RUN_TIMEOUT %v leaves no time in the runner's %d s to record the outcome", attempt, timeout)
	}
	redrive, _ := q["RedrivePolicy"].(map[string]any)
	attempts := number(t, "RUN_ATTEMPTS", envOf(runner)["RUN_ATTEMPTS"])
	if redrive["deadLetterTargetArn"] == nil || number(t, "maxReceiveCount", redrive["maxReceiveCount"]) < attempts+3 {
		t.Errorf("RunQueue RedrivePolicy = %v, want a DLQ and maxReceiveCount with room (3) above RUN_ATTEMPTS %d", redrive, attempts)
	}
	if mrc := number(t, "maxReceiveCount", redrive["maxReceiveCount"]); mrc < 2*sqsqueue.DefaultRequeueAt {
		t.Errorf("maxReceiveCount %d: the runner requeues bounces from receive %d on (sqsqueue.DefaultRequeueAt), which leaves less room for outright failures than it uses for bounces",
			mrc, sqsqueue.DefaultRequeueAt)
	}
	// SAM's SQS event would attach AWSLambdaSQSQueueExecutionRole (receive
	// and delete on every queue of the account): the mapping is declared
	// on its own and the role grants polling on the run queue alone.
	for id, r := range tpl.Resources {
		if r.Type == "AWS::IAM::Role" && strings.Contains(fmt.Sprint(r.Properties["ManagedPolicyArns"]), "SQSQueueExecutionRole") {
			t.Errorf("%s: managed policies %v grant every queue of the account", id, r.Properties["ManagedPolicyArns"])
		}
	}
	if grants := roleGrants(t, tpl.Resources["RunnerFunctionRole"].Properties); !grants[grant{"sqs:ReceiveMessage", "RunQueue"}] || !grants[grant{"sqs:DeleteMessage", "RunQueue"}] {
		t.Errorf("the runner's role cannot poll the run queue: %v", grants)
	}
	var found bool
	for id, r := range tpl.Resources {
		if r.Type != "AWS::Lambda::EventSourceMapping" {
			continue
		}
		found = true
		types, _ := r.Properties["FunctionResponseTypes"].([]any)
		if !slices.Contains(types, any("ReportBatchItemFailures")) {
			t.Errorf("%s: FunctionResponseTypes = %v, want ReportBatchItemFailures", id, types)
		}
		if fn, _ := r.Properties["FunctionName"].(map[string]any); fn["Ref"] != "RunnerFunction" {
			t.Errorf("%s: maps to %v, want RunnerFunction", id, fn)
		}
		sc, _ := r.Properties["ScalingConfig"].(map[string]any)
		if mc, _ := sc["MaximumConcurrency"].(map[string]any); mc["Ref"] != "RunnerMaxConcurrency" {
			t.Errorf("%s: ScalingConfig = %v, want MaximumConcurrency from RunnerMaxConcurrency", id, sc)
		}
	}
	if !found {
		t.Error("no SQS event source mapping for the runner")
	}
}

// TestConcurrency checks the backpressure settings: every function has its
// reserved concurrency as a parameter, the runner's event source scales to
// at most its reservation by default, and both receiver stages throttle.
func TestConcurrency(t *testing.T) {
	tpl := translate(t, nil)
	params := map[string]string{
		"ApiFunction": "ApiReservedConcurrency", "WebhookFunction": "WebhookReservedConcurrency",
		"WorkflowHookFunction": "WorkflowHookReservedConcurrency", "RunnerFunction": "RunnerReservedConcurrency",
		"CodeFunction": "CodeReservedConcurrency",
	}
	for id, fn := range functions(tpl) {
		rc, _ := fn["ReservedConcurrentExecutions"].(map[string]any)
		branches, _ := rc["Fn::If"].([]any)
		if len(branches) != 3 || !reflect.DeepEqual(branches[1], map[string]any{"Ref": params[id]}) {
			t.Errorf("%s: ReservedConcurrentExecutions = %v, want it from %s", id, fn["ReservedConcurrentExecutions"], params[id])
		}
		if d := number(t, params[id], tpl.Parameters[params[id]].Default); d < 1 {
			t.Errorf("%s defaults to %d: no reservation when turned on", params[id], d)
		}
		// Reserved only when ReserveConcurrency is true.
		cond, _ := tpl.Conditions[branches[0].(string)].(map[string]any)["Fn::And"].([]any)
		if len(cond) != 2 || !reflect.DeepEqual(cond[0], map[string]any{"Condition": "Reserve"}) {
			t.Errorf("%s: condition %v, want it under Reserve", id, tpl.Conditions[branches[0].(string)])
		}
	}
	// Off by default: a new account keeps its whole (often 10) quota.
	if d := tpl.Parameters["ReserveConcurrency"].Default; d != "false" ||
		!reflect.DeepEqual(tpl.Conditions["Reserve"], map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "ReserveConcurrency"}, "true"}}) {
		t.Errorf("ReserveConcurrency defaults to %v, condition Reserve %v; want false, and Reserve its equality to true", d, tpl.Conditions["Reserve"])
	}
	// A new account (a quota of 10 concurrent executions) serves with the
	// defaults: nothing reserved, and the runner's queue trigger takes at
	// most half of the quota, so the API and the receivers keep 5 during
	// a backlog.
	if maxc := number(t, "RunnerMaxConcurrency", tpl.Parameters["RunnerMaxConcurrency"].Default); maxc > 5 {
		t.Errorf("RunnerMaxConcurrency defaults to %d: over 5, a backlog takes a new account's quota of 10 from the API and the receivers", maxc)
	}
	if maxc, reserved := number(t, "RunnerMaxConcurrency", tpl.Parameters["RunnerMaxConcurrency"].Default),
		number(t, "RunnerReservedConcurrency", tpl.Parameters["RunnerReservedConcurrency"].Default); maxc > reserved {
		t.Errorf("RunnerMaxConcurrency %d above RunnerReservedConcurrency %d: the event source would be throttled", maxc, reserved)
	}
	stages := map[string]bool{}
	for _, r := range tpl.Resources {
		if r.Type != "AWS::ApiGateway::Stage" {
			continue
		}
		api, _ := r.Properties["RestApiId"].(map[string]any)["Ref"].(string)
		settings, _ := r.Properties["MethodSettings"].([]any)
		for _, s := range settings {
			m := s.(map[string]any)
			if m["ThrottlingRateLimit"] != nil && m["ThrottlingBurstLimit"] != nil {
				stages[api] = true
			}
		}
	}
	for _, api := range []string{"ManagementApi", "EngineApi", "WorkflowApi"} {
		if !stages[api] {
			t.Errorf("%s: its stage has no throttling", api)
		}
	}
}

// TestFunctions checks each function's runtime, its own role, and the
// timeouts of the HTTP ones against API Gateway's 29 s.
func TestFunctions(t *testing.T) {
	tpl := translate(t, nil)
	fns := functions(tpl)
	want := []string{"ApiFunction", "CodeFunction", "RunnerFunction", "WebhookFunction", "WorkflowHookFunction"}
	var got []string
	for id := range fns {
		got = append(got, id)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("functions = %v, want %v", got, want)
	}
	roles := map[string]string{}
	for id, fn := range fns {
		if fn["Runtime"] != "provided.al2023" || fn["Handler"] != "bootstrap" {
			t.Errorf("%s: Runtime %v Handler %v, want provided.al2023 bootstrap", id, fn["Runtime"], fn["Handler"])
		}
		if arch, _ := fn["Architectures"].([]any); !slices.Equal(arch, []any{"arm64"}) {
			t.Errorf("%s: Architectures %v, want [arm64]", id, arch)
		}
		ga, _ := fn["Role"].(map[string]any)["Fn::GetAtt"].([]any)
		if len(ga) != 2 {
			t.Errorf("%s: Role %v, want its own role", id, fn["Role"])
			continue
		}
		role, _ := ga[0].(string)
		if other, dup := roles[role]; dup {
			t.Errorf("%s and %s share the role %s", id, other, role)
		}
		roles[role] = id
		if tpl.Resources[role].Type != "AWS::IAM::Role" {
			t.Errorf("%s: role %s is not an AWS::IAM::Role", id, role)
		}
		if _, ok := fn["LoggingConfig"].(map[string]any)["LogGroup"]; !ok {
			t.Errorf("%s: no log group of its own (retention)", id)
		}
	}
	for _, id := range []string{"ApiFunction", "WebhookFunction", "WorkflowHookFunction"} {
		if to := number(t, id+" Timeout", fns[id]["Timeout"]); to > 29 {
			t.Errorf("%s: Timeout %d s, beyond API Gateway's 29 s", id, to)
		}
	}
	wh := fns["WorkflowHookFunction"]
	sync := duration(t, "SYNC_TIMEOUT", envOf(wh)["SYNC_TIMEOUT"])
	if to := time.Duration(number(t, "WorkflowHookFunction Timeout", wh["Timeout"])) * time.Second; sync >= to || sync > awsapp.MaxSyncTimeout {
		t.Errorf("SYNC_TIMEOUT %v must be below the function's %v and at most %v (API Gateway's 29 s less a cold start)", sync, to, awsapp.MaxSyncTimeout)
	}
	// An MCP tools/call answers "still running" with its run's ID before
	// API Gateway gives up.
	apiFn := fns["ApiFunction"]
	mcpWait := duration(t, "MCP_WAIT", envOf(apiFn)["MCP_WAIT"])
	if to := time.Duration(number(t, "ApiFunction Timeout", apiFn["Timeout"])) * time.Second; mcpWait >= to || mcpWait > awsapp.MaxSyncTimeout {
		t.Errorf("MCP_WAIT %v must be below the api function's %v and at most %v", mcpWait, to, awsapp.MaxSyncTimeout)
	}
}

// TestLeastPrivilege checks the grants that differ between functions: only
// the management API changes schedules and passes the scheduler role, and
// no function may touch another stage's secrets.
func TestLeastPrivilege(t *testing.T) {
	tpl := translate(t, nil)
	for id, fn := range functions(tpl) {
		role := fn["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
		doc, err := json.Marshal(tpl.Resources[role].Properties["Policies"])
		if err != nil {
			t.Fatal(err)
		}
		s := string(doc)
		schedules := strings.Contains(s, "scheduler:CreateSchedule") || strings.Contains(s, "iam:PassRole")
		if schedules != (id == "ApiFunction") {
			t.Errorf("%s: schedule grants = %v, want them on ApiFunction only", id, schedules)
		}
		if strings.Contains(s, `"*"`) {
			t.Errorf("%s: a policy grants on *: %s", id, s)
		}
		if strings.Contains(s, "secretsmanager") && !strings.Contains(s, `secret:flow/${Stage}/*`) {
			t.Errorf("%s: secrets grant not scoped to the stage prefix: %s", id, s)
		}
		if id != "ApiFunction" && strings.Contains(s, "KeysTable") {
			t.Errorf("%s: may read API keys", id)
		}
	}
}

// TestTablesMatchStore checks that the template declares exactly the tables
// dynamostore creates (docs/dynamodb.md): keys, attribute types, indexes
// and billing, plus what only a deployment has: point-in-time recovery on
// every table and TTL on the runs table.
func TestTablesMatchStore(t *testing.T) {
	tpl := translate(t, nil)
	declared := map[string]map[string]any{} // by name suffix: projects, keys, ...
	for id, r := range tpl.Resources {
		if r.Type != "AWS::DynamoDB::Table" {
			continue
		}
		sub, _ := r.Properties["TableName"].(map[string]any)["Fn::Sub"].(string)
		suffix, ok := strings.CutPrefix(sub, "flow-${Stage}-")
		if !ok {
			t.Errorf("%s: TableName %v, want flow-${Stage}-<kind>", id, r.Properties["TableName"])
			continue
		}
		declared[suffix] = r.Properties
	}
	const prefix = "T"
	defs := dynamostore.TableDefinitions(dynamostore.TableNames(prefix))
	if len(declared) != len(defs) {
		t.Errorf("template declares %d tables, dynamostore %d", len(declared), len(defs))
	}
	for _, def := range defs {
		kind := strings.TrimPrefix(*def.TableName, prefix+"-")
		got, ok := declared[kind]
		if !ok {
			t.Errorf("table %s: not in the template", kind)
			continue
		}
		var want struct {
			BillingMode            string
			AttributeDefinitions   []map[string]string
			KeySchema              []map[string]string
			GlobalSecondaryIndexes []map[string]any
		}
		want.BillingMode = string(def.BillingMode)
		for _, a := range def.AttributeDefinitions {
			want.AttributeDefinitions = append(want.AttributeDefinitions, map[string]string{"AttributeName": *a.AttributeName, "AttributeType": string(a.AttributeType)})
		}
		keys := func(ks []dbtypes.KeySchemaElement) []map[string]string {
			var out []map[string]string
			for _, k := range ks {
				out = append(out, map[string]string{"AttributeName": *k.AttributeName, "KeyType": string(k.KeyType)})
			}
			return out
		}
		want.KeySchema = keys(def.KeySchema)
		for _, g := range def.GlobalSecondaryIndexes {
			proj := map[string]any{"ProjectionType": string(g.Projection.ProjectionType)}
			if len(g.Projection.NonKeyAttributes) > 0 {
				proj["NonKeyAttributes"] = g.Projection.NonKeyAttributes
			}
			want.GlobalSecondaryIndexes = append(want.GlobalSecondaryIndexes, map[string]any{
				"IndexName": *g.IndexName, "KeySchema": keys(g.KeySchema), "Projection": proj,
			})
		}
		// Compare as JSON values, attribute order aside.
		norm := func(v any) any {
			b, _ := json.Marshal(v)
			var out any
			_ = json.Unmarshal(b, &out)
			if l, ok := out.([]any); ok {
				slices.SortFunc(l, func(a, b any) int {
					x, _ := json.Marshal(a)
					y, _ := json.Marshal(b)
					return strings.Compare(string(x), string(y))
				})
			}
			return out
		}
		for _, f := range []struct {
			name      string
			got, want any
		}{
			{"BillingMode", got["BillingMode"], want.BillingMode},
			{"AttributeDefinitions", got["AttributeDefinitions"], want.AttributeDefinitions},
			{"KeySchema", got["KeySchema"], want.KeySchema},
			{"GlobalSecondaryIndexes", got["GlobalSecondaryIndexes"], want.GlobalSecondaryIndexes},
		} {
			if g, w := norm(f.got), norm(f.want); !reflect.DeepEqual(g, w) {
				t.Errorf("table %s: %s = %v, dynamostore has %v", kind, f.name, g, w)
			}
		}
		if pitr, _ := got["PointInTimeRecoverySpecification"].(map[string]any); pitr["PointInTimeRecoveryEnabled"] != true {
			t.Errorf("table %s: no point-in-time recovery", kind)
		}
		ttl, _ := got["TimeToLiveSpecification"].(map[string]any)
		// keys: people's set-up links and dashboard sessions expire there.
		if wantTTL := kind == "runs" || kind == "audit" || kind == "alerts" || kind == "keys"; wantTTL != (ttl["Enabled"] == true && ttl["AttributeName"] == "expiresAt") {
			t.Errorf("table %s: TimeToLiveSpecification = %v, want TTL on expiresAt only on runs, audit, alerts and keys", kind, ttl)
		}
	}
}

// TestOperability checks tracing, access logs and alarms in the translated
// template: X-Ray on every function and stage, a JSON access log on every
// stage, and an alarm on each function's errors and throttles, the run
// queue's oldest message, the DLQ's depth and runs ending FAILED (the
// metric pkg/awsapp emits, by the dimensions it emits it with).
func TestOperability(t *testing.T) {
	tpl := translate(t, nil)
	for id, fn := range functions(tpl) {
		if tc, _ := fn["TracingConfig"].(map[string]any); tc["Mode"] != "Active" {
			t.Errorf("%s: TracingConfig %v, want Active", id, fn["TracingConfig"])
		}
	}
	stages := 0
	for id, r := range tpl.Resources {
		if r.Type != "AWS::ApiGateway::Stage" {
			continue
		}
		stages++
		if r.Properties["TracingEnabled"] != true {
			t.Errorf("%s: TracingEnabled %v", id, r.Properties["TracingEnabled"])
		}
		// Access logs when ApiAccessLogs is not off.
		cond, _ := r.Properties["AccessLogSetting"].(map[string]any)["Fn::If"].([]any)
		if len(cond) != 3 || cond[0] != "AccessLogs" || !reflect.DeepEqual(cond[2], map[string]any{"Ref": "AWS::NoValue"}) {
			t.Errorf("%s: AccessLogSetting %v, want it under the condition AccessLogs", id, r.Properties["AccessLogSetting"])
			continue
		}
		als, _ := cond[1].(map[string]any)
		format, _ := als["Format"].(string)
		var line map[string]string
		if err := json.Unmarshal([]byte(format), &line); err != nil || line["requestId"] != "$context.requestId" || line["xrayTraceId"] == "" {
			t.Errorf("%s: access log format %q is not a JSON line with the request and trace IDs (%v)", id, format, err)
		}
	}
	if stages != 3 {
		t.Errorf("%d API stages, want 3", stages)
	}
	// A stage with access logging fails to deploy before the account's
	// CloudWatch role is set: each API (hence its stage) waits for it when
	// this stack sets it, through a handle that exists either way (a
	// DependsOn on a resource not created would skip the APIs too). The
	// role, an account-wide singleton, is the stack's only on request.
	for _, api := range []string{"ManagementApi", "EngineApi", "WorkflowApi"} {
		if dep := fmt.Sprint(tpl.Resources[api].DependsOn); !strings.Contains(dep, "ApiGatewayAccountReady") {
			t.Errorf("%s: DependsOn %v, want ApiGatewayAccountReady", api, dep)
		}
	}
	ready := tpl.Resources["ApiGatewayAccountReady"]
	if ready.Condition != "" || !reflect.DeepEqual(ready.Metadata["Account"], map[string]any{"Fn::If": []any{"CreateAccountRole", map[string]any{"Ref": "ApiGatewayAccount"}, ""}}) {
		t.Errorf("ApiGatewayAccountReady: condition %q, metadata %v; want unconditional, waiting for ApiGatewayAccount when created", ready.Condition, ready.Metadata)
	}
	for _, id := range []string{"ApiGatewayAccount", "ApiGatewayLogsRole"} {
		if c := tpl.Resources[id].Condition; c != "CreateAccountRole" {
			t.Errorf("%s: condition %q, want CreateAccountRole", id, c)
		}
	}
	if d := tpl.Parameters["ApiAccessLogs"].Default; d != "off" {
		t.Errorf("ApiAccessLogs defaults to %v, want off", d)
	}

	type alarm struct{ namespace, metric, dim string }
	alarms := map[alarm]bool{}
	for _, r := range tpl.Resources {
		if r.Type != "AWS::CloudWatch::Alarm" {
			continue
		}
		p := r.Properties
		var dims []string
		for _, d := range p["Dimensions"].([]any) {
			d := d.(map[string]any)
			v, _ := json.Marshal(d["Value"])
			dims = append(dims, d["Name"].(string)+"="+string(v))
		}
		slices.Sort(dims)
		alarms[alarm{p["Namespace"].(string), p["MetricName"].(string), strings.Join(dims, ",")}] = true
	}
	want := []alarm{
		{"AWS/SQS", "ApproximateAgeOfOldestMessage", `QueueName={"Fn::GetAtt":["RunQueue","QueueName"]}`},
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", `QueueName={"Fn::GetAtt":["RunDeadLetterQueue","QueueName"]}`},
		{emf.Namespace, "RunsFinished", `Stage={"Ref":"Stage"},Status="FAILED"`},
	}
	for id := range functions(tpl) {
		for _, m := range []string{"Errors", "Throttles"} {
			want = append(want, alarm{"AWS/Lambda", m, `FunctionName={"Ref":"` + id + `"}`})
		}
	}
	for _, w := range want {
		if !alarms[w] {
			t.Errorf("no alarm on %s %s (%s)", w.namespace, w.metric, w.dim)
		}
	}
}
