package dynamostore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// A POLL flow's poll state (automation.PollState: the outcome of the last
// poll and the hashes of the latest 10,000 keys, about 160 KB as JSON) is
// an item of the samples table keyed "poll#<flowId>", beside the flow's
// STORE state and kept the same way: versioned by stateVersion, removed in
// DeleteFlow's transaction.
const attrPoll = "poll" // S, the PollState as JSON

var _ automation.PollStore = (*Store)(nil)

func pollKey(flowID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrFlowID: str("poll#" + flowID)}
}

// pollDelete is the transaction item that removes a flow's poll state with
// the flow; nil when the store has no samples table.
func (s *Store) pollDelete(flowID string) *types.TransactWriteItem {
	if s.t.Samples == "" {
		return nil
	}
	return &types.TransactWriteItem{Delete: &types.Delete{TableName: &s.t.Samples, Key: pollKey(flowID)}}
}

// PollState reads the flow's poll state (consistent).
func (s *Store) PollState(ctx context.Context, project, flowID string) (automation.PollState, error) {
	st, _, err := s.readPoll(ctx, project, flowID)
	return st, err
}

func (s *Store) readPoll(ctx context.Context, project, flowID string) (automation.PollState, int64, error) {
	var st automation.PollState
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Samples, Key: pollKey(flowID), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#project, #poll, #sv"),
		ExpressionAttributeNames: map[string]string{"#project": attrProject, "#poll": attrPoll, "#sv": attrStateVersion},
	})
	if err != nil {
		return st, 0, fmt.Errorf("dynamostore: read poll state of flow %s: %w", flowID, err)
	}
	r := reader{item: out.Item}
	if len(out.Item) == 0 || r.str(attrProject) != project {
		return st, 0, r.err
	}
	if doc := r.str(attrPoll); doc != "" {
		if err := json.Unmarshal([]byte(doc), &st); err != nil {
			return st, 0, fmt.Errorf("dynamostore: poll state of flow %s: %w", flowID, err)
		}
	}
	var v int64
	if out.Item[attrStateVersion] != nil {
		v = r.int(attrStateVersion)
	}
	return st, v, r.err
}

// UpdatePollState writes the changed state conditionally on the version it
// read; a lost race reads again. The flow is read first, as for
// UpdateFlowState, so that the state of a missing flow (or another
// project's) is refused.
func (s *Store) UpdatePollState(ctx context.Context, project, flowID string, change func(automation.PollState) (automation.PollState, error)) error {
	flow, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Flows, Key: flowKey(flowID),
		ProjectionExpression:     aws.String("#project"),
		ExpressionAttributeNames: map[string]string{"#project": attrProject},
	})
	if err != nil {
		return fmt.Errorf("dynamostore: update poll state of flow %s: %w", flowID, err)
	}
	if r := (reader{item: flow.Item}); len(flow.Item) == 0 || r.str(attrProject) != project {
		return automation.NotFound("flow", flowID)
	}
	for attempt := 1; ; attempt++ {
		cur, version, err := s.readPoll(ctx, project, flowID)
		if err != nil {
			return err
		}
		next, err := change(cur)
		if err != nil {
			return err
		}
		doc, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("dynamostore: encode poll state of flow %s: %w", flowID, err)
		}
		lost, err := s.putVersioned(ctx, pollKey(flowID), attrPoll, project, doc, version)
		if lost && attempt < stateUpdateAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("dynamostore: update poll state of flow %s: %w", flowID, err)
		}
		return nil
	}
}
