// Package awsapp wires the flow service for AWS Lambda: it builds the
// Service on the AWS adapters (DynamoDB, Secrets Manager, SQS, EventBridge
// Scheduler) once per cold start and returns the handlers the four
// functions in functions/ pass to lambda.Start. Handler construction is a
// plain function of a Config and an aws.Config, so tests call it with a
// local AWS emulator exactly as the Lambda runtime would.
//
// The package never reads the environment itself: each main calls
// ConfigFrom(os.Getenv), so the variables the template sets are listed in
// one place (ConfigFrom) and read only in main.
//
// It holds wiring and the proxy event's edges only; what the functions run
// lives with its adapter: the run queue's consumer and back-off in
// pkg/sqsqueue (Runner, Backoff), the payload bucket's client in
// pkg/s3payloads (Client), metrics in pkg/emf, the SDK configuration from
// the Lambda environment in pkg/awsenv.
package awsapp

import (
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/tracing"
)

// Limits of a request's way through API Gateway to a function.
const (
	// LambdaPayloadLimit is the largest synchronous invocation event Lambda
	// takes ("6 MB"; taken as 6,000,000 bytes, below the 6 MiB it enforces).
	// API Gateway answers a 5xx for a request whose event is larger: the
	// function never sees it and cannot answer 413.
	LambdaPayloadLimit = 6_000_000
	// ProxyEventOverhead bounds what a REST API proxy event holds besides
	// the body: API Gateway admits 10 KiB of request line and headers, which
	// the event carries twice (headers and multiValueHeaders, the query
	// string likewise), plus the request context. 256 KiB is ample.
	ProxyEventOverhead = 256 << 10
	// MaxProxyBody is the largest webhook body a receiver accepts on Lambda
	// (flowd: 10 MiB). The receivers' APIs take every media type as binary,
	// so that signatures verify over the sender's bytes, and a binary body
	// reaches the function base64-encoded, 4/3 its size: 4,303,392 bytes
	// become a 5,737,856-byte body field, and with the rest of the event
	// stay within LambdaPayloadLimit. Larger bodies answer 413 from the
	// function up to about 4.4 MB; beyond that API Gateway fails first.
	MaxProxyBody = (LambdaPayloadLimit - ProxyEventOverhead) / 4 * 3

	// APIGatewayTimeout is REST API's integration timeout.
	APIGatewayTimeout = 29 * time.Second
	// MaxSyncTimeout is the longest an ON_COMPLETION webhook may wait for
	// its run: API Gateway's 29 s less 4 s for a cold start, the writes
	// around the run and the answer.
	MaxSyncTimeout = APIGatewayTimeout - 4*time.Second
	// DefaultMCPWait is how long an MCP tools/call waits for its run on
	// Lambda: at most MaxSyncTimeout, for the same reason, so that the
	// "still running" answer naming the run comes before API Gateway
	// gives up.
	DefaultMCPWait = MaxSyncTimeout
)

