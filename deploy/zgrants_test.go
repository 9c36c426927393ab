package deploy

// Its test reads the AWS calls that the grant tests (grantTests) made
// through each function: TestEveryFunctionPath makes those of every path
// that works, TestFaultPathGrants those of the undo paths,
// TestHeldRunOutlivesMaxReceiveCount the runner's back-off of a held run,
// TestRefusedFencedWrite the runner's read after a refused fenced write,
// and so on. Each grant test records its own calls (recordGrants); the
// comparison runs, as its subtests, those that have not passed yet in this
// process, so that its answer is the same under -run, -shuffle, and
// whatever the file's name.

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/awsapp"
)

// grant is one IAM action on one resource, named by the template's logical
// IDs: "FlowsTable", "FlowsTable/index/byProject", "PayloadBucket/*",
// "ProjectSecrets" (flow/<stage>/*), "ConnectionSecrets"
// (flow/<stage>/*/connections/*, within ProjectSecrets), "ScheduleGroup/*".
type grant struct{ action, resource string }

func (g grant) String() string { return g.action + " on " + g.resource }

// grantTests are the tests whose calls, together, must use every grant of
// each function's role (but those of unobserved), in the order
// TestGrantsMatchObservedCalls runs the ones that have not passed yet.
var grantTests = []struct {
	name string
	run  func(*testing.T)
}{
	{"TestEveryFunctionPath", TestEveryFunctionPath},
	{"TestFaultPathGrants", TestFaultPathGrants},
	{"TestHeldRunOutlivesMaxReceiveCount", TestHeldRunOutlivesMaxReceiveCount},
	{"TestRefusedFencedWrite", TestRefusedFencedWrite},
	{"TestEnvironmentsOnMoto", TestEnvironmentsOnMoto}, // HTTP steps that name their connection
	{"TestAuditLogOnLambda", TestAuditLogOnLambda},
	{"TestAlertsOnLambda", TestAlertsOnLambda},
	{"TestRunsPinnedOnLambda", TestRunsPinnedOnLambda},
	{"TestDisableStopsRunningRunOnLambda", TestDisableStopsRunningRunOnLambda},
	{"TestStoredBytesOnLambda", TestStoredBytesOnLambda},
	{"TestCodeCheckOnLambdaPath", TestCodeCheckOnLambdaPath},
	{"TestApprovalsOnLambda", TestApprovalsOnLambda}, // the webhook function's answers to links and callbacks
}

// grantLog holds the grants each function's calls needed, by logical ID.
type grantLog struct {
	mu sync.Mutex
	m  map[string]map[grant]bool
}

func (l *grantLog) add(fn string, gs ...grant) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m[fn] == nil {
		l.m[fn] = map[grant]bool{}
	}
	for _, g := range gs {
		l.m[fn][g] = true
	}
}

// has says whether fn made a call that needed g.
func (l *grantLog) has(fn string, g grant) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[fn][g]
}

// recorded is where cfgOf records calls: into the log of the grant test
// under way (the package's tests do not run in parallel), and, once that
// test has passed, its log is kept by name for the comparison.
var recorded = struct {
	sync.Mutex
	current *grantLog
	passed  map[string]*grantLog
}{passed: map[string]*grantLog{}}

// recordGrants starts the log of t's own calls, and returns it: a grant
// test calls it first, and reads what its own calls did from it, never
// what an earlier test's did.
func recordGrants(t *testing.T) *grantLog {
	name := path.Base(t.Name()) // its own name, also as a subtest of the comparison
	log := &grantLog{m: map[string]map[grant]bool{}}
	recorded.Lock()
	recorded.current = log
	recorded.Unlock()
	t.Cleanup(func() {
		recorded.Lock()
		defer recorded.Unlock()
		if recorded.current == log {
			recorded.current = nil
		}
		if !t.Failed() && !t.Skipped() {
			recorded.passed[name] = log
		}
	})
	return log
}

