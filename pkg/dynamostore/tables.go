package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableAPI is the part of the DynamoDB client CreateTables uses.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

var _ TableAPI = (*dynamodb.Client)(nil)

// Attribute that expires runs: epoch seconds, DynamoDB's TTL format.
const attrExpiresAt = "expiresAt"

// TableDefinitions returns the CreateTable inputs of the tables, on-demand
// billing. The CloudFormation template declares the same tables; this is
// what tests and the local FLOWD_BACKEND=aws mode use.
func TableDefinitions(t Tables) []*dynamodb.CreateTableInput {
	s := func(name string) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS}
	}
	keys := func(hash, rng string) []types.KeySchemaElement {
		ks := []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}}
		if rng != "" {
			ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange})
		}
		return ks
	}
	gsi := func(name, hash, rng string) types.GlobalSecondaryIndex {
		return types.GlobalSecondaryIndex{
			IndexName:  aws.String(name),
			KeySchema:  keys(hash, rng),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}
	}
	table := func(name string, attrs []types.AttributeDefinition, ks []types.KeySchemaElement, gsis ...types.GlobalSecondaryIndex) *dynamodb.CreateTableInput {
		in := &dynamodb.CreateTableInput{
			TableName: aws.String(name), AttributeDefinitions: attrs, KeySchema: ks,
			BillingMode: types.BillingModePayPerRequest,
		}
		if len(gsis) > 0 {
			in.GlobalSecondaryIndexes = gsis
		}
		return in
	}
	return []*dynamodb.CreateTableInput{
		table(t.Projects, []types.AttributeDefinition{s(attrPK)}, keys(attrPK, "")),
		table(t.Keys, []types.AttributeDefinition{s(attrPK), s(attrProject), s(attrCreatedSort)}, keys(attrPK, ""),
			gsi(indexByProject, attrProject, attrCreatedSort)),
		table(t.Flows, []types.AttributeDefinition{s(attrID), s(attrProject), s(attrProjectStatus), s(attrCreatedSort)}, keys(attrID, ""),
			gsi(indexByProject, attrProject, attrCreatedSort),
			gsi(indexByStatus, attrProjectStatus, attrCreatedSort)),
		table(t.Routes, []types.AttributeDefinition{s(attrPath), s(attrMethod)}, keys(attrPath, attrMethod)),
		table(t.Connections, []types.AttributeDefinition{s(attrID), s(attrProject), s(attrCreatedSort)}, keys(attrID, ""),
			gsi(indexByProject, attrProject, attrCreatedSort)),
		table(t.Runs, []types.AttributeDefinition{s(attrID), s(attrProject), s(attrProjectFlow), s(attrProjectFlowStatus), s(attrCreatedSort)}, keys(attrID, ""),
			gsi(indexByFlow, attrProjectFlow, attrCreatedSort),
			gsi(indexByStatus, attrProjectFlowStatus, attrCreatedSort),
			gsi(indexByProject, attrProject, attrCreatedSort)),
		table(t.Samples, []types.AttributeDefinition{s(attrFlowID)}, keys(attrFlowID, "")),
		table(t.OAuthApps, []types.AttributeDefinition{s(attrAppName)}, keys(attrAppName, "")),
	}
}

// CreateTables creates the tables that do not exist yet, waits until they
// are active, and turns on the runs table's TTL. Existing tables are left as
// they are, so it is safe to call on every start of a local server.
func CreateTables(ctx context.Context, client TableAPI, t Tables) error {
	defs := TableDefinitions(t)
	for _, in := range defs {
		_, err := client.CreateTable(ctx, in)
		var inUse *types.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) {
			return fmt.Errorf("dynamostore: create table %s: %w", *in.TableName, err)
		}
	}
	waiter := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = time.Second, 5*time.Second
	})
	for _, in := range defs {
		if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: in.TableName}, 5*time.Minute); err != nil {
			return fmt.Errorf("dynamostore: wait for table %s: %w", *in.TableName, err)
		}
	}
	_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(t.Runs),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrExpiresAt), Enabled: aws.Bool(true),
		},
	})
	// DynamoDB refuses to enable TTL that is already enabled.
	var invalid *types.ResourceInUseException
	if err != nil && !errors.As(err, &invalid) && !isTTLAlreadyEnabled(err) {
		return fmt.Errorf("dynamostore: enable TTL on %s: %w", t.Runs, err)
	}
	return nil
}

// isTTLAlreadyEnabled recognizes the ValidationException DynamoDB answers
// when TTL is enabled twice.
func isTTLAlreadyEnabled(err error) bool {
	var api interface{ ErrorMessage() string }
	return errors.As(err, &api) && strings.Contains(strings.ToLower(api.ErrorMessage()), "already enabled")
}