// Config is what the functions need to know about their deployment. main
// fills it from the environment the template sets (ConfigFrom); tests fill
// it directly.
type Config struct {
	Stage  string
	Tables dynamostore.Tables
	// QueueURL is the run queue; QueueARN is the target that schedules send
	// to (management API only).
	QueueURL, QueueARN string
	// PayloadBucket keeps webhook bodies too large for a queue message.
	PayloadBucket string
	// SecretPrefix names the stage's secrets: <prefix>/<project>/<name>.
	SecretPrefix string
	// CursorKeySecretARN is the secret whose value authenticates page
	// cursors (management API only).
	CursorKeySecretARN string
	// EngineURL and WorkflowURL are the receivers' public bases, put in
	// webhook descriptors (management API); EngineURL is also the base of
	// approval links and callback URLs, which the functions that execute
	// runs make (runner, workflow builder receiver).
	EngineURL, WorkflowURL string
	// ScheduleGroup and SchedulerRoleARN are where schedules go and the role
	// they send to the queue as (management API only).
	ScheduleGroup, SchedulerRoleARN string
	// ScheduleDeadLetterARN, if set, receives firings EventBridge Scheduler
	// could not deliver to the queue.
	ScheduleDeadLetterARN string
	// AllowedCIDRs is the platform-wide allowlist of the receivers, also
	// enforced by the API Gateway resource policy; empty admits every
	// address. Per-flow allowlists apply on top.
	AllowedCIDRs []netip.Prefix
	// MaxBody bounds a webhook body; default MaxProxyBody.
	MaxBody int64
	// ResponseBudget is what the management API cuts its answers to, as
	// Lambda returns them; default (0) ResponseBudget. Tests set a small
	// one.
	ResponseBudget int
	// SyncTimeout is how long an ON_COMPLETION webhook waits for its run:
	// below the function's timeout and API Gateway's 29 s.
	SyncTimeout time.Duration
	// MCPWait is how long an MCP tools/call waits for its run (MCP_WAIT):
	// default and at most DefaultMCPWait.
	MCPWait time.Duration
	// RunPolicy bounds runs: its Timeout must stay below the runner's.
	RunPolicy automation.RunPolicy
	// AllowPrivateNetworks lets HTTP steps reach private addresses.
	AllowPrivateNetworks bool
	// RootCAs are the certificate authorities EMAIL steps trust for their
	// SMTP server's TLS; nil: the system's (the Lambda image's). Tests set
	// the pool of their own server.
	RootCAs *x509.CertPool
	// Code runs CODE steps (the code function through Lambda Invoke, or
	// flowd's sandbox); nil fails them as not available.
	Code     automation.CodeRunner
	LogLevel slog.Level
	// Observe, if set, is told the service, operation and input of every
	// AWS call the function makes, before it is sent (deploy's tests compare
	// them with the function's IAM grants).
	Observe func(service, operation string, input any)
	// LogOutput receives the JSON log lines; default os.Stderr, which
	// Lambda sends to CloudWatch Logs.
	LogOutput io.Writer
	// OIDC is the dashboard's OpenID Connect sign-in (api function only);
	// off while its Issuer is empty.
	OIDC OIDCConfig
	// Tracer exports the function's spans (pkg/tracing); nil: New builds
	// the one the OTEL_* variables ask for, none without an endpoint.
	// flowd's aws backend hands its own, tests theirs.
	Tracer *tracing.Tracer
	// Clock is the service's and the engine's clock (quotas, slots,
	// throttles, WAIT, a waitpoint's expiry); nil: time.Now. Tests move it
	// to decide a time rule without waiting on the wall clock.
	Clock func() time.Time
}

// OIDCConfig is the dashboard's OpenID Connect sign-in on AWS: the
// template's Oidc* parameters. The client secret is not here but in Secrets
// Manager (ClientSecretARN), read by the api function at cold start, so that
// it is never a Lambda environment variable or a stack parameter
// (docs/aws.md "Dashboard sign-in with OpenID Connect").
type OIDCConfig struct {
	Issuer, ClientID, ClientSecretARN string
	// AllowedDomains let people of those email domains in as viewers of
	// ViewerProject (a project name; default automation.DefaultProject).
	AllowedDomains []string
	ViewerProject  string
}

// Enabled reports whether sign-in with OpenID Connect is configured.
func (o OIDCConfig) Enabled() bool { return o.Issuer != "" }

