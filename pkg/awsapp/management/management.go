// Package management wires the management API function: the Service with
// the parts only it has (EventBridge Scheduler, the stage's cursor key
// secret, the EventBridge cron checker) and its HTTP surface, the API with
// its OpenAPI document and the dashboard under /ui/. It is a package of its
// own so that the receivers and the runner, which import pkg/awsapp, link
// none of it.
package management

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/dashboard"
	"flowservice/pkg/ebscheduler"
	"flowservice/pkg/engine"
	"flowservice/pkg/httpapi"
	"flowservice/pkg/lambdacode"
	"flowservice/pkg/mcpserver"
)

// NewHandler builds the management API function.
func NewHandler(ctx context.Context, awsCfg aws.Config, cfg awsapp.Config) (awsapp.ProxyHandler, error) {
	a, err := New(ctx, awsCfg, cfg)
	if err != nil {
		return nil, err
	}
	oidc, err := oidcSettings(ctx, secretReader{secretsmanager.NewFromConfig(awsapp.ClientConfig(awsCfg, cfg)).GetSecretValue}, cfg.OIDC)
	if err != nil {
		return nil, err
	}
	return a.Proxy("api", handler(a, oidc)), nil
}

// oidcSettings is the dashboard's OpenID Connect sign-in, its client secret
// read from Secrets Manager once per cold start (a rotated secret reaches
// each environment at its next cold start); nil when it is off.
func oidcSettings(ctx context.Context, sm secretReader, o awsapp.OIDCConfig) (*dashboard.OIDC, error) {
	if !o.Enabled() {
		return nil, nil
	}
	out, err := sm.get(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(o.ClientSecretARN)})
	if err != nil {
		return nil, fmt.Errorf("management: read the OpenID Connect client secret %s: %w", o.ClientSecretARN, err)
	}
	secret := string(out.SecretBinary)
	if out.SecretString != nil {
		secret = *out.SecretString
	}
	// A secret typed into the console often ends in a newline.
	if secret = strings.TrimSpace(secret); secret == "" {
		return nil, fmt.Errorf("management: the OpenID Connect client secret %s is empty", o.ClientSecretARN)
	}
	return &dashboard.OIDC{
		Issuer: o.Issuer, ClientID: o.ClientID, ClientSecret: secret,
		AllowedDomains: o.AllowedDomains, ViewerProject: o.ViewerProject,
	}, nil
}

// New builds the management API's Service: with the scheduler, and with the
// cursor key read from Secrets Manager.
func New(ctx context.Context, awsCfg aws.Config, cfg awsapp.Config) (*awsapp.App, error) {
	if err := awsapp.Need("api function", "SCHEDULE_GROUP", cfg.ScheduleGroup, "QUEUE_ARN", cfg.QueueARN,
		"SCHEDULER_ROLE_ARN", cfg.SchedulerRoleARN, "CURSOR_KEY_SECRET_ARN", cfg.CursorKeySecretARN,
		"TABLE_AUDIT", cfg.Tables.Audit); err != nil {
		return nil, err
	}
	clients := awsapp.ClientConfig(awsCfg, cfg)
	sm := secretsmanager.NewFromConfig(clients)
	key, err := cursorKey(ctx, secretReader{sm.GetSecretValue}, cfg.CursorKeySecretARN)
	if err != nil {
		return nil, err
	}
	sched, err := ebscheduler.New(newSchedulerClient(scheduler.NewFromConfig(clients)), ebscheduler.Config{
		Group: cfg.ScheduleGroup, QueueARN: cfg.QueueARN, RoleARN: cfg.SchedulerRoleARN,
		DeadLetterARN: cfg.ScheduleDeadLetterARN,
	})
	if err != nil {
		return nil, fmt.Errorf("management: %w", err)
	}
	// EventBridge Scheduler cannot express every cron spec nor every poll
	// interval: refuse those when the flow is saved, not when it is enabled.
	checker := ebscheduler.Checker{Checker: engine.Checker{}}
	parts := awsapp.Parts{
		Name: "api function", Scheduler: sched, CursorKey: key, Checker: checker, PollChecker: checker,
	}
	if cfg.Code != nil {
		parts.CodeChecker = codeChecker{code: cfg.Code}
	}
	return awsapp.New(ctx, awsCfg, cfg, parts)
}

