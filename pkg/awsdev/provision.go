// Package awsdev holds what runs the Lambda wiring of pkg/awsapp outside
// Lambda, for development and administration: provisioning a stage's
// resources on moto_server or a scratch account, the SQS poller that stands
// in for the runner's event source mapping (flowd's aws backend), and the
// Service flowctl administers a stage with. No function links it.
package awsdev

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	schedtypes "github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"flowservice/pkg/awsapp"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/s3payloads"
)

// Provision creates what template.yaml would, under names starting with
// prefix, where it is missing: the tables, the run queue with its DLQ, the
// payload bucket, the schedule group and the cursor key secret. It is for
// development against moto_server or a scratch account (flowd with
// FLOWD_BACKEND=aws and FLOWD_AWS_PROVISION=true); deployments use the
// template. It returns cfg with the resource fields filled in.
func Provision(ctx context.Context, awsCfg aws.Config, prefix string, cfg awsapp.Config) (awsapp.Config, error) {
	cfg.Tables = dynamostore.TableNames(prefix)
	cfg.Tables.Alerts = prefix + "-alerts" // event subscriptions (docs/alerts.md)
	if err := dynamostore.CreateTables(ctx, dynamodb.NewFromConfig(awsCfg), cfg.Tables); err != nil {
		return cfg, fmt.Errorf("awsdev: provision tables: %w", err)
	}
	q := sqs.NewFromConfig(awsCfg)
	_, dlqARN, err := createQueue(ctx, q, prefix+"-runs-dlq", nil)
	if err != nil {
		return cfg, err
	}
	// Schedule firings that cannot be delivered go to the DLQ, as in the
	// template.
	cfg.ScheduleDeadLetterARN = dlqARN
	redrive, _ := json.Marshal(map[string]string{"deadLetterTargetArn": dlqARN, "maxReceiveCount": "10"})
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
			return cfg, fmt.Errorf("awsdev: provision bucket: %w", err)
		}
	}
	cfg.ScheduleGroup = prefix
	_, err = scheduler.NewFromConfig(awsCfg).CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: &cfg.ScheduleGroup})
	var exists *schedtypes.ConflictException
	if err != nil && !errors.As(err, &exists) {
		return cfg, fmt.Errorf("awsdev: provision schedule group: %w", err)
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
		return "", "", fmt.Errorf("awsdev: provision queue %s: %w", name, err)
	}
	a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: out.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", fmt.Errorf("awsdev: provision queue %s: %w", name, err)
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
		return "", fmt.Errorf("awsdev: provision cursor key: %w", err)
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	out, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: &name, SecretString: aws.String(hex.EncodeToString(raw))})
	if err != nil {
		return "", fmt.Errorf("awsdev: provision cursor key: %w", err)
	}
	return *out.ARN, nil
}