// oidcFrom reads OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET_ARN,
// OIDC_ALLOWED_DOMAINS and OIDC_VIEWER_PROJECT, with the rules flowd
// applies to its FLOWD_OIDC_* settings.
func oidcFrom(getenv func(string) string) (OIDCConfig, error) {
	o := OIDCConfig{Issuer: strings.TrimSpace(getenv("OIDC_ISSUER")), ClientID: strings.TrimSpace(getenv("OIDC_CLIENT_ID")),
		ClientSecretARN: strings.TrimSpace(getenv("OIDC_CLIENT_SECRET_ARN")), ViewerProject: strings.TrimSpace(getenv("OIDC_VIEWER_PROJECT"))}
	domains := getenv("OIDC_ALLOWED_DOMAINS")
	if o.Issuer == "" {
		if o.ClientID != "" || o.ClientSecretARN != "" || strings.TrimSpace(domains) != "" {
			return OIDCConfig{}, fmt.Errorf("OIDC_CLIENT_ID, OIDC_CLIENT_SECRET_ARN or OIDC_ALLOWED_DOMAINS is set without OIDC_ISSUER: set the provider's issuer URL too")
		}
		return OIDCConfig{}, nil
	}
	if u, err := url.Parse(o.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return OIDCConfig{}, fmt.Errorf("OIDC_ISSUER=%q: want the provider's issuer URL, such as https://accounts.google.com", o.Issuer)
	}
	if o.ClientID == "" || o.ClientSecretARN == "" {
		return OIDCConfig{}, fmt.Errorf("OIDC_ISSUER is set: OIDC_CLIENT_ID and OIDC_CLIENT_SECRET_ARN (the Secrets Manager secret holding the client secret) are needed too")
	}
	if !strings.HasPrefix(o.ClientSecretARN, "arn:") || !strings.Contains(o.ClientSecretARN, ":secretsmanager:") || !strings.Contains(o.ClientSecretARN, ":secret:") {
		return OIDCConfig{}, fmt.Errorf("OIDC_CLIENT_SECRET_ARN=%q: want a Secrets Manager secret's ARN, such as arn:aws:secretsmanager:us-east-1:123456789012:secret:oidc-client-AbCdEf", o.ClientSecretARN)
	}
	for _, d := range strings.Split(domains, ",") {
		if d = strings.ToLower(strings.TrimSpace(d)); d != "" {
			if strings.ContainsAny(d, "@/ ") || !strings.Contains(d, ".") {
				return OIDCConfig{}, fmt.Errorf("OIDC_ALLOWED_DOMAINS: %q is not an email domain such as example.com", d)
			}
			o.AllowedDomains = append(o.AllowedDomains, d)
		}
	}
	if o.ViewerProject == "" {
		o.ViewerProject = automation.DefaultProject
	}
	return o, nil
}

