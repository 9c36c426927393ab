package deploy

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/sqsqueue"
)

// Recorded DynamoDB cost of one early delivery of a parked run's message
// (every 15 minutes while an APPROVAL waits), as docs/cost.md prices it:
// one eventually consistent GetItem of the run item's due time.
const (
	maxHopCalls     = 1
	maxHopReadUnits = 0.5
)

// TestDynamoCostOfAParkedHop counts, on moto, what the runner's handling
// of a parked APPROVAL run's delayed message costs when it comes back
// before the waitpoint's expiry: one read of the run's due time (which a
// decision whose wake-up message was lost would have moved), no write,
// and the message is sent on, due at the expiry still.
func TestDynamoCostOfAParkedHop(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	meter := newDynamoMeter(dynamodb.NewFromConfig(st.aws), st.cfg.Tables)
	metered := st.aws.Copy()
	metered.APIOptions = append(metered.APIOptions, meter.Add)
	hook, err := awsapp.NewWebhookHandler(ctx, st.aws, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, metered, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := st.flow(t, `{"name": "Refunds", "engine": "FLOW_BUILDER", "steps": [
		{"name": "ok", "type": "APPROVAL", "title": "Refund {{ trigger.body.amount }}?", "timeout": "720h"},
		{"name": "after", "type": "SET", "values": {"d": "{{ steps.ok.decision }}"}}]}`, true)
	status, acc := call(t, hook, "POST", "/api/v1/webhooks/"+f.ID, "", `{"amount": 120, "reason": "damaged in transit"}`)
	if status != 200 {
		t.Fatalf("webhook = %d %v", status, acc)
	}
	runID := acc["runId"].(string)
	client := sqs.NewFromConfig(st.aws)
	var parked automation.Run
	for range 5 {
		if _, err := awsdev.PollOnce(ctx, client, st.cfg.QueueURL, 0, runner); err != nil {
			t.Fatal(err)
		}
		if parked, err = st.store.Run(ctx, st.project.ID, f.ID, runID); err != nil {
			t.Fatal(err)
		}
		if parked.WaitingFor == automation.WaitingApproval {
			break
		}
	}
	if parked.WaitingFor != automation.WaitingApproval || parked.NextAttemptAt == nil {
		t.Fatalf("run %s waiting for %q; want it parked on its approval", parked.Status, parked.WaitingFor)
	}
	// The park's delayed message as it comes back after 15 minutes.
	msg, _ := json.Marshal(automation.QueueMessage{Kind: automation.MessageRun, Project: st.project.ID, RunID: runID,
		NotBefore: parked.NextAttemptAt})
	text := string(msg)
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &st.cfg.QueueURL, MessageBody: &text,
		MessageGroupId: sqsqueue.GroupOf(st.project.ID)}); err != nil {
		t.Fatal(err)
	}
	meter.reset()
	if n, err := awsdev.PollOnce(ctx, client, st.cfg.QueueURL, 0, runner); err != nil || n != 1 {
		t.Fatalf("hop: %d messages, %v", n, err)
	}
	detail := meter.details()
	ops, wcu, rcu := meter.reset()
	calls, desc := meter.calls(ops)
	t.Logf("one hop: %d calls (%s), %.0f write units, %.1f read units; %s", calls, desc, wcu, rcu, detail)
	if calls > maxHopCalls || ops["GetItem"] != calls || wcu != 0 || rcu > maxHopReadUnits {
		t.Errorf("a hop costs %d calls (%s), %.0f write and %.1f read units; want at most %d GetItem, no write, %.1f read units (docs/cost.md)",
			calls, desc, wcu, rcu, maxHopCalls, maxHopReadUnits)
	}
	after, err := st.store.Run(ctx, st.project.ID, f.ID, runID)
	if err != nil || after.Attempts != parked.Attempts || after.WaitingFor != automation.WaitingApproval {
		t.Fatalf("after the hop: attempts %d -> %d, waiting for %q, %v; want it parked, not claimed",
			parked.Attempts, after.Attempts, after.WaitingFor, err)
	}
}
