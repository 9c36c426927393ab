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
)

// openAWS wires the AWS adapters, as the Lambdas have them, into one
// process: DynamoDB, Secrets Manager, SQS (flowd consumes the run queue
// itself, as the runner function would), S3 and EventBridge Scheduler. The
// resources come from the variables template.yaml gives the functions
// (TABLE_*, QUEUE_URL, ...), or, with FLOWD_AWS_PROVISION=true, are created
// under the prefix FLOWD_AWS_PREFIX: for moto_server and scratch accounts.
// The SDK's default chain finds credentials and region; AWS_ENDPOINT_URL
// points it at an emulator.
func openAWS(ctx context.Context, cfg config, code automation.CodeRunner, getenv func(string) string, log *slog.Logger, logOut io.Writer) (*backend, error) {
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
	_ = acfg.LogLevel.UnmarshalText([]byte(cfg.LogLevel))
	if getenv("FLOWD_AWS_PROVISION") == "true" {
		prefix := or(getenv("FLOWD_AWS_PREFIX"), "flowd")
		if acfg, err = awsapp.Provision(ctx, awsCfg, prefix, acfg); err != nil {
			return nil, err
		}
		log.Info("provisioned AWS resources", "prefix", prefix, "queue", acfg.QueueURL)
	}
	l, err := awsapp.NewLocal(ctx, awsCfg, acfg)
	if err != nil {
		return nil, fmt.Errorf("aws backend: %w", err)
	}
	svc := l.Svc
	client := sqs.NewFromConfig(awsCfg)
	return &backend{
		svc: svc, sessionKey: l.DashboardKey,
		start: func(ctx context.Context, wg *sync.WaitGroup) {
			for range cfg.Workers {
				wg.Go(func() { awsapp.Poll(ctx, client, acfg.QueueURL, awsapp.Runner(svc, log), log) })
			}
		},
		stop:  func(context.Context) {},
		close: func() {},
	}, nil
}
