package dynamostore

import (
	"context"

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
	v, err := readVersioned(ctx, s, pollKey(flowID), attrPoll, project, "poll state of flow "+flowID, &st)
	return st, v, err
}

// UpdatePollState writes the changed state conditionally on the version it
// read; a lost race reads again. The flow is read first, as for
// UpdateFlowState, so that the state of a missing flow (or another
// project's) is refused.
func (s *Store) UpdatePollState(ctx context.Context, project, flowID string, change func(automation.PollState) (automation.PollState, error)) error {
	if err := s.requireFlow(ctx, project, flowID, "poll state of flow "+flowID); err != nil {
		return err
	}
	return updateVersioned(ctx, s, "poll state of flow "+flowID, pollKey(flowID), attrPoll, project,
		func() (automation.PollState, int64, error) { return s.readPoll(ctx, project, flowID) }, change)
}