// ConfigFrom reads the variables template.yaml sets, through getenv (main
// passes os.Getenv), and refuses values it cannot use. Variables a function
// does not get are left empty; the handler constructors check what they
// need.
func ConfigFrom(getenv func(string) string) (Config, error) {
	c := Config{
		Stage: getenv("STAGE"),
		Tables: dynamostore.Tables{
			Projects:    getenv("TABLE_PROJECTS"),
			Keys:        getenv("TABLE_KEYS"),
			Flows:       getenv("TABLE_FLOWS"),
			Routes:      getenv("TABLE_ROUTES"),
			Connections: getenv("TABLE_CONNECTIONS"),
			Runs:        getenv("TABLE_RUNS"),
			Samples:     getenv("TABLE_SAMPLES"),
			OAuthApps:   getenv("TABLE_OAUTH_APPS"),
			Alerts:      getenv("TABLE_ALERTS"),
			Audit:       getenv("TABLE_AUDIT"),
		},
		QueueURL:              getenv("QUEUE_URL"),
		QueueARN:              getenv("QUEUE_ARN"),
		PayloadBucket:         getenv("PAYLOAD_BUCKET"),
		SecretPrefix:          getenv("SECRET_PREFIX"),
		CursorKeySecretARN:    getenv("CURSOR_KEY_SECRET_ARN"),
		EngineURL:             getenv("ENGINE_URL"),
		WorkflowURL:           getenv("WORKFLOW_URL"),
		ScheduleGroup:         getenv("SCHEDULE_GROUP"),
		SchedulerRoleARN:      getenv("SCHEDULER_ROLE_ARN"),
		ScheduleDeadLetterARN: getenv("SCHEDULE_DLQ_ARN"),
	}
	for _, s := range strings.Split(getenv("ALLOWED_CIDRS"), ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := parsePrefix(s)
		if err != nil {
			return c, fmt.Errorf("ALLOWED_CIDRS: %w", err)
		}
		c.AllowedCIDRs = append(c.AllowedCIDRs, p)
	}
	if v := getenv("MAX_BODY_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > MaxProxyBody {
			return c, fmt.Errorf("MAX_BODY_BYTES=%q: want 1 to %d (base64 in a Lambda proxy event of at most 6 MB)", v, MaxProxyBody)
		}
		c.MaxBody = n
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"SYNC_TIMEOUT", &c.SyncTimeout}, {"MCP_WAIT", &c.MCPWait}} {
		v := getenv(d.name)
		if v == "" {
			continue
		}
		t, err := time.ParseDuration(v)
		if err != nil || t <= 0 {
			return c, fmt.Errorf("%s=%q: want a positive duration such as 25s", d.name, v)
		}
		*d.dst = t
	}
	if c.SyncTimeout > MaxSyncTimeout {
		return c, fmt.Errorf("SYNC_TIMEOUT=%s: at most %s, so the answer comes within API Gateway's 29 s integration timeout", c.SyncTimeout, MaxSyncTimeout)
	}
	if c.MCPWait > MaxSyncTimeout {
		return c, fmt.Errorf("MCP_WAIT=%s: at most %s, so the answer comes within API Gateway's 29 s integration timeout", c.MCPWait, MaxSyncTimeout)
	}
	// RUN_*: read as flowd reads FLOWD_RUN_*, defaults in the domain.
	policy, err := automation.ParseRunPolicy(getenv, "")
	if err != nil {
		return c, err
	}
	c.RunPolicy = policy
	// RUN_RETENTION_DAYS is the template's RunRetentionDays, the figure
	// the payload bucket's lifecycle also expires objects by (a day
	// later), so that a run never outlives its payloads. CloudFormation
	// cannot turn days into a duration, so the template passes days.
	if v := getenv("RUN_RETENTION_DAYS"); v != "" {
		d, err := strconv.Atoi(v)
		if err != nil || d < 1 || d > 3650 {
			return c, fmt.Errorf("RUN_RETENTION_DAYS=%q: want whole days from 1 to 3650", v)
		}
		if policy.Retention > 0 && policy.Retention != time.Duration(d)*24*time.Hour {
			return c, fmt.Errorf("RUN_RETENTION=%s and RUN_RETENTION_DAYS=%d disagree: set one", policy.Retention, d)
		}
		c.RunPolicy.Retention = time.Duration(d) * 24 * time.Hour
	}
	if v := getenv("ALLOW_PRIVATE_NETWORKS"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("ALLOW_PRIVATE_NETWORKS=%q: want true or false", v)
		}
		c.AllowPrivateNetworks = b
	}
	if c.OIDC, err = oidcFrom(getenv); err != nil {
		return c, err
	}
	if v := getenv("LOG_LEVEL"); v != "" {
		if err := c.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return c, fmt.Errorf("LOG_LEVEL=%q: allowed values are debug, info, warn, error", v)
		}
	}
	return c, nil
}

// parsePrefix reads a CIDR range or a single address.
func parsePrefix(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither an address nor a CIDR range", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Need reports the first empty setting among name=value pairs: what a
// function needs that its environment lacks.
func Need(what string, pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return fmt.Errorf("awsapp: %s needs %s", what, pairs[i])
		}
	}
	return nil
}

func (c Config) logOutput() io.Writer {
	if c.LogOutput != nil {
		return c.LogOutput
	}
	return os.Stderr
}

func (c Config) mcpWait() time.Duration {
	if c.MCPWait > 0 {
		return c.MCPWait
	}
	return DefaultMCPWait
}

func (c Config) responseBudget() int {
	if c.ResponseBudget > 0 {
		return c.ResponseBudget
	}
	return ResponseBudget
}
