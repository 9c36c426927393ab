package awsapp

import (
	"context"
	"crypto/rand"
	"flowservice/pkg/apps"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/emf"
	"flowservice/pkg/engine"
	"flowservice/pkg/oauth"
	"flowservice/pkg/passwords"
	"flowservice/pkg/respbudget"
	"flowservice/pkg/s3payloads"
	"flowservice/pkg/smsecrets"
	"flowservice/pkg/sqsqueue"
	"flowservice/pkg/tracing"
)

// App is what one cold start builds: SDK clients, adapters and the Service.
type App struct {
	Svc *automation.Service
	Log *slog.Logger
	// CursorKey authenticates page cursors; the management API's dashboard
	// derives its session key from it.
	CursorKey []byte

	metrics *emf.Writer
	cold    coldStart
	// Alerts serves event subscriptions; nil without TABLE_ALERTS.
	// alertsWritten reports whether this instance wrote deliveries since
	// it last asked (dynamostore.Store.AlertsWritten).
	Alerts        *alerts.Service
	alertsWritten func() bool
	// queue sends the alerts sweep after an HTTP invocation that wrote
	// deliveries (nudgeAlerts).
	queue *sqsqueue.Queue
	// Budget is what the management API cuts its answers to
	// (LambdaBudget of Config.ResponseBudget).
	Budget respbudget.Budget
	// MCPWait is how long an MCP tools/call waits for its run
	// (Config.MCPWait, default DefaultMCPWait).
	MCPWait time.Duration
	// tracer exports spans; nil when tracing is off. Every invocation
	// flushes it before it returns (flushTraces).
	tracer *tracing.Tracer
}

// Parts are what only some functions have. Each is built by the package of
// the function that needs it (pkg/awsapp/management for the scheduler and
// the cursor key), so that the others do not link it.
type Parts struct {
	// Name is the function's name in error messages.
	Name string
	// Scheduler changes schedules: only the management API enables,
	// updates or deletes flows, and only it holds the grants. Nil elsewhere.
	Scheduler automation.Scheduler
	// Checker validates flows when they are saved: the management API's
	// also refuses cron specs EventBridge Scheduler cannot express. Nil is
	// engine.Checker.
	Checker automation.Checker
	// CodeChecker compiles CODE scripts at save time (the management API's
	// asks the code function); PollChecker refuses POLL intervals
	// EventBridge Scheduler cannot keep. Nil: no such check.
	CodeChecker automation.CodeChecker
	PollChecker automation.PollChecker
	// CursorKey is the stage's cursor key secret. The receivers and the
	// runner never issue or open a cursor: nil gives them a random key
	// instead of a grant on the secret and a call on their cold start.
	CursorKey []byte
}