// cfgOf is the stack's configuration for one function, with every AWS call
// it makes recorded as the grants it needs.
func (st *stack) cfgOf(fn string) awsapp.Config {
	cfg := st.cfg
	tables := map[string]string{
		cfg.Tables.Projects: "ProjectsTable", cfg.Tables.Keys: "KeysTable", cfg.Tables.Flows: "FlowsTable",
		cfg.Tables.Routes: "RoutesTable", cfg.Tables.Connections: "ConnectionsTable", cfg.Tables.Runs: "RunsTable",
		cfg.Tables.Samples: "SamplesTable", cfg.Tables.OAuthApps: "OAuthAppsTable",
		cfg.Tables.Audit: "AuditTable", cfg.Tables.Alerts: "AlertsTable",
	}
	others := map[string]string{
		cfg.QueueURL: "RunQueue", cfg.CursorKeySecretARN: "CursorKeySecret", cfg.ScheduleGroup: "ScheduleGroup",
		cfg.OIDC.ClientSecretARN: "OidcClientSecretArn",
	}
	secretPrefix := cfg.SecretPrefix + "/"
	name := func(s *string) string {
		v := aws.ToString(s)
		if n, ok := tables[v]; ok {
			return n
		}
		if n, ok := others[v]; ok {
			return n
		}
		if rest, ok := strings.CutPrefix(v, secretPrefix); ok {
			if _, conn, ok := strings.Cut(rest, "/"); ok && strings.HasPrefix(conn, "connections/") {
				return "ConnectionSecrets"
			}
			return "ProjectSecrets"
		}
		return "unknown:" + v
	}
	bucket := func(s *string) string {
		if aws.ToString(s) == cfg.PayloadBucket {
			return "PayloadBucket"
		}
		return "unknown:" + aws.ToString(s)
	}
	cfg.Observe = func(service, op string, in any) {
		var gs []grant
		add := func(action, resource string) { gs = append(gs, grant{action, resource}) }
		switch p := in.(type) {
		case *dynamodb.GetItemInput:
			add("dynamodb:GetItem", name(p.TableName))
		case *dynamodb.PutItemInput:
			add("dynamodb:PutItem", name(p.TableName))
		case *dynamodb.UpdateItemInput:
			add("dynamodb:UpdateItem", name(p.TableName))
		case *dynamodb.DeleteItemInput:
			add("dynamodb:DeleteItem", name(p.TableName))
		case *dynamodb.QueryInput:
			add("dynamodb:Query", index(name(p.TableName), p.IndexName))
		case *dynamodb.ScanInput:
			add("dynamodb:Scan", index(name(p.TableName), p.IndexName))
		case *dynamodb.BatchGetItemInput:
			for tbl := range p.RequestItems {
				add("dynamodb:BatchGetItem", name(&tbl))
			}
		case *dynamodb.BatchWriteItemInput:
			for tbl := range p.RequestItems {
				add("dynamodb:BatchWriteItem", name(&tbl))
			}
		case *dynamodb.TransactWriteItemsInput:
			// IAM authorizes each item of a transaction as its own write.
			for _, it := range p.TransactItems {
				switch {
				case it.Put != nil:
					add("dynamodb:PutItem", name(it.Put.TableName))
				case it.Update != nil:
					add("dynamodb:UpdateItem", name(it.Update.TableName))
				case it.Delete != nil:
					add("dynamodb:DeleteItem", name(it.Delete.TableName))
				case it.ConditionCheck != nil:
					add("dynamodb:ConditionCheckItem", name(it.ConditionCheck.TableName))
				}
			}
		case *sqs.SendMessageInput:
			add("sqs:SendMessage", name(p.QueueUrl))
		case *sqs.ChangeMessageVisibilityInput:
			add("sqs:ChangeMessageVisibility", name(p.QueueUrl))
		case *secretsmanager.GetSecretValueInput:
			add("secretsmanager:GetSecretValue", name(p.SecretId))
		case *secretsmanager.CreateSecretInput:
			add("secretsmanager:CreateSecret", name(p.Name))
			if len(p.Tags) > 0 {
				add("secretsmanager:TagResource", name(p.Name))
			}
		case *secretsmanager.PutSecretValueInput:
			add("secretsmanager:PutSecretValue", name(p.SecretId))
		case *secretsmanager.UpdateSecretVersionStageInput:
			add("secretsmanager:UpdateSecretVersionStage", name(p.SecretId))
		case *secretsmanager.DeleteSecretInput:
			add("secretsmanager:DeleteSecret", name(p.SecretId))
		case *scheduler.CreateScheduleInput:
			// Creating or updating a schedule passes its role to the service.
			add("scheduler:CreateSchedule", name(p.GroupName)+"/*")
			add("iam:PassRole", "SchedulerRole")
		case *scheduler.UpdateScheduleInput:
			add("scheduler:UpdateSchedule", name(p.GroupName)+"/*")
			add("iam:PassRole", "SchedulerRole")
		case *scheduler.DeleteScheduleInput:
			add("scheduler:DeleteSchedule", name(p.GroupName)+"/*")
		case *scheduler.GetScheduleInput:
			add("scheduler:GetSchedule", name(p.GroupName)+"/*")
		case *s3.PutObjectInput:
			add("s3:PutObject", bucket(p.Bucket)+"/*")
		case *s3.GetObjectInput:
			add("s3:GetObject", bucket(p.Bucket)+"/*")
		case *s3.DeleteObjectInput:
			add("s3:DeleteObject", bucket(p.Bucket)+"/*")
		case *s3.DeleteObjectsInput:
			add("s3:DeleteObject", bucket(p.Bucket)+"/*")
		case *s3.ListObjectsV2Input:
			add("s3:ListBucket", bucket(p.Bucket))
		default:
			add(fmt.Sprintf("unmapped:%s:%s(%T)", service, op, in), "?")
		}
		record(fn, gs...)
	}
	return cfg
}

