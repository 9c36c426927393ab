package dynamostore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A project's model tokens of a UTC day (automation/aitokens.go) are one
// item of the projects table, pk "aitokens#<project>#<day>", beside the
// rate buckets: an UpdateItem ADD, which DynamoDB applies atomically, so
// that every Lambda environment counts against the same figure and no
// concurrent add is lost. One item per project and day with AI steps;
// they are a few dozen bytes each and are not removed.
const attrTokens = "tokens"

func aiTokensKey(project, day string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str("aitokens#" + project + "#" + day)}
}

// AddAITokens adds n to the project's count of day and returns the count.
func (s *Store) AddAITokens(ctx context.Context, project, day string, n int64) (int64, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Projects, Key: aiTokensKey(project, day),
		UpdateExpression:          aws.String("ADD #t :n"),
		ExpressionAttributeNames:  map[string]string{"#t": attrTokens},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": num(n)},
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err != nil {
		return 0, fmt.Errorf("dynamostore: add model tokens of project %s: %w", project, err)
	}
	r := reader{item: out.Attributes}
	total := r.int(attrTokens)
	if r.err != nil {
		return 0, fmt.Errorf("dynamostore: add model tokens of project %s: %w", project, r.err)
	}
	return total, nil
}

// AITokens is the project's count of day, read strongly consistent: the
// quota is asked just after other environments' adds.
func (s *Store) AITokens(ctx context.Context, project, day string) (int64, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.t.Projects, Key: aiTokensKey(project, day), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#t"),
		ExpressionAttributeNames: map[string]string{"#t": attrTokens},
	})
	if err != nil {
		return 0, fmt.Errorf("dynamostore: model tokens of project %s: %w", project, err)
	}
	r := reader{item: out.Item}
	n := r.int(attrTokens)
	if r.err != nil {
		return 0, fmt.Errorf("dynamostore: model tokens of project %s: %w", project, r.err)
	}
	return n, nil
}
