package awsapp

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/automation"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/ebscheduler"
	"flowservice/pkg/engine"
	"flowservice/pkg/oauth"
	"flowservice/pkg/s3payloads"
	"flowservice/pkg/smsecrets"
	"flowservice/pkg/sqsqueue"
)

// role says which function an app serves; it decides what is wired.
type role string

const (
	roleAPI          role = "api"
	roleWebhook      role = "webhook"
	roleWorkflowHook role = "workflowhook"
	roleRunner       role = "runner"
)

// app is what one cold start builds: SDK clients, adapters and the Service.
type app struct {
	svc *automation.Service
	log *slog.Logger
	// cursorKey is also the dashboard's key (it derives its own from it):
	// secret and shared by every instance of the api function.
	cursorKey []byte
}

// newApp builds the Service for a function. It runs once per cold start:
// the SDK clients it creates keep their connections for every invocation
// of the execution environment.
func newApp(ctx context.Context, awsCfg aws.Config, cfg Config, r role) (*app, error) {
	log := NewLogger(cfg)
	t := cfg.Tables
	if err := need(string(r)+" function", "TABLE_PROJECTS", t.Projects, "TABLE_KEYS", t.Keys, "TABLE_FLOWS", t.Flows,
		"TABLE_ROUTES", t.Routes, "TABLE_CONNECTIONS", t.Connections, "TABLE_RUNS", t.Runs, "TABLE_SAMPLES", t.Samples,
		"SECRET_PREFIX", cfg.SecretPrefix,
		"QUEUE_URL", cfg.QueueURL, "PAYLOAD_BUCKET", cfg.PayloadBucket); err != nil {
		return nil, err
	}
	db := dynamodb.NewFromConfig(awsCfg)
	sm := secretsmanager.NewFromConfig(awsCfg)
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		// An explicit endpoint is a local emulator (moto_server, sam local
		// with one), which serves buckets by path, not by host name.
		o.UsePathStyle = awsCfg.BaseEndpoint != nil
	})
	opts := []dynamostore.Option{
		// Run parts too large for an item (webhook bodies up to 6 MB, big
		// step outputs) go to the payload bucket.
		dynamostore.WithPayloads(s3payloads.New(s3c, cfg.PayloadBucket)),
		dynamostore.WithLogger(log),
	}
	if cfg.RunPolicy.Retention > 0 {
		// Runs expire (TTL) when the Service's policy says they do.
		opts = append(opts, dynamostore.WithRunRetention(cfg.RunPolicy.Retention))
	}
	store := dynamostore.New(db, cfg.Tables, opts...)
	secrets := smsecrets.New(sm, cfg.SecretPrefix)

	cursorKey, err := cursorKey(ctx, sm, cfg, r)
	if err != nil {
		return nil, err
	}
	// A run is durable once its record is in DynamoDB and its message in
	// SQS; the runner executes it from there.
	rt := &automation.RunRuntime{
		Runs: store, Queue: sqsqueue.New(store, sqs.NewFromConfig(awsCfg), cfg.QueueURL), Policy: cfg.RunPolicy,
		NewExecutor: func(c automation.Credentials) automation.Executor {
			return engine.New(engine.Config{Credentials: c, AllowPrivateNetworks: cfg.AllowPrivateNetworks, Code: cfg.Code, Log: log})
		},
		// A receiver is frozen once it answers: its inline attempt must
		// not outlive the answer.
		StopInlineAtAnswer: true,
	}
	// Only the management API changes schedules (and only it has the IAM
	// grants); the other functions never enable, update or delete flows.
	var sched automation.Scheduler
	if r == roleAPI {
		if err := need("api function", "SCHEDULE_GROUP", cfg.ScheduleGroup, "QUEUE_ARN", cfg.QueueARN,
			"SCHEDULER_ROLE_ARN", cfg.SchedulerRoleARN); err != nil {
			return nil, err
		}
		s, err := ebscheduler.New(scheduler.NewFromConfig(awsCfg), ebscheduler.Config{
			Group: cfg.ScheduleGroup, QueueARN: cfg.QueueARN, RoleARN: cfg.SchedulerRoleARN,
			DeadLetterARN: cfg.ScheduleDeadLetterARN,
		})
		if err != nil {
			return nil, fmt.Errorf("awsapp: %w", err)
		}
		sched = s
	}
	svc, err := automation.NewService(automation.Config{
		// EventBridge Scheduler cannot express every cron spec: refuse those
		// when the flow is saved, not when it is enabled.
		Checker: ebscheduler.Checker{Checker: engine.Checker{}},
		Store:   store, Secrets: secrets, Scheduler: sched, Runtime: rt,
		CursorKey: cursorKey, EngineURL: cfg.EngineURL, WorkflowURL: cfg.WorkflowURL, Log: log,
		OAuthApps: oauthApps(store, cfg.Tables),
		// Token endpoints are outbound calls like HTTP steps: the same guard.
		OAuth: oauth.New(engine.GuardedTransport(cfg.AllowPrivateNetworks)),
	})
	if err != nil {
		return nil, fmt.Errorf("awsapp: %w", err)
	}
	return &app{svc: svc, log: log, cursorKey: cursorKey}, nil
}

// oauthApps is the OAuth2 apps table, or nil for a stage deployed before
// it existed (TABLE_OAUTH_APPS unset): no Connect buttons, no refresh.
func oauthApps(store *dynamostore.Store, t dynamostore.Tables) automation.OAuthAppStore {
	if t.OAuthApps == "" {
		return nil
	}
	return store
}

// secretReader is the part of the Secrets Manager client cursorKey uses.
type secretReader interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// cursorKey returns the key that authenticates page cursors. The management
// API reads it from Secrets Manager once per cold start: every instance must
// open the cursors any other issued. The receivers and the runner never
// issue or open a cursor, so they get a random key instead of a grant on
// the secret and a call on their cold start.
func cursorKey(ctx context.Context, sm secretReader, cfg Config, r role) ([]byte, error) {
	if r != roleAPI {
		key := make([]byte, 32)
		_, _ = rand.Read(key) // never fails (crypto/rand)
		return key, nil
	}
	if err := need("api function", "CURSOR_KEY_SECRET_ARN", cfg.CursorKeySecretARN); err != nil {
		return nil, err
	}
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(cfg.CursorKeySecretARN)})
	if err != nil {
		return nil, fmt.Errorf("awsapp: read cursor key %s: %w", cfg.CursorKeySecretARN, err)
	}
	key := out.SecretBinary
	if out.SecretString != nil {
		key = []byte(*out.SecretString)
	}
	if len(key) < 32 {
		return nil, errors.New("awsapp: the cursor key secret holds fewer than 32 bytes")
	}
	return key, nil
}

// NewLogger returns the JSON logger of a function. Each line carries the
// Lambda request ID when the context has one, so CloudWatch Logs Insights
// can gather one invocation's lines.
func NewLogger(cfg Config) *slog.Logger {
	h := slog.NewJSONHandler(cfg.logOutput(), &slog.HandlerOptions{Level: cfg.LogLevel})
	return slog.New(requestIDHandler{h})
}

// requestIDHandler adds awsRequestId from the Lambda context to records.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		r.AddAttrs(slog.String("awsRequestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
