package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"flowservice/pkg/automation"
)

// The consumer side of the run queue: how a batch of messages is handled,
// and how a message whose run is to be tried later comes back at the run's
// time rather than after the queue's flat visibility timeout.

// MessageHandler handles one run queue message: *automation.Service.
type MessageHandler interface {
	HandleMessage(ctx context.Context, body []byte) error
}

// Visibility is the SQS calls a runner backs off with: it changes a
// message's visibility, or sends a fresh copy of it.
type Visibility interface {
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// Backoff returns a message to its queue until a given time: the run's
// own next attempt (automation.RetryLater), exponential over its attempts,
// instead of the queue's flat visibility timeout. A zero Backoff (no
// Client) leaves the visibility timeout as it is.
//
// Every receive counts toward the queue's maxReceiveCount, a bounce too,
// although a bounce (the run held by a live attempt, or its next attempt
// not due: automation.IsRunClaimed) attempts nothing. So a message bounced
// at or past RequeueAt receives is not bounced but sent again, a fresh
// copy with a receive count of zero, and the old one acknowledged: only
// receives that attempt or fail (a failed attempt, which the run's own
// RUN_ATTEMPTS bounds; a store error; a crash or a timeout) add up to the
// dead-letter queue.
type Backoff struct {
	Client   Visibility
	QueueURL string
	// RequeueAt is the receive count from which a bounce sends a fresh
	// copy: 0 is DefaultRequeueAt.
	RequeueAt int
}

// DefaultRequeueAt is half of the run queue's maxReceiveCount (10,
// template.yaml): a bounce changes visibility (up to 12 h at once) for a
// message's first four receives and sends a fresh copy from the fifth, and
// the other half is room for receives that fail outright.
const DefaultRequeueAt = 5

// MaxVisibility is SQS's longest visibility timeout (12 hours).
const MaxVisibility = 12 * time.Hour

// delay makes message m visible again at the given time. It reports whether
// m was requeued instead (a copy sent): m is then to be acknowledged.
// Only a bounce (bounce set: the run held by a live attempt, or not due
// yet) is requeued; a failed attempt or a store error keeps its receive count.
func (b Backoff) delay(ctx context.Context, m events.SQSMessage, at time.Time, bounce bool) (requeued bool, err error) {
	if b.Client == nil || m.ReceiptHandle == "" {
		return false, nil
	}
	if bounce && b.requeues(m) {
		err := b.requeue(ctx, m, at)
		if err == nil {
			return true, nil
		}
		// Not sent: bounce as usual, and the message comes back.
		err = fmt.Errorf("requeue: %w", err)
		if verr := b.visibility(ctx, m, at); verr != nil {
			return false, errors.Join(err, verr)
		}
		return false, err
	}
	return false, b.visibility(ctx, m, at)
}

// requeues says whether a bounce of m sends a fresh copy.
func (b Backoff) requeues(m events.SQSMessage) bool {
	at := b.RequeueAt
	if at <= 0 {
		at = DefaultRequeueAt
	}
	n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
	return err == nil && n >= at
}

func (b Backoff) visibility(ctx context.Context, m events.SQSMessage, at time.Time) error {
	d := min(max(time.Until(at), 0), MaxVisibility)
	_, err := b.Client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: &b.QueueURL, ReceiptHandle: &m.ReceiptHandle, VisibilityTimeout: int32(d.Round(time.Second) / time.Second),
	})
	return err
}

// requeue sends a copy of m (body and message attributes), due at at or
// within SQS's longest delay (MaxDelay: a copy due later arrives early,
// finds its run not due, and is bounced by visibility). A copy sent while m also comes back (the
// acknowledgement lost) is harmless: the run's claim is conditional, so
// one message executes the attempt and the other bounces or finds the run
// finished.
func (b Backoff) requeue(ctx context.Context, m events.SQSMessage, at time.Time) error {
	in := &sqs.SendMessageInput{QueueUrl: &b.QueueURL, MessageBody: &m.Body, DelaySeconds: delaySeconds(at),
		MessageGroupId: messageGroup(m), // the fair queue's tenant (fair.go)
	}
	if len(m.MessageAttributes) > 0 {
		in.MessageAttributes = make(map[string]sqstypes.MessageAttributeValue, len(m.MessageAttributes))
		for k, a := range m.MessageAttributes {
			dt := a.DataType
			in.MessageAttributes[k] = sqstypes.MessageAttributeValue{
				DataType: &dt, StringValue: a.StringValue, BinaryValue: a.BinaryValue,
				StringListValues: a.StringListValues, BinaryListValues: a.BinaryListValues,
			}
		}
	}
	_, err := b.Client.SendMessage(ctx, in)
	return err
}

// Runner returns the handler of a batch of run messages on svc: the runner
// function's and flowd's aws backend's (pkg/awsdev). Records run concurrently: a batch
// of ten attempts must fit in the function's timeout, which is sized for one.
// A message whose run is to be tried later (automation.RetryLater) comes
// back when the run says, through b (a fresh copy once its receive count
// nears the DLQ's, Backoff.RequeueAt); a run held by another live attempt
// is the expected hand-over and is not logged as an error.
func Runner(svc MessageHandler, b Backoff, log *slog.Logger) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		failed := make([]bool, len(ev.Records))
		var wg sync.WaitGroup
		for i, m := range ev.Records {
			wg.Go(func() {
				err := svc.HandleMessage(ctx, []byte(m.Body))
				if err == nil {
					return
				}
				failed[i] = true
				var later *automation.RetryLater
				if !errors.As(err, &later) {
					log.ErrorContext(ctx, "run message failed", "messageId", m.MessageId,
						"receiveCount", m.Attributes["ApproximateReceiveCount"], "err", err)
					return
				}
				if automation.IsRunClaimed(err) {
					log.InfoContext(ctx, "run held by a live attempt; message back at its lease end", "messageId", m.MessageId)
				} else {
					log.WarnContext(ctx, "run attempt failed; retried later", "messageId", m.MessageId,
						"at", later.At, "err", err)
				}
				requeued, err := b.delay(ctx, m, later.At, automation.IsRunClaimed(err))
				if err != nil {
					log.WarnContext(ctx, "back off run message", "messageId", m.MessageId, "err", err)
				}
				if requeued {
					// The copy is on the queue: this one is done with.
					failed[i] = false
					log.InfoContext(ctx, "run message sent again to reset its receive count", "messageId", m.MessageId,
						"receiveCount", m.Attributes["ApproximateReceiveCount"], "at", later.At)
				}
			})
		}
		wg.Wait()
		resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		for i, f := range failed {
			if f {
				resp.BatchItemFailures = append(resp.BatchItemFailures,
					events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
			}
		}
		// Never an error: that would return the whole batch, finished runs
		// included.
		return resp, nil
	}
}