// record adds grants that fn's calls needed to the log of the grant test
// under way, if any.
func record(fn string, gs ...grant) {
	recorded.Lock()
	log := recorded.current
	recorded.Unlock()
	if log != nil {
		log.add(fn, gs...)
	}
}

func index(table string, idx *string) string {
	if idx == nil {
		return table
	}
	return table + "/index/" + *idx
}

// unobserved are grants the tests cannot exercise on moto, each with the
// reason it stays. Keep it short: a grant nobody can explain goes.
var unobserved = map[string]map[grant]string{
	"ApiFunction": {
		{"dynamodb:UpdateItem", "ConnectionsTable"}: "the dashboard's OAuth2 re-authorization sets the connection ACTIVE again after the token exchange, which no moto test reaches (TestOAuth2Connect in pkg/dashboard covers it on SQLite)",
		{"dynamodb:UpdateItem", "ProjectsTable"}:    "the dashboard's test event of a FREE or TEAM project takes from its webhooksPerSecond bucket (dynamostore.Buckets: the same AdmitDelivery as WebhookFunction's, exercised there; TestRateBucketsPerProject)",
	},
	"WorkflowHookFunction": {
		{"dynamodb:DeleteItem", "RunsTable"}:              "sqsqueue deletes the run it wrote when SendMessage fails (exercised through WebhookFunction)",
		{"dynamodb:UpdateItem", "ConnectionsTable"}:       "the engine marks a connection whose credential got 401/403 (exercised through RunnerFunction)",
		{"dynamodb:GetItem", "RunsTable"}:                 "an ON_COMPLETION wait reads the run's status (then the run) when another execution holds it: seen only when timing allows",
		{"dynamodb:PutItem", "AlertsTable"}:               "a run finished inline whose event a subscription wants commits the delivery with it (exercised through RunnerFunction)",
		{"dynamodb:Query", "FlowsTable/index/byProject"}:  "a delivery to a project with a storedBytes limit has its usage measured: the same AdmitDelivery as WebhookFunction's, exercised there",
		{"dynamodb:BatchGetItem", "FlowsTable"}:           "the same measurement reads the project's flow items (exercised through WebhookFunction)",
		{"dynamodb:DeleteItem", "SamplesTable"}:           "a bound's slots item is deleted once empty; no scenario here runs a flow with concurrency or throttle (TestConcurrencyOnMoto in pkg/awsapp and the storetest Slots contract on moto do)",
		{"dynamodb:UpdateItem", "ProjectsTable"}:          "a delivery to a FREE or TEAM project takes from its webhooksPerSecond bucket: the same AdmitDelivery as WebhookFunction's, exercised there",
		{"secretsmanager:CreateSecret", "ProjectSecrets"}: "a refreshed OAuth2 token goes into the project's secret, which exists once the connection was made; only a connection made before the one-secret-per-project release, its project not yet migrated, has none, and the refresh creates (and tags) it (TestMigrate in pkg/smsecrets covers the fallback)",
		{"secretsmanager:TagResource", "ProjectSecrets"}:  "a refreshed OAuth2 token goes into the project's secret, which exists once the connection was made; only a connection made before the one-secret-per-project release, its project not yet migrated, has none, and the refresh creates (and tags) it (TestMigrate in pkg/smsecrets covers the fallback)",
	},
	"RunnerFunction": {
		{"dynamodb:DeleteItem", "RunsTable"}:              "sqsqueue deletes the run of a schedule firing it could not queue (exercised through WebhookFunction)",
		{"s3:DeleteObject", "PayloadBucket/*"}:            "the same undo deletes that run's payload objects (exercised through WebhookFunction and WorkflowHookFunction)",
		{"sqs:ReceiveMessage", "RunQueue"}:                "the event source mapping polls the run queue with the runner's role (RunnerQueueMapping; TestQueueAndRunner)",
		{"sqs:DeleteMessage", "RunQueue"}:                 "the event source mapping deletes the records the runner did not report as failed",
		{"sqs:GetQueueAttributes", "RunQueue"}:            "the event source mapping reads the queue's attributes when it is created",
		{"dynamodb:DeleteItem", "SamplesTable"}:           "a bound's slots item is deleted once empty; no scenario here runs a flow with concurrency or throttle (TestConcurrencyOnMoto in pkg/awsapp and the storetest Slots contract on moto do)",
		{"secretsmanager:CreateSecret", "ProjectSecrets"}: "a refreshed OAuth2 token goes into the project's secret, which exists once the connection was made; only a connection made before the one-secret-per-project release, its project not yet migrated, has none, and the refresh creates (and tags) it (TestMigrate in pkg/smsecrets covers the fallback)",
		{"secretsmanager:TagResource", "ProjectSecrets"}:  "a refreshed OAuth2 token goes into the project's secret, which exists once the connection was made; only a connection made before the one-secret-per-project release, its project not yet migrated, has none, and the refresh creates (and tags) it (TestMigrate in pkg/smsecrets covers the fallback)",
	},
}

