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

// indexProjections are the attributes each index copies beside the keys,
// by "<table kind>.<index>"; an index not named here is KEYS_ONLY. Every
// index copy is written again whenever an attribute it projects changes,
// and a write unit is paid per KB of every copy, so an index carries only
// what its query reads, and a list that needs more reads the base items of
// its page (batchGet: one BatchGetItem per page, eventually consistent,
// half a read unit per item up to 4 KB). Per index:
//
//   - runs.byFlow and runs.byStatus: KEYS_ONLY (byFlow adds the payload
//     references, which only DeleteFlow's query reads, and which are set at
//     creation or with steps too large for the item). A run item is written
//     3 to 5 times (create, claim, step journal, finish); with ALL each of
//     those wrote the whole run again into every index, 3 copies of 1-3 KB.
//     Now the claim and the journal write no index at all, the create
//     writes three copies of about 150 bytes (1 unit each) and the finish
//     moves the byStatus entry (2 units). A page of run summaries then
//     costs a BatchGetItem of up to 100 runs (≈ 50 read units, ≈ 30 more
//     than the ALL query read: $4 per million pages) against ≈ 7 write
//     units ($4.40 per million) saved on every run: cheaper unless pages
//     of 100 runs are listed more often than runs are made.
//   - runs.byProject: INCLUDE status (which its query once filtered on);
//     one 1-unit index write at the finish, when the status changes.
//   - runs.byProjectStatus: KEYS_ONLY, GET /runs?status= without a flow:
//     one query per page however many runs have other statuses; the
//     finish moves its entry (2 units), as byStatus's.
//   - flows.byProject and flows.byStatus: KEYS_ONLY. The flow item takes an
//     ADD of its run statistics on every finished run; with ALL that wrote
//     the whole flow (1-4 KB, definition included) into both indexes on
//     every run. Listing flows reads the page's flows with BatchGetItem
//     (the list needs the statistics, and ScheduledFlows the trigger).
//   - keys.byProject and connections.byProject: INCLUDE of exactly what the
//     list decodes. Those items are small and written only by the
//     management API, so a copy costs 1 unit on a rare write and saves the
//     list a second call.
var indexProjections = map[string][]string{
	"runs." + indexByFlow:           {attrTriggerPayload, attrStepsPayload},
	"runs." + indexByProject:        {"status"},
	"keys." + indexByProject:        {attrID, "hash", "prefix", "created", "revoked"},
	"connections." + indexByProject: {"name", "app", "type", "status", "created", "updated"},
}

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
	// gsi projects the keys (the table's and the index's) and the
	// attributes named: see indexProjections for what each index holds
	// and why.
	gsi := func(table, name, hash, rng string) types.GlobalSecondaryIndex {
		p := &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}
		if attrs := indexProjections[table+"."+name]; len(attrs) > 0 {
			p = &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: attrs}
		}
		return types.GlobalSecondaryIndex{IndexName: aws.String(name), KeySchema: keys(hash, rng), Projection: p}
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
	return append([]*dynamodb.CreateTableInput{
		table(t.Projects, []types.AttributeDefinition{s(attrPK)}, keys(attrPK, "")),
		table(t.Keys, []types.AttributeDefinition{s(attrPK), s(attrProject), s(attrCreatedSort)}, keys(attrPK, ""),
			gsi("keys", indexByProject, attrProject, attrCreatedSort)),
		table(t.Flows, []types.AttributeDefinition{s(attrID), s(attrProject), s(attrProjectStatus), s(attrCreatedSort)}, keys(attrID, ""),
			gsi("flows", indexByProject, attrProject, attrCreatedSort),
			gsi("flows", indexByStatus, attrProjectStatus, attrCreatedSort)),
		table(t.Routes, []types.AttributeDefinition{s(attrPath), s(attrMethod)}, keys(attrPath, attrMethod)),
		table(t.Connections, []types.AttributeDefinition{s(attrID), s(attrProject), s(attrCreatedSort)}, keys(attrID, ""),
			gsi("connections", indexByProject, attrProject, attrCreatedSort)),
		table(t.Runs, []types.AttributeDefinition{s(attrID), s(attrProject), s(attrProjectFlow), s(attrProjectFlowStatus), s(attrCreatedSort), s(attrProjectRunStatus)}, keys(attrID, ""),
			gsi("runs", indexByFlow, attrProjectFlow, attrCreatedSort),
			gsi("runs", indexByStatus, attrProjectFlowStatus, attrCreatedSort),
			gsi("runs", indexByProject, attrProject, attrCreatedSort),
			gsi("runs", indexByProjectStatus, attrProjectRunStatus, attrCreatedSort)),
		table(t.Samples, []types.AttributeDefinition{s(attrFlowID)}, keys(attrFlowID, "")),
		table(t.OAuthApps, []types.AttributeDefinition{s(attrAppName)}, keys(attrAppName, "")),
		table(t.Audit, []types.AttributeDefinition{s(attrProject), s(attrSortKey)}, keys(attrProject, attrSortKey)),
	}, alertsTables(t)...)
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
	for _, name := range []string{t.Runs, t.Audit, t.Keys} { // keys: set-up links and sessions (users.go)
		_, err := client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName: aws.String(name),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{
				AttributeName: aws.String(attrExpiresAt), Enabled: aws.Bool(true),
			},
		})
		// DynamoDB refuses to enable TTL that is already enabled.
		var invalid *types.ResourceInUseException
		if err != nil && !errors.As(err, &invalid) && !isTTLAlreadyEnabled(err) {
			return fmt.Errorf("dynamostore: enable TTL on %s: %w", name, err)
		}
	}
	return enableAlertsTTL(ctx, client, t) // alerts.go
}

// isTTLAlreadyEnabled recognizes the ValidationException DynamoDB answers
// when TTL is enabled twice.
func isTTLAlreadyEnabled(err error) bool {
	var api interface{ ErrorMessage() string }
	return errors.As(err, &api) && strings.Contains(strings.ToLower(api.ErrorMessage()), "already enabled")
}
