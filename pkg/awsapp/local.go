package awsapp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"flowservice/pkg/automation"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/engine"
	"flowservice/pkg/s3payloads"
	"flowservice/pkg/smsecrets"
)

// NewService builds the Service with every part wired, as the api function
// has it plus the runner's queue: for flowd's aws backend, which serves all
// three surfaces and consumes the run queue in one process.
func NewService(ctx context.Context, awsCfg aws.Config, cfg Config) (*automation.Service, *slog.Logger, error) {
	l, err := NewLocal(ctx, awsCfg, cfg)
	return l.Svc, l.Log, err
}

// Local is what flowd's aws backend serves: the Service of NewService and
// the key of its dashboard.
type Local struct {
	Svc *automation.Service
	Log *slog.Logger
	// DashboardKey signs dashboard sessions (the cursor key: stable across
	// restarts and instances).
	DashboardKey []byte
}

// NewLocal is NewService with the dashboard key.
func NewLocal(ctx context.Context, awsCfg aws.Config, cfg Config) (Local, error) {
	a, err := newApp(ctx, awsCfg, cfg, roleAPI)
	if err != nil {
		return Local{}, err
	}
	return Local{Svc: a.svc, Log: a.log, DashboardKey: a.cursorKey}, nil
}

// Provision creates what template.yaml would, under names starting with
// prefix, where it is missing: the tables, the run queue with its DLQ, the
// payload bucket, the schedule group and the cursor key secret. It is for
// development against moto_server or a scratch account (flowd with
// FLOWD_BACKEND=aws and FLOWD_AWS_PROVISION=true); deployments use the
// template. It returns cfg with the resource fields filled in.
func Provision(ctx context.Context, awsCfg aws.Config, prefix string, cfg Config) (Config, error) {
	cfg.Tables = dynamostore.TableNames(prefix)
	if err := dynamostore.CreateTables(ctx, dynamodb.NewFromConfig(awsCfg), cfg.Tables); err != nil {
		return cfg, fmt.Errorf("awsapp: provision tables: %w", err)
	}
	q := sqs.NewFromConfig(awsCfg)
	dlqURL, dlqARN, err := createQueue(ctx, q, prefix+"-runs-dlq", nil)
	if err != nil {
		return cfg, err
	}
	_ = dlqURL
	redrive, _ := json.Marshal(map[string]string{"deadLetterTargetArn": dlqARN, "maxReceiveCount": "8"})
	cfg.QueueURL, cfg.QueueARN, err = createQueue(ctx, q, prefix+"-runs", map[string]string{
		string(sqstypes.QueueAttributeNameRedrivePolicy):     string(redrive),
		string(sqstypes.QueueAttributeNameVisibilityTimeout): strconv.Itoa(int(cfg.RunPolicy.Lease().Seconds()) + 30),
	})
	if err != nil {
		return cfg, err
	}
	cfg.PayloadBucket = prefix + "-payloads"
	s3c := s3.NewFromConfig(awsCfg, func(o *s3.Options) { o.UsePathStyle = awsCfg.BaseEndpoint != nil })
	if _, err := s3c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &cfg.PayloadBucket}); err != nil {
		if err := s3payloads.CreateBucket(ctx, s3c, cfg.PayloadBucket, 31); err != nil {
			return cfg, fmt.Errorf("awsapp: provision bucket: %w", err)
		}
	}
	cfg.ScheduleGroup = prefix
	_, err = scheduler.NewFromConfig(awsCfg).CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: &cfg.ScheduleGroup})
	var exists *schedtypes.ConflictException
	if err != nil && !errors.As(err, &exists) {
		return cfg, fmt.Errorf("awsapp: provision schedule group: %w", err)
	}
	if cfg.SchedulerRoleARN == "" {
		cfg.SchedulerRoleARN = "arn:aws:iam::123456789012:role/" + prefix + "-scheduler"
	}
	if cfg.SecretPrefix == "" {
		cfg.SecretPrefix = "flow/" + prefix
	}
	cfg.CursorKeySecretARN, err = ensureCursorKey(ctx, secretsmanager.NewFromConfig(awsCfg), prefix+"-cursor-key")
	return cfg, err
}

