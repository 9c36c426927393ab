package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// A flow's STORE state is an item of the samples table keyed
// "state#<flowId>" (flow IDs never contain '#'): beside the flow and outside
// its version, apart from the flow's sample item, removed in DeleteFlow's
// transaction, and no table is added. stateVersion guards concurrent
// updates.
const (
	attrState        = "state"        // S, the state as a JSON object
	attrStateVersion = "stateVersion" // N, bumped by every update
)

// stateUpdateAttempts bounds the retries of a versioned update (flow state,
// project variables: updateVersioned) when another update wins the race.
const stateUpdateAttempts = 5

var _ automation.StateStore = (*Store)(nil)

func stateKey(flowID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrFlowID: str("state#" + flowID)}
}

// stateDelete is the transaction item that removes a flow's state with the
// flow; nil when the store has no samples table.
func (s *Store) stateDelete(flowID string) *types.TransactWriteItem {
	if s.t.Samples == "" {
		return nil
	}
	return &types.TransactWriteItem{Delete: &types.Delete{TableName: &s.t.Samples, Key: stateKey(flowID)}}
}

// FlowState reads the flow's state (consistent).
func (s *Store) FlowState(ctx context.Context, project, flowID string) (map[string]json.RawMessage, error) {
	m, _, err := s.readState(ctx, project, flowID)
	return m, err
}

func (s *Store) readState(ctx context.Context, project, flowID string) (map[string]json.RawMessage, int64, error) {
	m := map[string]json.RawMessage{}
	v, err := readVersioned(ctx, s, stateKey(flowID), attrState, project, "state of flow "+flowID, &m)
	if err != nil {
		return nil, 0, err
	}
	return m, v, nil
}

// readVersioned reads the versioned document at key of the samples table
// (a flow's state or poll state) into doc, consistently, and returns its
// version: an item that is missing or of another project leaves doc as it
// is, at version 0. what names the document in errors.
func readVersioned[T any](ctx context.Context, s *Store, key map[string]types.AttributeValue, attr, project, what string, doc *T) (int64, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Samples, Key: key, ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#project, #doc, #sv"),
		ExpressionAttributeNames: map[string]string{"#project": attrProject, "#doc": attr, "#sv": attrStateVersion},
	})
	if err != nil {
		return 0, fmt.Errorf("dynamostore: read %s: %w", what, err)
	}
	r := reader{item: out.Item}
	if len(out.Item) == 0 || r.str(attrProject) != project {
		return 0, r.err
	}
	if raw := r.str(attr); raw != "" {
		if err := json.Unmarshal([]byte(raw), doc); err != nil {
			return 0, fmt.Errorf("dynamostore: %s: %w", what, err)
		}
	}
	var v int64
	if out.Item[attrStateVersion] != nil {
		v = r.int(attrStateVersion)
	}
	return v, r.err
}

// requireFlow refuses, as not found, a flow that is not project's: the
// documents kept beside a flow (state, poll state) are written for it
// only. The flow is read, not made part of the write: a condition check on
// the flow item in a transaction would contend with every run finishing
// on a busy flow (each adds to the flow's statistics), and DynamoDB
// cancels such transactions (TransactionConflict).
func (s *Store) requireFlow(ctx context.Context, project, flowID, what string) error {
	flow, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Flows, Key: flowKey(flowID),
		ProjectionExpression:     aws.String("#project"),
		ExpressionAttributeNames: map[string]string{"#project": attrProject},
	})
	if err != nil {
		return fmt.Errorf("dynamostore: update %s: %w", what, err)
	}
	if r := (reader{item: flow.Item}); len(flow.Item) == 0 || r.str(attrProject) != project {
		return automation.NotFound("flow", flowID)
	}
	return nil
}

// UpdateFlowState writes the changed state conditionally on the version
// it read; a lost race reads again. The flow is read first (requireFlow),
// so that the state of a missing flow (or another project's) is refused. A
// state written while its flow is being deleted outlives it as a small
// item no flow reads.
func (s *Store) UpdateFlowState(ctx context.Context, project, flowID string, change func(map[string]json.RawMessage) (map[string]json.RawMessage, error)) error {
	if err := s.requireFlow(ctx, project, flowID, "state of flow "+flowID); err != nil {
		return err
	}
	return updateVersioned(ctx, s, "state of flow "+flowID, stateKey(flowID), attrState, project,
		func() (map[string]json.RawMessage, int64, error) { return s.readState(ctx, project, flowID) }, change)
}

// updateVersioned is the read-change-write of a versioned document (flow
// state, project variables): read returns the document and its version,
// change the next document, which is written on condition that the
// version has not moved (putVersioned); a lost race reads and changes
// again, up to stateUpdateAttempts times. what names the document in
// errors.
func updateVersioned[T any](ctx context.Context, s *Store, what string, key map[string]types.AttributeValue, attr, project string,
	read func() (T, int64, error), change func(T) (T, error)) error {
	for attempt := 1; ; attempt++ {
		cur, version, err := read()
		if err != nil {
			return err
		}
		next, err := change(cur)
		if err != nil {
			return err
		}
		doc, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("dynamostore: encode %s: %w", what, err)
		}
		lost, err := s.putVersioned(ctx, key, attr, project, doc, version)
		if lost && attempt < stateUpdateAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("dynamostore: update %s: %w", what, err)
		}
		return nil
	}
}

// putVersioned writes doc into attr of the samples-table item at key (flow
// state, project variables) on condition that the item is still at version
// (0: it has none yet), and moves it to the next version. A lost race is
// lost=true, for the caller to read again.
func (s *Store) putVersioned(ctx context.Context, key map[string]types.AttributeValue, attr, project string, doc []byte, version int64) (lost bool, err error) {
	cond := "attribute_not_exists(#sv)"
	values := map[string]types.AttributeValue{
		":project": str(project), ":doc": str(string(doc)), ":next": num(version + 1),
	}
	if version > 0 {
		cond = "#sv = :v"
		values[":v"] = num(version)
	}
	// writeOne: a variable's change commits with the request's audit
	// entry (audit.go).
	lost, err = s.writeOne(ctx, types.TransactWriteItem{Update: &types.Update{
		TableName: &s.t.Samples, Key: key,
		UpdateExpression:          aws.String("SET #project = :project, #doc = :doc, #sv = :next"),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  map[string]string{"#project": attrProject, "#doc": attr, "#sv": attrStateVersion},
		ExpressionAttributeValues: values,
	}})
	if lost {
		return true, errors.New("changed since read")
	}
	return false, err
}
