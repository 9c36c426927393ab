package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/sqsqueue"
	"flowservice/pkg/tracing"
)

// openAWS wires the AWS adapters, as the Lambdas have them, into one
// process: DynamoDB, Secrets Manager, SQS (flowd consumes the run queue
// itself, as the runner function would), S3 and EventBridge Scheduler. The
// resources come from the variables template.yaml gives the functions
// (TABLE_*, QUEUE_URL, ...), or, with FLOWD_AWS_PROVISION=true, are created
// under the prefix FLOWD_AWS_PREFIX: for moto_server and scratch accounts.
// The SDK's default chain finds credentials and region; AWS_ENDPOINT_URL
// points it at an emulator.
func openAWS(ctx context.Context, cfg config, code automation.CodeRunner, tracer *tracing.Tracer, getenv func(string) string, log *slog.Logger, logOut io.Writer) (*backend, error) {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws backend: %w", err)
	}
	acfg, err := awsapp.ConfigFrom(getenv)
	if err != nil {
		return nil, fmt.Errorf("aws backend: %w", err)
	}
	acfg.EngineURL, acfg.WorkflowURL = cfg.EngineURL, cfg.WorkflowURL
	acfg.MaxBody, acfg.SyncTimeout = cfg.MaxBody, cfg.SyncTimeout
	acfg.AllowPrivateNetworks = cfg.AllowPrivate
	acfg.RunPolicy = cfg.RunPolicy
	acfg.LogOutput = logOut
	acfg.Code = code
	acfg.Tracer = tracer
	_ = acfg.LogLevel.UnmarshalText([]byte(cfg.LogLevel))
	if getenv("FLOWD_AWS_PROVISION") == "true" {
		prefix := or(getenv("FLOWD_AWS_PREFIX"), "flowd")
		if acfg, err = awsdev.Provision(ctx, awsCfg, prefix, acfg); err != nil {
			return nil, err
		}
		log.Info("provisioned AWS resources", "prefix", prefix, "queue", acfg.QueueURL)
	}
	a, err := management.New(ctx, awsCfg, acfg)
	if err != nil {
		return nil, fmt.Errorf("aws backend: %w", err)
	}
	svc := a.Svc
	client := sqs.NewFromConfig(awsCfg)
	return &backend{
		svc: svc, sessionKey: a.CursorKey, alerts: a.Alerts,
		start: func(ctx context.Context, wg *sync.WaitGroup) {
			for range cfg.Workers {
				wg.Go(func() {
					runner := a.WithAlerts(sqsqueue.Runner(svc, sqsqueue.Backoff{Client: client, QueueURL: acfg.QueueURL}, log))
					awsdev.Poll(ctx, client, acfg.QueueURL, runner, log)
				})
			}
			if a.Alerts != nil {
				// What the stage's schedule does with its sweep message:
				// retries, and what the api side wrote (alerts.go).
				wg.Go(func() { sweepAlerts(ctx, a.Alerts) })
			}
		},
		stop:  func(context.Context) {},
		close: func() {},
	}, nil
}
