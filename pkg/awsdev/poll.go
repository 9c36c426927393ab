package awsdev

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"flowservice/pkg/awsapp"
)

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
func PollOnce(ctx context.Context, client ReceiveAPI, queueURL string, wait time.Duration, h awsapp.SQSHandler) (int, error) {
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
			return len(out.Messages), fmt.Errorf("awsdev: delete message %s: %w", *m.MessageId, err)
		}
	}
	return len(out.Messages), nil
}

// Poll runs PollOnce until ctx ends, with long polling, for flowd's aws
// backend; errors are logged and retried after a pause.
func Poll(ctx context.Context, client ReceiveAPI, queueURL string, h awsapp.SQSHandler, log *slog.Logger) {
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