// codeChecker is the api function's CODE compile check
// (automation.CodeChecker), done by the code function, which carries the
// JavaScript engine this function does not.
type codeChecker struct {
	code automation.CodeRunner
}

// Code compiles a CODE step's script in the code function.
func (c codeChecker) Code(src string) error { return lambdacode.CodeCheck(c.code, src) }

// secretReader is the call cursorKey makes, held as a method value rather
// than the client (see schedulerClient).
type secretReader struct {
	get func(context.Context, *secretsmanager.GetSecretValueInput, ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// schedulerClient forwards ebscheduler's four calls to the SDK client
// through method values: the client itself is never stored in an interface,
// so the linker keeps only these operations although the expression engine
// calls methods by reflection (see pkg/awsapp's clients.go).
type schedulerClient struct {
	create func(context.Context, *scheduler.CreateScheduleInput, ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	update func(context.Context, *scheduler.UpdateScheduleInput, ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error)
	del    func(context.Context, *scheduler.DeleteScheduleInput, ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
	get    func(context.Context, *scheduler.GetScheduleInput, ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error)
}

func newSchedulerClient(c *scheduler.Client) schedulerClient {
	return schedulerClient{create: c.CreateSchedule, update: c.UpdateSchedule, del: c.DeleteSchedule, get: c.GetSchedule}
}

func (x schedulerClient) CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	return x.create(ctx, in, opts...)
}

func (x schedulerClient) UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error) {
	return x.update(ctx, in, opts...)
}

func (x schedulerClient) DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error) {
	return x.del(ctx, in, opts...)
}

func (x schedulerClient) GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error) {
	return x.get(ctx, in, opts...)
}

// cursorKey returns the key that authenticates page cursors, read once per
// cold start: every instance must open the cursors any other issued.
func cursorKey(ctx context.Context, sm secretReader, arn string) ([]byte, error) {
	out, err := sm.get(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return nil, fmt.Errorf("management: read cursor key %s: %w", arn, err)
	}
	key := out.SecretBinary
	if out.SecretString != nil {
		key = []byte(*out.SecretString)
	}
	if len(key) < 32 {
		return nil, errors.New("management: the cursor key secret holds fewer than 32 bytes")
	}
	return key, nil
}

// Handler serves the management API and, under /ui/, the dashboard
// (without OpenID Connect sign-in).
func Handler(a *awsapp.App) http.Handler { return handler(a, nil) }

func handler(a *awsapp.App, oidc *dashboard.OIDC) http.Handler {
	mux := http.NewServeMux()
	// A browser opening the stage's root lands on the dashboard.
	// MCP tool calls wait for runs the runner executes: this function has
	// neither the runner's network (VPC) nor its time.
	mcp := mcpserver.New(a.Svc, mcpserver.Options{Wait: a.MCPWait, WatchOnly: true, Log: a.Log})
	mux.Handle("/", dashboard.RootRedirect(httpapi.NewAPI(a.Svc, a.Log, httpapi.WithAlerts(a.Alerts), httpapi.WithClientIP(awsapp.SourceIP),
		httpapi.WithResponseBudget(a.Budget), httpapi.WithPublicPrefix(stagePrefix), httpapi.WithMCP(mcp)), stagePrefix))
	mux.Handle("/ui/", newDashboard(a, oidc))
	return mux
}

// newDashboard is the dashboard under {base_url}/ui/. API Gateway serves
// only HTTPS, so its cookies are always Secure; links carry the stage.
func newDashboard(a *awsapp.App, oidc *dashboard.OIDC) http.Handler {
	return dashboard.New(a.Svc, dashboard.Options{
		Key: a.CursorKey, SecureCookies: true, Prefix: stagePrefix, Log: a.Log, ClientIP: awsapp.SourceIP,
		OpenAPI: httpapi.OpenAPIDocument(), Alerts: a.Alerts, OIDC: oidc,
	})
}

// stagePrefix is the public path in front of a request's path: the stage
// ("/prod") on an execute-api URL, which the proxy event's path lacks.
func stagePrefix(r *http.Request) string {
	rc, ok := core.GetAPIGatewayContextFromContext(r.Context())
	if !ok {
		return ""
	}
	if prefix, ok := strings.CutSuffix(rc.Path, r.URL.Path); ok && strings.HasPrefix(prefix, "/") {
		return prefix
	}
	return ""
}
