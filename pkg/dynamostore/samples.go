package dynamostore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// The samples table holds two items per webhook flow ever armed, keyed by
// flowId, beside the flow item rather than in it, so that arming and
// capturing never touch the flow's version:
//
//   - the armed flag, under "armed#<flowId>": project and armedUntil, a few
//     dozen bytes. Every delivery to an ACTIVE flow builder flow and every
//     call to a test URL reads it, and a read is charged by the size of the
//     whole item (a ProjectionExpression does not lower it): in the sample
//     item, each unarmed delivery paid for the stored sample, up to 300 KB
//     (75 read units); here it pays 1.
//   - the sample, under "<flowId>": project and the latest sample.
const (
	attrArmedUntil = "armedUntil" // N, Unix milliseconds; absent when no capture is armed
	attrSample     = "sample"     // S, the latest automation.Sample as JSON
	armedPrefix    = "armed#"
)

var _ automation.SampleStore = (*Store)(nil)

func sampleKey(flowID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrFlowID: str(flowID)}
}

func armedKey(flowID string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrFlowID: str(armedPrefix + flowID)}
}

// flowInProject is the condition that the flow exists in the project, for
// a transaction that writes beside the flow (its capture, its state) and
// must write nothing for a missing, deleted or other project's flow.
func (s *Store) flowInProject(project, flowID string) *types.ConditionCheck {
	return &types.ConditionCheck{
		TableName: &s.t.Flows, Key: flowKey(flowID),
		ConditionExpression:       aws.String("#project = :project"),
		ExpressionAttributeNames:  map[string]string{"#project": attrProject},
		ExpressionAttributeValues: map[string]types.AttributeValue{":project": str(project)},
	}
}

// ArmCapture sets armedUntil on the armed item in one transaction with a
// condition check on the flow in the project, so no item appears for a
// missing (or just deleted) flow.
func (s *Store) ArmCapture(ctx context.Context, project, flowID string, until time.Time) error {
	tx, err := s.audited(ctx, []types.TransactWriteItem{
		{ConditionCheck: s.flowInProject(project, flowID)},
		{Update: &types.Update{
			TableName: &s.t.Samples, Key: armedKey(flowID),
			UpdateExpression:          aws.String("SET #project = :project, #armedUntil = :until"),
			ExpressionAttributeNames:  map[string]string{"#project": attrProject, "#armedUntil": attrArmedUntil},
			ExpressionAttributeValues: map[string]types.AttributeValue{":project": str(project), ":until": num(until.UnixMilli())},
		}},
	})
	if err != nil {
		return fmt.Errorf("dynamostore: arm capture of flow %s: %w", flowID, err)
	}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
	if rs := cancelReasons(err); rs != nil && reasonCode(rs, 0) == reasonCondition {
		return automation.NotFound("flow", flowID)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: arm capture of flow %s: %w", flowID, err)
	}
	return nil
}

// ArmedUntil reads the armed item (consistent): one read unit.
func (s *Store) ArmedUntil(ctx context.Context, project, flowID string) (time.Time, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Samples, Key: armedKey(flowID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("dynamostore: capture of flow %s: %w", flowID, err)
	}
	return armedUntil(out.Item, project)
}

