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
	for attempt := 1; ; attempt++ {
		cur, version, err := s.readVariables(ctx, project)
		if err != nil {
			return err
		}
		next, err := change(cur)
		if err != nil {
			return err
		}
		doc, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("dynamostore: encode variables of %s: %w", project, err)
		}
		cond := "attribute_not_exists(#sv)"
		values := map[string]types.AttributeValue{
			":project": str(project), ":vars": str(string(doc)), ":next": num(version + 1),
		}
		if version > 0 {
			cond = "#sv = :v"
			values[":v"] = num(version)
		}
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &s.t.Samples, Key: variablesKey(project),
			UpdateExpression:          aws.String("SET #project = :project, #vars = :vars, #sv = :next"),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  map[string]string{"#project": attrProject, "#vars": attrVariables, "#sv": attrStateVersion},
			ExpressionAttributeValues: values,
		})
		if _, ok := conditionFailed(err); ok && attempt < stateUpdateAttempts {
			continue
		}
		if err != nil {
			return fmt.Errorf("dynamostore: update variables of %s: %w", project, err)
		}
		return nil
	}
}
