package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// Disabling a flow stops its running runs at their next step
// (automation/flowstop.go). The flow item keeps StoppedAt, which an
// attempt reads when it starts; the runs RUNNING when the flow is disabled
// are marked (attrStopped), and the journal write an attempt makes after
// each step with side effects is conditional on the mark's absence, so the
// check costs no read per step and no capacity beyond that write. (A
// condition on the flow item in the journal's transaction would cost none
// either, but every running run's journal would then take part in a
// transaction on the flow's one item, which its statistics update at
// every finish: they would conflict.)
const (
	attrStoppedAt = "stoppedAt"   // N: a flow item's StoppedAt, Unix milliseconds
	attrStopped   = "flowStopped" // N: on a run item: its flow was disabled at (Unix ms) while it ran
)

// stopRuns marks the flow's RUNNING runs created until its StoppedAt,
// found through the byStatus index, a page at a time. A run that finished
// meanwhile is left alone. The index is eventually consistent: a run
// created within a moment of the disable may be missed here, and is then
// stopped when its next attempt reads the flow.
func (s *Store) stopRuns(ctx context.Context, f automation.Flow) error {
	at := num(f.StoppedAt.UnixMilli())
	upto := str(f.StoppedAt.UTC().Format(sortTimeLayout) + "#~") // past every run ID of that instant
	var start map[string]types.AttributeValue
	for {
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName: &s.t.Runs, IndexName: aws.String(indexByStatus), ExclusiveStartKey: start,
			KeyConditionExpression:   aws.String("#h = :h AND #s <= :upto"),
			ExpressionAttributeNames: map[string]string{"#h": attrProjectFlowStatus, "#s": attrCreatedSort},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":h": str(f.Project + "#" + f.ID + "#" + string(automation.RunRunning)), ":upto": upto,
			},
		})
		if err != nil {
			return fmt.Errorf("dynamostore: stop runs of flow %s: list: %w", f.ID, err)
		}
		for _, item := range out.Items {
			_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
				TableName: &s.t.Runs, Key: map[string]types.AttributeValue{attrID: item[attrID]},
				UpdateExpression:          aws.String("SET #stop = :at"),
				ConditionExpression:       aws.String("#status = :running"),
				ExpressionAttributeNames:  map[string]string{"#stop": attrStopped, "#status": "status"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":at": at, ":running": str(string(automation.RunRunning))},
			})
			var ccf *types.ConditionalCheckFailedException
			if err != nil && !errors.As(err, &ccf) {
				return fmt.Errorf("dynamostore: stop runs of flow %s: mark: %w", f.ID, err)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		start = out.LastEvaluatedKey
	}
}

// runStopped reports whether a journal write of r was refused because its
// flow's disabling marked it: read only when the write was refused.
func (s *Store) runStopped(ctx context.Context, r automation.Run) bool {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Runs, Key: runKey(r.ID), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#stop, #status"),
		ExpressionAttributeNames: map[string]string{"#stop": attrStopped, "#status": "status"},
	})
	if err != nil {
		return false // whyRefused reads it again and reports the error
	}
	_, marked := out.Item[attrStopped]
	status, _ := out.Item["status"].(*types.AttributeValueMemberS)
	return marked && status != nil && status.Value == string(automation.RunRunning)
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