// armedUntil decodes an armed item of the project; zero when there is
// none or nothing is armed.
func armedUntil(item map[string]types.AttributeValue, project string) (time.Time, error) {
	r := reader{item: item}
	if len(item) == 0 || r.str(attrProject) != project || item[attrArmedUntil] == nil {
		return time.Time{}, r.err
	}
	ms := r.int(attrArmedUntil)
	if r.err != nil {
		return time.Time{}, fmt.Errorf("dynamostore: armed item of flow %s: %w", r.str(attrFlowID), r.err)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// TakeCapture removes armedUntil with the condition that it is later than
// now: DynamoDB applies the condition and the write atomically, so one
// caller per arming succeeds. A failed condition (nothing armed, expired,
// another project's, no item) is false.
func (s *Store) TakeCapture(ctx context.Context, project, flowID string, now time.Time) (bool, error) {
	// Nearly every delivery finds nothing armed: a consistent read of the
	// small armed item settles that for one read unit, where a failed
	// conditional write costs a whole write unit.
	until, err := s.ArmedUntil(ctx, project, flowID)
	if err != nil {
		return false, err
	}
	if !until.After(now) {
		return false, nil
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Samples, Key: armedKey(flowID),
		UpdateExpression:          aws.String("REMOVE #armedUntil"),
		ConditionExpression:       aws.String("#project = :project AND #armedUntil > :now"),
		ExpressionAttributeNames:  map[string]string{"#project": attrProject, "#armedUntil": attrArmedUntil},
		ExpressionAttributeValues: map[string]types.AttributeValue{":project": str(project), ":now": num(now.UnixMilli())},
	})
	if _, failed := conditionFailed(err); failed {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("dynamostore: take capture of flow %s: %w", flowID, err)
	}
	return true, nil
}

// PutSample stores the sample as JSON in the sample item, in one
// transaction with a check that the flow's armed item is there (it was
// armed, and is not deleted: DeleteFlow removes both). A sample whose
// encoding is larger than the payload threshold (DefaultPayloadThreshold,
// below the 400 KB item limit) keeps its trigger body as the truncation
// marker {"truncated":true,"bytes":N}, without the raw body: the schema,
// inferred from the whole body when it was captured, and the headers stay.
func (s *Store) PutSample(ctx context.Context, project, flowID string, smp automation.Sample) error {
	doc, err := json.Marshal(smp)
	if err != nil {
		return fmt.Errorf("dynamostore: put sample of flow %s: encode: %w", flowID, err)
	}
	if len(doc) > s.threshold {
		smp.Trigger.Body, smp.Trigger.RawBody = truncated(len(smp.Trigger.Body)), ""
		if doc, err = json.Marshal(smp); err != nil {
			return fmt.Errorf("dynamostore: put sample of flow %s: encode: %w", flowID, err)
		}
	}
	owned := map[string]types.AttributeValue{":project": str(project)}
	_, err = s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{
			TableName: &s.t.Samples, Key: armedKey(flowID),
			ConditionExpression:       aws.String("#project = :project"),
			ExpressionAttributeNames:  map[string]string{"#project": attrProject},
			ExpressionAttributeValues: owned,
		}},
		{Update: &types.Update{
			TableName: &s.t.Samples, Key: sampleKey(flowID),
			UpdateExpression:          aws.String("SET #project = :project, #sample = :sample"),
			ConditionExpression:       aws.String("attribute_not_exists(#project) OR #project = :project"),
			ExpressionAttributeNames:  map[string]string{"#project": attrProject, "#sample": attrSample},
			ExpressionAttributeValues: map[string]types.AttributeValue{":project": str(project), ":sample": str(string(doc))},
		}},
	}})
	if rs := cancelReasons(err); rs != nil && (reasonCode(rs, 0) == reasonCondition || reasonCode(rs, 1) == reasonCondition) {
		return automation.NotFound("flow", flowID)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: put sample of flow %s: %w", flowID, err)
	}
	return nil
}

// Capture reads the flow's armed item and sample item (consistent).
func (s *Store) Capture(ctx context.Context, project, flowID string) (automation.Capture, error) {
	armed, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Samples, Key: armedKey(flowID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return automation.Capture{}, fmt.Errorf("dynamostore: capture of flow %s: %w", flowID, err)
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Samples, Key: sampleKey(flowID), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return automation.Capture{}, fmt.Errorf("dynamostore: capture of flow %s: %w", flowID, err)
	}
	ra, r := reader{item: armed.Item}, reader{item: out.Item}
	hasArmed := len(armed.Item) > 0 && ra.str(attrProject) == project
	hasSample := len(out.Item) > 0 && r.str(attrProject) == project
	if !hasArmed && !hasSample {
		return automation.Capture{}, automation.NotFound("sample", flowID)
	}
	var c automation.Capture
	if hasArmed {
		if c.ArmedUntil, err = armedUntil(armed.Item, project); err != nil {
			return automation.Capture{}, fmt.Errorf("dynamostore: capture of flow %s: %w", flowID, err)
		}
	}
	if doc := r.str(attrSample); hasSample && doc != "" {
		c.Sample = &automation.Sample{}
		if err := json.Unmarshal([]byte(doc), c.Sample); err != nil && r.err == nil {
			r.err = fmt.Errorf("attribute %s: %w", attrSample, err)
		}
	}
	if r.err != nil {
		return automation.Capture{}, fmt.Errorf("dynamostore: capture of flow %s: %w", flowID, r.err)
	}
	return c, nil
}

// sampleDeletes are the transaction items that remove a flow's armed item
// and sample with the flow; none when the store has no samples table.
func (s *Store) sampleDeletes(flowID string) []types.TransactWriteItem {
	if s.t.Samples == "" {
		return nil
	}
	return []types.TransactWriteItem{
		{Delete: &types.Delete{TableName: &s.t.Samples, Key: sampleKey(flowID)}},
		{Delete: &types.Delete{TableName: &s.t.Samples, Key: armedKey(flowID)}},
	}
}
