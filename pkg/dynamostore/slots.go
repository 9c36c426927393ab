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

// The admission bookkeeping of runs (automation.Slots) is an item of the
// samples table per bound, keyed "slots#<scope>" (flow IDs never contain
// '#'), its document in attrSlots, guarded by stateVersion like a flow's
// state. Holds and places in line expire inside the document, so a runner
// that dies between taking and giving back a slot leaks nothing past its
// lease.
const attrSlots = "slots" // S, automation.Slots as JSON

// slotUpdateAttempts bounds UpdateSlots' retries when another runner wins
// the race: every run of a busy bound writes its document.
const slotUpdateAttempts = 20

var _ automation.SlotStore = (*Store)(nil)

func slotsKey(scope string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrFlowID: str("slots#" + scope)}
}

// UpdateSlots reads the scope's document (consistent), changes it and
// writes it back on condition that its version did not move; a lost race
// reads again.
func (s *Store) UpdateSlots(ctx context.Context, project, scope string, change func(automation.Slots) (automation.Slots, error)) error {
	key := slotsKey(scope)
	for attempt := 1; ; attempt++ {
		out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: &s.t.Samples, Key: key, ConsistentRead: aws.Bool(true),
			ProjectionExpression:     aws.String("#project, #slots, #sv"),
			ExpressionAttributeNames: map[string]string{"#project": attrProject, "#slots": attrSlots, "#sv": attrStateVersion},
		})
		if err != nil {
			return fmt.Errorf("dynamostore: read slots %s: %w", scope, err)
		}
		var (
			cur     automation.Slots
			version int64
		)
		r := reader{item: out.Item}
		if len(out.Item) > 0 {
			if doc := r.str(attrSlots); doc != "" && r.str(attrProject) == project {
				if err := json.Unmarshal([]byte(doc), &cur); err != nil {
					return fmt.Errorf("dynamostore: slots %s: %w", scope, err)
				}
			}
			if out.Item[attrStateVersion] != nil {
				version = r.int(attrStateVersion)
			}
		}
		if r.err != nil {
			return fmt.Errorf("dynamostore: slots %s: %w", scope, r.err)
		}
		next, err := change(cur)
		if err != nil {
			return err
		}
		var lost bool
		if next.Empty() && r.str(attrProject) != project {
			return nil // nothing of this project's to remove
		}
		if next.Empty() {
			lost, err = s.deleteVersioned(ctx, key, version)
		} else {
			doc, merr := json.Marshal(next)
			if merr != nil {
				return fmt.Errorf("dynamostore: encode slots %s: %w", scope, merr)
			}
			lost, err = s.putVersioned(ctx, key, attrSlots, project, doc, version)
		}
		if lost && attempt < slotUpdateAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("dynamostore: update slots %s: %w", scope, err)
		}
		return nil
	}
}

// deleteVersioned removes the samples-table item at key on condition that
// it is still at version (0: it has none, and then there is nothing to
// remove). A lost race is lost=true.
func (s *Store) deleteVersioned(ctx context.Context, key map[string]types.AttributeValue, version int64) (lost bool, err error) {
	if version == 0 {
		return false, nil
	}
	_, err = s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: &s.t.Samples, Key: key,
		ConditionExpression:       aws.String("#sv = :v"),
		ExpressionAttributeNames:  map[string]string{"#sv": attrStateVersion},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(version)},
	})
	if _, ok := conditionFailed(err); ok {
		return true, err
	}
	return false, err
}
