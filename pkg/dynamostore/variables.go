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

// A project's variables are one item of the samples table keyed
// "vars#<projectId>" (IDs never contain '#'), as a flow's state is: a run
// reads them all with one strongly consistent GetItem, every function
// already reads that table, and no table is added. The Service bounds the
// document (automation.MaxVariablesBytes) well within the item size cap;
// attrStateVersion guards concurrent updates.
const attrVariables = "variables" // S, name -> variable as a JSON object

var _ automation.VariableStore = (*Store)(nil)

func variablesKey(project string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrFlowID: str("vars#" + project)}
}

// Variables reads the project's variables (consistent).
func (s *Store) Variables(ctx context.Context, project string) (map[string]automation.Variable, error) {
	m, _, err := s.readVariables(ctx, project)
	return m, err
}

func (s *Store) readVariables(ctx context.Context, project string) (map[string]automation.Variable, int64, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Samples, Key: variablesKey(project), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#vars, #sv"),
		ExpressionAttributeNames: map[string]string{"#vars": attrVariables, "#sv": attrStateVersion},
	})
	if err != nil {
		return nil, 0, fmt.Errorf("dynamostore: read variables of %s: %w", project, err)
	}
	m := map[string]automation.Variable{}
	if len(out.Item) == 0 {
		return m, 0, nil
	}
	r := reader{item: out.Item}
	if doc := r.str(attrVariables); doc != "" {
		if err := json.Unmarshal([]byte(doc), &m); err != nil {
			return nil, 0, fmt.Errorf("dynamostore: variables of %s: %w", project, err)
		}
	}
	var v int64
	if out.Item[attrStateVersion] != nil {
		v = r.int(attrStateVersion)
	}
	return m, v, r.err
}

// UpdateVariables writes the changed variables conditionally on the
// version it read; a lost race reads again.
func (s *Store) UpdateVariables(ctx context.Context, project string, change func(map[string]automation.Variable) (map[string]automation.Variable, error)) error {
	return updateVersioned(ctx, s, "variables of "+project, variablesKey(project), attrVariables, project,
		func() (map[string]automation.Variable, int64, error) { return s.readVariables(ctx, project) }, change)
}
