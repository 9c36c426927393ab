package sqsqueue_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"flowservice/pkg/automation"
	"flowservice/pkg/sqsqueue"
)

// acceptAll records runs without a store, for tests of the messages alone.
type acceptAll struct{}

func (acceptAll) CreateRun(context.Context, automation.Run) error          { return nil }
func (acceptAll) DeleteUnclaimedRun(context.Context, string, string) error { return nil }

// TestMessagesGroupedByProject: every run-bearing message, first, delayed,
// a caller's wake-up or a sub-minute poll, goes to the standard run queue
// with its project as message group ID, which makes it a fair queue;
// moto_server accepts and reports the group.
func TestMessagesGroupedByProject(t *testing.T) {
	e := newEnv(t, nil)
	q := sqsqueue.New(acceptAll{}, e.sqs, e.url)
	ctx := t.Context()
	if err := q.Enqueue(ctx, automation.Run{ID: "run_a", Project: "prj_a"}); err != nil {
		t.Fatal(err)
	}
	if err := q.EnqueueAfter(ctx, automation.Run{ID: "run_b", Project: "prj_b"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := q.WakeRun(ctx, "prj_c", "run_c"); err != nil {
		t.Fatal(err)
	}
	if err := q.EnqueuePollAfter(ctx, "prj_d", "flw_d", time.Now()); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for range 10 {
		out, err := e.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &e.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameMessageGroupId},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			var qm automation.QueueMessage
			if err := json.Unmarshal([]byte(*m.Body), &qm); err != nil {
				t.Fatal(err)
			}
			key := qm.RunID
			if key == "" {
				key = qm.FlowID // a poll names its flow
			}
			got[key] = m.Attributes[string(sqstypes.MessageSystemAttributeNameMessageGroupId)]
		}
		if len(got) == 4 {
			break
		}
	}
	if got["run_a"] != "prj_a" || got["run_b"] != "prj_b" || got["run_c"] != "prj_c" || got["flw_d"] != "prj_d" {
		t.Errorf("message groups %v, want each message in its project's group", got)
	}
}
