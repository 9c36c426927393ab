package sqsqueue

import (
	"encoding/json"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/pkg/automation"
)

// The run queue is a standard SQS queue used as a fair queue: every run
// message carries its project as its message group ID. On a standard
// queue a group ID does not order anything (that is FIFO's); SQS uses it
// to tell tenants apart, and when one group has a backlog it keeps
// delivering the other groups' messages with their usual dwell time
// instead of behind that backlog ("SQS fair queues",
// docs/aws.md). The runner's consumers need no change.

// GroupOf is the message group ID of a project's run messages: the
// project ID (nil for none, which SQS takes as no group).
func GroupOf(project string) *string {
	if project == "" {
		return nil
	}
	return &project
}

// messageGroup is the message group ID a copy of m keeps on the run
// queue: the one SQS reports for m, else the project its body names.
func messageGroup(m events.SQSMessage) *string {
	if g := m.Attributes["MessageGroupId"]; g != "" {
		return &g
	}
	var qm automation.QueueMessage
	if err := json.Unmarshal([]byte(m.Body), &qm); err != nil {
		return nil
	}
	return GroupOf(qm.Project)
}
