// Package sqsqueue implements automation.RunQueue on Amazon SQS, for the
// service's AWS deployment: Enqueue writes the run record (DynamoDB, through
// pkg/dynamostore), then sends a message naming the run to a standard queue
// whose consumer, the runner Lambda, executes it. Messages carry IDs only;
// a run's data, however large, stays with the run record (dynamostore keeps
// bodies too large for an item in S3).
//
// The consumer side is here too (runner.go): Runner handles a batch as the
// runner Lambda and flowd's aws backend receive it, and Backoff brings a
// message whose run is due later back at the run's time, by visibility or
// as a fresh copy, so that bounces never reach the dead-letter queue.
package sqsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/automation"
)

// MaxMessageBytes is SQS's limit on a message body (1 MiB since August
// 2025; 256 KiB before). Run messages hold IDs only and stay far below it;
// Enqueue checks anyway, before it writes anything.
const MaxMessageBytes = 1 << 20

// RunCreator writes and unwrites run records: *dynamostore.Store.
type RunCreator interface {
	// CreateRun writes a new RUNNING run; an existing ID is ErrConflict with
	// code RUN_EXISTS.
	CreateRun(ctx context.Context, r automation.Run) error
	// DeleteUnclaimedRun removes a run no attempt has claimed yet; a claimed
	// or finished one is ErrConflict (RUN_CLAIMED, RUN_FINISHED).
	DeleteUnclaimedRun(ctx context.Context, project, id string) error
}

// API is the part of the SQS client the Queue uses. *sqs.Client implements
// it; tests substitute a stub to inject failures.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var _ API = (*sqs.Client)(nil)

// Queue is an automation.RunQueue on one SQS queue. It is safe for
// concurrent use.
type Queue struct {
	runs RunCreator
	sqs  API
	url  string
}

var _ automation.RunQueue = (*Queue)(nil)

var _ automation.Delayer = (*Queue)(nil)

// MaxDelay is the longest SQS message delay (DelaySeconds, 15 minutes):
// every message sent for a later time, a delayed run's (EnqueueAfter) or a
// bounced message's copy (Backoff), is due at the latest after it.
const MaxDelay = 15 * time.Minute

// delaySeconds is the DelaySeconds of a message due at until: the time
// left, rounded up to a second, within MaxDelay.
func delaySeconds(until time.Time) int32 {
	d := min(max(time.Until(until), 0), MaxDelay)
	return int32((d + time.Second - 1) / time.Second)
}

// EnqueueAfter sends run r's message again, due at until: with a delay of
// at most MaxDelay and until in the message (QueueMessage.NotBefore), so
// that a run that waits longer is sent on each time it is seen early,
// without being claimed.
func (q *Queue) EnqueueAfter(ctx context.Context, r automation.Run, until time.Time) error {
	u := until.UTC()
	body, err := json.Marshal(automation.QueueMessage{Kind: automation.MessageRun, Project: r.Project, RunID: r.ID, NotBefore: &u})
	if err != nil {
		return fmt.Errorf("sqsqueue: delay run %s: %w", r.ID, err)
	}
	text := string(body)
	if _, err := q.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q.url, MessageBody: &text, DelaySeconds: delaySeconds(until),
		MessageGroupId: GroupOf(r.Project)}); err != nil {
		return fmt.Errorf("sqsqueue: delay run %s: %w", r.ID, err)
	}
	return nil
}

var _ automation.PollDelayer = (*Queue)(nil)

// EnqueuePollAfter sends a "poll" message for a flow, due at at (at most
// MaxDelay ahead): a POLL flow whose interval is under the scheduler's
// minute polls again within the minute.
func (q *Queue) EnqueuePollAfter(ctx context.Context, project, flowID string, at time.Time) error {
	u := at.UTC()
	body, err := json.Marshal(automation.QueueMessage{Kind: automation.MessagePoll, Project: project, FlowID: flowID, NotBefore: &u})
	if err != nil {
		return fmt.Errorf("sqsqueue: delay poll of %s: %w", flowID, err)
	}
	delay := min(max(time.Until(at), 0), MaxDelay)
	secs := int32((delay + time.Second - 1) / time.Second)
	text := string(body)
	if _, err := q.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q.url, MessageBody: &text, DelaySeconds: secs,
		MessageGroupId: GroupOf(project)}); err != nil {
		return fmt.Errorf("sqsqueue: delay poll of %s: %w", flowID, err)
	}
	return nil
}

// New returns a Queue that records runs with runs and sends their messages
// to the queue at queueURL.
func New(runs RunCreator, client API, queueURL string) *Queue {
	return &Queue{runs: runs, sqs: client, url: queueURL}
}

// Message returns the body of the message that asks for run r.
func Message(r automation.Run) ([]byte, error) {
	body, err := json.Marshal(automation.QueueMessage{Kind: automation.MessageRun, Project: r.Project, RunID: r.ID})
	if err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	if len(body) > MaxMessageBytes {
		return nil, fmt.Errorf("message for run %s is %d bytes, over the SQS limit of %d", r.ID, len(body), MaxMessageBytes)
	}
	return body, nil
}

// Enqueue writes the run record, then sends its message. When it returns
// nil, both are durable. A run ID that exists already is RUN_EXISTS, and no
// message is sent.
//
// If the message cannot be sent, the run record is deleted again and the
// error returned, so that the receiver answers 503 and the sender retries.
// Deleting, rather than finishing the run FAILED, is what makes that retry
// work: a run ID derived from an idempotency key or a schedule firing would
// otherwise meet its own failed record (RUN_EXISTS) and never run, and a
// FAILED run the sender was told nothing about would sit in the history. A
// send that failed on our side but reached SQS (a lost answer) is harmless
// too: the runner finds no run and drops the message. If the run has been
// claimed meanwhile, the message evidently went out, and Enqueue succeeds.
func (q *Queue) Enqueue(ctx context.Context, r automation.Run) error {
	body, err := Message(r)
	if err != nil {
		return fmt.Errorf("sqsqueue: enqueue run %s: %w", r.ID, err)
	}
	if err := q.runs.CreateRun(ctx, r); err != nil {
		return err // RUN_EXISTS and NotFound reach the caller as they are
	}
	text := string(body)
	_, sendErr := q.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q.url, MessageBody: &text, MessageGroupId: GroupOf(r.Project)})
	if sendErr == nil {
		return nil
	}
	// The caller's context may be what failed the send: undo regardless.
	undo := context.WithoutCancel(ctx)
	err = q.runs.DeleteUnclaimedRun(undo, r.Project, r.ID)
	switch {
	case err == nil || errors.Is(err, automation.ErrNotFound):
		return fmt.Errorf("sqsqueue: send message for run %s (run record removed): %w", r.ID, sendErr)
	case automation.IsRunClaimed(err) || automation.IsRunFinished(err):
		return nil
	default:
		// Neither the message nor the undo: the record stays RUNNING with
		// no message until its retention ends. Say so, for the logs.
		return fmt.Errorf("sqsqueue: send message for run %s: %w; and the run record could not be removed, so it stays RUNNING without a message: %w",
			r.ID, sendErr, err)
	}
}
