package sqsqueue

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/automation"
)

var _ automation.Waker = (*Queue)(nil)

// WakeRun sends a message for a run that waits for a child run which has
// just finished (a CALL_FLOW step), due at once: the runner claims the
// caller, which finds its child final and goes on. The caller's delayed
// message (EnqueueAfter) still comes later, and finds it finished or
// waiting for another child.
func (q *Queue) WakeRun(ctx context.Context, project, runID string) error {
	body, err := Message(automation.Run{ID: runID, Project: project})
	if err != nil {
		return fmt.Errorf("sqsqueue: wake run %s: %w", runID, err)
	}
	text := string(body)
	if _, err := q.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q.url, MessageBody: &text,
		MessageGroupId: GroupOf(project)}); err != nil {
		return fmt.Errorf("sqsqueue: wake run %s: %w", runID, err)
	}
	return nil
}

// SendControl sends a message that bears no run (the alerts sweep) to the
// run queue, due at once and in no project's group: the runner handles it
// before or beside the runs of its batch.
func (q *Queue) SendControl(ctx context.Context, body string) error {
	if _, err := q.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &q.url, MessageBody: &body}); err != nil {
		return fmt.Errorf("sqsqueue: send %s: %w", body, err)
	}
	return nil
}
