package dynamostore

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// attrStoppedAt is a flow item's automation.Flow.StoppedAt, in Unix
// milliseconds, so that a condition can compare it with a run's creation.
const attrStoppedAt = "stoppedAt"

// flowNotStopped is the transaction item a journal write (AppendSteps)
// carries so that a run stops at its next step once its flow is disabled
// or deleted (automation/flowstop.go): it checks, in the write the attempt
// makes anyway, that the flow exists and was not disabled since the run
// was created. No step costs a read more; the check costs the transaction
// one item's read capacity.
func flowNotStopped(table string, r automation.Run) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: &table, Key: flowKey(r.FlowID),
		ConditionExpression:      aws.String("#project = :project AND (attribute_not_exists(#stopped) OR #stopped < :created)"),
		ExpressionAttributeNames: map[string]string{"#project": attrProject, "#stopped": attrStoppedAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":project": str(r.Project), ":created": num(r.Created.UnixMilli()),
		},
	}}
}

// millisPtr reads a time stored in Unix milliseconds; nil when absent.
func (r *reader) millisPtr(name string) *time.Time {
	v, ok := r.item[name].(*types.AttributeValueMemberN)
	if !ok {
		return nil
	}
	ms, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		if r.err == nil {
			r.err = err
		}
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}
