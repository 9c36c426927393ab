package sqsqueue_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"flowservice/pkg/automation"

	"flowservice/pkg/awsdev"
	"flowservice/pkg/awstest"
	"flowservice/pkg/sqsqueue"
)

// heldRun is a run held by a live attempt for its first holds messages:
// each is a bounce (automation.RetryLater, due now); then it executes.
type heldRun struct {
	mu       sync.Mutex
	holds    int
	seen     int
	executed int
}

func (h *heldRun) HandleMessage(_ context.Context, body []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen++
	if h.seen <= h.holds {
		return &automation.RetryLater{At: time.Now(), Err: automation.RunClaimed("run_held")}
	}
	h.executed++
	return nil
}

// TestBouncesNeverReachTheDLQ, on moto with a redrive policy of
// maxReceiveCount 3: a run bounced four times that many is sent again
// before its receive count reaches the limit, never lands in the
// dead-letter queue, and executes once; the same bounces by visibility
// alone (no requeue) put it in the DLQ, unexecuted.
func TestBouncesNeverReachTheDLQ(t *testing.T) {
	cfg := awstest.Start(t)
	client := sqs.NewFromConfig(cfg)
	ctx := t.Context()
	create := func(name string, attrs map[string]string) (url, arn string) {
		t.Helper()
		out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(awstest.UniqueName(t, name)), Attributes: attrs})
		if err != nil {
			t.Fatal(err)
		}
		a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.QueueUrl), a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	}
	const maxReceives = 3
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	run := func(t *testing.T, requeueAt int) (h *heldRun, inDLQ int) {
		dlqURL, dlqARN := create("dlq", nil)
		policy, _ := json.Marshal(map[string]any{"deadLetterTargetArn": dlqARN, "maxReceiveCount": maxReceives})
		url, _ := create("runs", map[string]string{"VisibilityTimeout": "30", "RedrivePolicy": string(policy)})
		body := `{"kind":"run","project":"p","runId":"run_held"}`
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: &body}); err != nil {
			t.Fatal(err)
		}
		h = &heldRun{holds: 4 * maxReceives}
		runner := sqsqueue.Runner(h, sqsqueue.Backoff{Client: client, QueueURL: url, RequeueAt: requeueAt}, log)
		for range 3 * h.holds {
			n, err := awsdev.PollOnce(ctx, client, url, 0, runner)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 && h.executed > 0 {
				break
			}
		}
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &dlqURL, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		left, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(left.Messages) != 0 {
			t.Errorf("%d messages left on the run queue", len(left.Messages))
		}
		return h, len(out.Messages)
	}

	t.Run("requeued", func(t *testing.T) {
		h, dead := run(t, maxReceives-1)
		if dead != 0 || h.executed != 1 || h.seen != h.holds+1 {
			t.Errorf("%d in the DLQ, executed %d times after %d messages; want none, once, after %d bounces",
				dead, h.executed, h.seen, h.holds)
		}
	})
	t.Run("bounced only", func(t *testing.T) {
		h, dead := run(t, 1000)
		if dead != 1 || h.executed != 0 {
			t.Errorf("without requeue: %d in the DLQ, executed %d times; want the message in the DLQ after %d receives, unexecuted",
				dead, h.executed, maxReceives)
		}
	})
}
