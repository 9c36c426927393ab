package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// A project's flows are counted in one item of the samples table keyed
// "flowcount#<projectId>", whose attrFlowCount every CreateFlow adds 1 to
// and every DeleteFlow takes 1 from, each in the flow's own transaction.
// The flows quota (automation.FlowBounds.MaxFlows) is the condition of
// that add, so of concurrent creates exactly as many as the quota leaves
// commit: a count read before the write could let them all through.
//
// A project whose flows were made before the counter existed has none: its
// first create counts the flows (the byProject index, eventually
// consistent, once per project) and writes the counter on condition that
// no other create wrote it first.
const attrFlowCount = "flowCount"

// flowCountAttempts bounds a create's retries when its counter write loses
// a race (another create made the counter first, or a concurrent
// transaction held the item).
const flowCountAttempts = 8

// errCountRaced is a create whose counter write lost a race: it is made
// again on a fresh read of the counter.
var errCountRaced = errors.New("flow count changed since read")

func flowCountKey(project string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrFlowID: str("flowcount#" + project)}
}

// readFlowCount returns the project's counter, and false when it has none.
func (s *Store) readFlowCount(ctx context.Context, project string) (int64, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Samples, Key: flowCountKey(project), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return 0, false, fmt.Errorf("read flow count: %w", err)
	}
	if out.Item[attrFlowCount] == nil {
		return 0, false, nil
	}
	r := reader{item: out.Item}
	n := r.int(attrFlowCount)
	return n, true, r.err
}

// countFlows counts the project's flows through the byProject index.
func (s *Store) countFlows(ctx context.Context, project string) (int64, error) {
	var n int64
	in := &dynamodb.QueryInput{
		TableName: &s.t.Flows, IndexName: aws.String(indexByProject), Select: types.SelectCount,
		KeyConditionExpression:    aws.String("#p = :p"),
		ExpressionAttributeNames:  map[string]string{"#p": attrProject},
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": str(project)},
	}
	for p := dynamodb.NewQueryPaginator(s.db, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("count flows: %w", err)
		}
		n += int64(out.Count)
	}
	return n, nil
}

// countCreate is the transaction item that counts a new flow of the
// project, on condition that the quota leaves room; it returns the quota
// error instead when the counter read says there is none.
func (s *Store) countCreate(ctx context.Context, f automation.Flow) (types.TransactWriteItem, error) {
	n, ok, err := s.readFlowCount(ctx, f.Project)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	names := map[string]string{"#n": attrFlowCount, "#project": attrProject}
	values := map[string]types.AttributeValue{":project": str(f.Project)}
	u := &types.Update{TableName: &s.t.Samples, Key: flowCountKey(f.Project), ExpressionAttributeNames: names, ExpressionAttributeValues: values}
	if !ok {
		if n, err = s.countFlows(ctx, f.Project); err != nil {
			return types.TransactWriteItem{}, err
		}
		u.UpdateExpression = aws.String("SET #n = :n, #project = :project")
		u.ConditionExpression = aws.String("attribute_not_exists(#n)")
		values[":n"] = num(n + 1)
	} else {
		u.UpdateExpression = aws.String("SET #project = :project ADD #n :one")
		values[":one"] = num(1)
		u.ConditionExpression = aws.String("attribute_exists(#n)")
		if f.MaxFlows != nil {
			*u.ConditionExpression += " AND #n < :max"
			values[":max"] = num(*f.MaxFlows)
		}
	}
	if f.MaxFlows != nil && n >= *f.MaxFlows {
		return types.TransactWriteItem{}, automation.FlowQuotaExceeded(*f.MaxFlows)
	}
	return types.TransactWriteItem{Update: u}, nil
}

// countFailed tells why a create's counter write was cancelled: the
// quota, when a fresh read finds the project at it, or a lost race.
func (s *Store) countFailed(ctx context.Context, f automation.Flow) error {
	n, ok, err := s.readFlowCount(ctx, f.Project)
	if err != nil {
		return err
	}
	if ok && f.MaxFlows != nil && n >= *f.MaxFlows {
		return automation.FlowQuotaExceeded(*f.MaxFlows)
	}
	return errCountRaced
}

// countDelete is the transaction item that uncounts a deleted flow, or
// nil when the project has no counter yet (its first create counts what
// is left).
func (s *Store) countDelete(ctx context.Context, project string) (*types.TransactWriteItem, error) {
	_, ok, err := s.readFlowCount(ctx, project)
	if err != nil || !ok {
		return nil, err
	}
	return &types.TransactWriteItem{Update: &types.Update{
		TableName: &s.t.Samples, Key: flowCountKey(project),
		UpdateExpression:          aws.String("ADD #n :minus"),
		ConditionExpression:       aws.String("attribute_exists(#n)"),
		ExpressionAttributeNames:  map[string]string{"#n": attrFlowCount},
		ExpressionAttributeValues: map[string]types.AttributeValue{":minus": num(-1)},
	}}, nil
}