// TestGrantsMatchObservedCalls compares, for each function, the AWS calls
// the grant tests made through it (on moto, recorded by cfgOf) with the
// statements of its role in the translated template: every call is
// granted, and every grant is used or in the reasoned list unobserved.
// The calls are those of grantTests alone, whatever else ran before.
func TestGrantsMatchObservedCalls(t *testing.T) {
	// A grant test that has not passed yet in this process (-run picking
	// this test alone, or another order) runs here, in grantTests' order.
	calls := map[string]map[grant]bool{}
	for _, gt := range grantTests {
		recorded.Lock()
		log := recorded.passed[gt.name]
		recorded.Unlock()
		if log == nil {
			t.Run(gt.name, gt.run)
			recorded.Lock()
			log = recorded.passed[gt.name]
			recorded.Unlock()
		}
		if log == nil {
			t.Fatalf("%s did not pass: the grants cannot be compared", gt.name)
		}
		log.mu.Lock()
		for fn, gs := range log.m {
			if calls[fn] == nil {
				calls[fn] = map[grant]bool{}
			}
			maps.Copy(calls[fn], gs)
		}
		log.mu.Unlock()
	}
	tpl := translate(t, nil)
	for id, fn := range functions(tpl) {
		used := calls[id]
		role := fn["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
		granted := roleGrants(t, tpl.Resources[role].Properties)
		for g := range used {
			if !granted[g] && !granted[within(g)] {
				t.Errorf("%s calls %s, which its role does not grant", id, g)
			}
		}
		// A grant kept without a call must still be granted: the failure
		// paths it covers are why it is there.
		for g := range unobserved[id] {
			if !granted[g] {
				t.Errorf("%s: %s is listed as needed on an unexercised path, but its role does not grant it", id, g)
			}
		}
		for g := range granted {
			if used[g] || g.resource == "ProjectSecrets" && used[grant{g.action, "ConnectionSecrets"}] {
				continue
			}
			if _, ok := unobserved[id][g]; ok {
				continue
			}
			// A function that reads payload objects may list the bucket:
			// without s3:ListBucket, S3 answers a missing object 403
			// AccessDenied instead of 404 NoSuchKey, and a missing payload
			// would look like a permissions failure.
			if g.action == "s3:ListBucket" && used[grant{"s3:GetObject", g.resource + "/*"}] {
				continue
			}
			t.Errorf("%s is granted %s, which none of its calls used", id, g)
		}
		var list []string
		for g := range used {
			list = append(list, g.String())
		}
		slices.Sort(list)
		t.Logf("%s uses: %s", id, strings.Join(list, "; "))
	}
}

// within is g on the resource that contains g's: a connection's secret is
// one of the project's secrets.
func within(g grant) grant {
	if g.resource == "ConnectionSecrets" {
		return grant{g.action, "ProjectSecrets"}
	}
	return g
}

var subRef = regexp.MustCompile(`^\$\{([A-Za-z]+)\.Arn\}(.*)$`)

// roleGrants lists the (action, resource) pairs of a role's inline policies.
func roleGrants(t *testing.T, role map[string]any) map[grant]bool {
	out := map[grant]bool{}
	policies, _ := role["Policies"].([]any)
	for _, p := range policies {
		doc, _ := p.(map[string]any)["PolicyDocument"].(map[string]any)
		stmts, _ := doc["Statement"].([]any)
		for _, s := range stmts {
			st := s.(map[string]any)
			// A statement under a condition (the OpenID Connect client
			// secret's) is granted as when the condition holds: the tests
			// run with that setting on.
			if cond, ok := st["Fn::If"].([]any); ok && len(cond) == 3 {
				st, _ = cond[1].(map[string]any)
			}
			if st["Effect"] != "Allow" {
				continue
			}
			for _, a := range list(st["Action"]) {
				for _, r := range list(st["Resource"]) {
					out[grant{a.(string), resourceName(t, r)}] = true
				}
			}
		}
	}
	return out
}

func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// resourceName names a policy resource by the template's logical IDs.
func resourceName(t *testing.T, r any) string {
	m, _ := r.(map[string]any)
	if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) == 2 && ga[1] == "Arn" {
		return ga[0].(string)
	}
	if ref, ok := m["Ref"].(string); ok {
		return ref
	}
	if sub, ok := m["Fn::Sub"].(string); ok {
		if g := subRef.FindStringSubmatch(sub); g != nil {
			return g[1] + g[2]
		}
		switch {
		case strings.HasSuffix(sub, ":secret:flow/${Stage}/*"):
			return "ProjectSecrets"
		case strings.HasSuffix(sub, ":secret:flow/${Stage}/*/connections/*"):
			return "ConnectionSecrets"
		case strings.HasSuffix(sub, ":schedule/${ScheduleGroup}/*"):
			return "ScheduleGroup/*"
		}
	}
	t.Errorf("policy resource %v: not understood by the grants test", r)
	return fmt.Sprint(r)
}
