package awsapp

import (
	"encoding/json"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/pkg/automation"
	"flowservice/pkg/sqsqueue"
)

// messageGroup is the message group ID a copy of m keeps on the run
// queue, a fair queue whose groups are projects (sqsqueue/fair.go): the
// one SQS reports for m, else the project its body names.
func messageGroup(m events.SQSMessage) *string {
	if g := m.Attributes["MessageGroupId"]; g != "" {
		return &g
	}
	var qm automation.QueueMessage
	if err := json.Unmarshal([]byte(m.Body), &qm); err != nil {
		return nil
	}
	return sqsqueue.GroupOf(qm.Project)
}