// New builds the Service for a function. It runs once per cold start: the
// SDK clients it creates keep their connections for every invocation of the
// execution environment.
func New(ctx context.Context, awsCfg aws.Config, cfg Config, p Parts) (*App, error) {
	log := newLogger(cfg)
	m := emf.New(cfg.logOutput(), cfg.Stage)
	t := cfg.Tables
	if err := Need(p.Name, "TABLE_PROJECTS", t.Projects, "TABLE_KEYS", t.Keys, "TABLE_FLOWS", t.Flows,
		"TABLE_ROUTES", t.Routes, "TABLE_CONNECTIONS", t.Connections, "TABLE_RUNS", t.Runs, "TABLE_SAMPLES", t.Samples,
		"SECRET_PREFIX", cfg.SecretPrefix,
		"QUEUE_URL", cfg.QueueURL, "PAYLOAD_BUCKET", cfg.PayloadBucket); err != nil {
		return nil, err
	}
	tracer := cfg.Tracer
	if tracer == nil {
		var err error
		if tracer, err = tracing.FromEnv(ctx, "flowservice-"+strings.TrimSuffix(p.Name, " function"), log); err != nil {
			return nil, fmt.Errorf("awsapp: %w", err)
		}
	}
	awsCfg = ClientConfig(awsCfg, cfg)
	db := dynamodb.NewFromConfig(awsCfg)
	sm := secretsmanager.NewFromConfig(awsCfg)
	opts := []dynamostore.Option{
		// Run parts too large for an item (webhook bodies, big step
		// outputs) go to the payload bucket.
		dynamostore.WithPayloads(s3payloads.New(s3payloads.NewClient(awsCfg, cfg.Observe), cfg.PayloadBucket)),
		dynamostore.WithLogger(log),
	}
	if cfg.RunPolicy.Retention > 0 {
		// Runs expire (TTL) when the Service's policy says they do.
		opts = append(opts, dynamostore.WithRunRetention(cfg.RunPolicy.Retention))
	}
	dbc := newDynamoClient(db)
	store := dynamostore.New(dbc, cfg.Tables, opts...)
	// Secrets read on every delivery or run (a flow's signature secret, an
	// API key connection) are kept at most a minute in the environment,
	// under the version of the record they belong to (smsecrets.Cached).
	secrets := smsecrets.NewCached(smsecrets.New(newSecretsClient(sm), cfg.SecretPrefix), smsecrets.MaxCacheAge)

	cursorKey := p.CursorKey
	if cursorKey == nil {
		cursorKey = make([]byte, 32)
		_, _ = rand.Read(cursorKey) // never fails (crypto/rand)
	}
	// A run is durable once its record is in DynamoDB and its message in
	// SQS; the runner executes it from there.
	queue := sqsqueue.New(store, newSqsClient(sqs.NewFromConfig(awsCfg)), cfg.QueueURL)
	rt := &automation.RunRuntime{
		Runs: emf.Runs(store, m), Queue: queue, Policy: cfg.RunPolicy,
		// SQS delays a paused run's message, queues sub-minute polls and
		// wakes a caller with a message; DynamoDB reads a status alone, and
		// a parked run's due time when its message comes early.
		Delayer: queue, PollDelayer: queue, Waker: queue, StatusReader: store, DueReader: store,
		// Approvals and callbacks: waitpoints are items of the runs table.
		Waitpoints: store,
		NewExecutor: func(env automation.ExecEnv) automation.Executor {
			return engine.New(engine.Config{Env: env, AllowPrivateNetworks: cfg.AllowPrivateNetworks, Code: cfg.Code, Log: log, RootCAs: cfg.RootCAs,
				UserAgent: engine.UserAgent(cfg.EngineURL), Clock: cfg.Clock})
		},
		// A receiver is frozen once it answers: its inline attempt must
		// not outlive the answer.
		StopInlineAtAnswer: true,
	}
	checker := p.Checker
	if checker == nil {
		checker = engine.Checker{}
	}
	svc, err := automation.NewService(automation.Config{
		Checker: checker, CodeChecker: p.CodeChecker, PollChecker: p.PollChecker,
		Store: store, Secrets: secrets, SecretCache: secrets, Polls: store, Scheduler: p.Scheduler, Runtime: rt,
		// Environments share no memory: webhooksPerSecond and
		// outboundPerMinute are DynamoDB buckets of the project.
		RateBuckets: dynamostore.NewBuckets(dbc, t.Projects),
		Clock:       cfg.Clock,
		CursorKey:   cursorKey, EngineURL: cfg.EngineURL, WorkflowURL: cfg.WorkflowURL, Log: log,
		OAuthApps: oauthApps(store, cfg.Tables),
		// People live in the keys table, which only the api function reads.
		Users: store, Passwords: passwords.Hasher{},
		// Token endpoints are outbound calls like HTTP steps: the same guard,
		// and a refresh made for a step is a span of that step.
		OAuth:  oauth.New(engine.TraceTransport(tracer.Port(), engine.GuardedTransport(cfg.AllowPrivateNetworks))),
		Tracer: tracer.Port(),
		Apps:   apps.MustLoad(),
	})
	if err != nil {
		return nil, fmt.Errorf("awsapp: %w", err)
	}
	alertSvc, err := newAlerts(store, cfg, svc, log) // alerts.go
	if err != nil {
		return nil, fmt.Errorf("awsapp: %w", err)
	}
	return &App{Svc: svc, Log: log, CursorKey: cursorKey, metrics: m, Alerts: alertSvc, alertsWritten: store.AlertsWritten, queue: queue,
		Budget: LambdaBudget(cfg.responseBudget()), MCPWait: cfg.mcpWait(), tracer: tracer}, nil
}

// ClientConfig is awsCfg for the SDK clients of a function: with
// cfg.Observe's middleware when it is set.
func ClientConfig(awsCfg aws.Config, cfg Config) aws.Config {
	if cfg.Observe != nil {
		awsCfg.APIOptions = append(slices.Clip(awsCfg.APIOptions), observeCalls(cfg.Observe))
	}
	return awsCfg
}

// newLogger returns the JSON logger of a function. Each line carries the
// invocation's IDs and cold-start flag (invocationHandler), so CloudWatch
// Logs Insights can gather one invocation's lines and follow its trace.
func newLogger(cfg Config) *slog.Logger {
	h := slog.NewJSONHandler(cfg.logOutput(), &slog.HandlerOptions{Level: cfg.LogLevel})
	return slog.New(invocationHandler{h})
}

// oauthApps is the OAuth2 apps table, or nil for a stage deployed before
// it existed (TABLE_OAUTH_APPS unset): no Connect buttons, no refresh.
func oauthApps(store *dynamostore.Store, t dynamostore.Tables) automation.OAuthAppStore {
	if t.OAuthApps == "" {
		return nil
	}
	return store
}