func createQueue(ctx context.Context, q *sqs.Client, name string, attrs map[string]string) (url, arn string, err error) {
	out, err := q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		return "", "", fmt.Errorf("awsapp: provision queue %s: %w", name, err)
	}
	a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", fmt.Errorf("awsapp: provision queue %s: %w", name, err)
	}
	return *out.QueueUrl, a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}

func ensureCursorKey(ctx context.Context, sm *secretsmanager.Client, name string) (string, error) {
	got, err := sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: &name})
	if err == nil {
		return *got.ARN, nil
	}
	var missing *smtypes.ResourceNotFoundException
	if !errors.As(err, &missing) {
		return "", fmt.Errorf("awsapp: provision cursor key: %w", err)
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: &name, SecretString: aws.String(hex.EncodeToString(raw))})
	if err != nil {
		return "", fmt.Errorf("awsapp: provision cursor key: %w", err)
	}
	return *out.ARN, nil
}

// ReceiveAPI is the part of the SQS client a poller uses.
type ReceiveAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// PollOnce does what Lambda's SQS event source mapping does for one batch:
// it receives up to ten messages (waiting up to wait for the first), hands
// them to the runner, and deletes those the runner did not report as
// failed. Failed ones come back after the visibility timeout, and go to the
// DLQ after the queue's maxReceiveCount. It returns how many it received.
func PollOnce(ctx context.Context, client ReceiveAPI, queueURL string, wait time.Duration, h SQSHandler) (int, error) {
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: &queueURL, MaxNumberOfMessages: 10, WaitTimeSeconds: int32(wait / time.Second),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil || len(out.Messages) == 0 {
		return 0, err
	}
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(out.Messages))}
	for i, m := range out.Messages {
		ev.Records[i] = events.SQSMessage{MessageId: *m.MessageId, ReceiptHandle: *m.ReceiptHandle, Body: *m.Body, Attributes: m.Attributes}
	}
	resp, err := h(ctx, ev)
	if err != nil {
		return len(out.Messages), err // the whole batch comes back
	}
	failed := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range out.Messages {
		if failed[*m.MessageId] {
			continue
		}
		if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
			return len(out.Messages), fmt.Errorf("awsapp: delete message %s: %w", *m.MessageId, err)
		}
	}
	return len(out.Messages), nil
}

// Poll runs PollOnce until ctx ends, with long polling, for flowd's aws
// backend; errors are logged and retried after a pause.
func Poll(ctx context.Context, client ReceiveAPI, queueURL string, h SQSHandler, log *slog.Logger) {
	for ctx.Err() == nil {
		if _, err := PollOnce(ctx, client, queueURL, 10*time.Second, h); err != nil && ctx.Err() == nil {
			log.Error("poll run queue", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}
}

// Runner is the runner function's batch handler over an existing Service.
func Runner(svc *automation.Service, log *slog.Logger) SQSHandler { return runner(svc, log) }

// NewAdminService builds a Service for administration (projects and API
// keys, as flowctl does) on a stage's tables: no queue, no scheduler, no
// cursors. tablePrefix is what template.yaml names the tables with,
// flow-<stage>.
func NewAdminService(awsCfg aws.Config, tablePrefix string) (*automation.Service, error) {
	store := dynamostore.New(dynamodb.NewFromConfig(awsCfg), dynamostore.TableNames(tablePrefix))
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	svc, err := automation.NewService(automation.Config{
		Store: store, Secrets: smsecrets.New(secretsmanager.NewFromConfig(awsCfg), "flow/"+tablePrefix),
		Checker: engine.Checker{}, CursorKey: key, OAuthApps: store,
	})
	if err != nil {
		return nil, fmt.Errorf("awsapp: %w", err)
	}
	return svc, nil
}
