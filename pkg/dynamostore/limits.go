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

// attrLimits holds a project's limit overrides as a JSON object of name to
// number (-1 for unlimited); absent is none.
const attrLimits = "limits"

// SetProjectLimits replaces the project's limit overrides.
func (s *Store) SetProjectLimits(ctx context.Context, id string, overrides map[string]int64) error {
	raw, err := json.Marshal(overrides)
	if err != nil || overrides == nil {
		raw = []byte("{}")
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Projects, Key: projectKey(id),
		UpdateExpression:          aws.String("SET #l = :l"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames:  map[string]string{"#l": attrLimits},
		ExpressionAttributeValues: map[string]types.AttributeValue{":l": str(string(raw))},
	})
	if _, ok := conditionFailed(err); ok {
		return automation.NotFound("project", id)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: set limits of project %s: %w", id, err)
	}
	return nil
}

// decodeLimits reads a project item's overrides.
func decodeLimits(item map[string]types.AttributeValue) (map[string]int64, error) {
	v, ok := item[attrLimits].(*types.AttributeValueMemberS)
	if !ok || v.Value == "" || v.Value == "{}" {
		return nil, nil
	}
	var m map[string]int64
	if err := json.Unmarshal([]byte(v.Value), &m); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	return m, nil
}
