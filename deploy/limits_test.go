package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/dynamostore"
)

// TestDynamoDBLimits drives the api function where its items and
// transactions grow: a flow definition near the management API's 1 MiB
// body limit is refused as FLOW_TOO_LARGE (400) rather than failing
// DynamoDB's 400 KB item limit as a 500, one below the limit is stored;
// and every transaction it writes (a flow taking all webhook methods, its
// path moved, deleted) stays within DynamoDB's 100 items.
func TestDynamoDBLimits(t *testing.T) {
	st := newStack(t)
	var mu sync.Mutex
	largestTx := 0
	awsCfg := st.aws
	awsCfg.APIOptions = append(awsCfg.APIOptions, func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("CountTransactItems",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if tx, ok := in.Parameters.(*dynamodb.TransactWriteItemsInput); ok {
					mu.Lock()
					largestTx = max(largestTx, len(tx.TransactItems))
					mu.Unlock()
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	})
	h, err := management.NewHandler(context.Background(), awsCfg, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path, body string) (int, map[string]any) {
		t.Helper()
		return call(t, h, method, path, st.key, body)
	}

	flowOf := func(constant int) string {
		return fmt.Sprintf(`{"name": "Big", "engine": "FLOW_BUILDER", "steps": [{"name": "c", "type": "SET", "values": {"blob": %q}}]}`,
			strings.Repeat("x", constant))
	}
	if code, b := call("POST", "/api/v1/flows", flowOf(dynamostore.MaxItemSize+10_000)); code != 400 || errCode(b) != "FLOW_TOO_LARGE" {
		t.Errorf("definition over 400 KB: %d %v, want 400 FLOW_TOO_LARGE", code, b)
	}
	code, b := call("POST", "/api/v1/flows", flowOf(dynamostore.MaxItemSize-20_000))
	if code != 201 {
		t.Fatalf("definition under 400 KB: %d %v", code, b)
	}
	id, _ := b["id"].(string)
	if code, b := call("POST", "/api/v1/flows/"+id, flowOf(dynamostore.MaxItemSize+10_000)); code != 400 || errCode(b) != "FLOW_TOO_LARGE" {
		t.Errorf("update over 400 KB: %d %v, want 400 FLOW_TOO_LARGE", code, b)
	}

	// The most routes a flow holds: every webhook method on one path.
	hook := func(path string) string {
		return `{"name": "Any", "engine": "WORKFLOW_BUILDER", "trigger": {"type": "WEBHOOK",
			"webhook": {"httpMethod": "ANY", "path": "` + path + `", "responseMode": "IMMEDIATE"}}}`
	}
	code, b = call("POST", "/api/v1/flows", hook("limits/a"))
	if code != 201 {
		t.Fatalf("create: %d %v", code, b)
	}
	id, _ = b["id"].(string)
	if code, b := call("POST", "/api/v1/flows/"+id, hook("limits/b")); code != 200 {
		t.Fatalf("move path: %d %v", code, b)
	}
	if code, b := call("DELETE", "/api/v1/flows/"+id, ""); code != 204 {
		t.Fatalf("delete: %d %v", code, b)
	}
	// A path move is the largest transaction a flow write builds: the
	// flow, every old route removed and every new one added, the two
	// paths' owner items (workflow paths are one namespace across
	// projects: the new path claimed, the old one released), and the shape
	// registry (the new shape registered, the old one unregistered, and the
	// version item of the new shape's segment count bumped, so that two
	// overlapping patterns saved at once cannot both land). It does not
	// grow with the flow, so it stays far below DynamoDB's 100. The
	// request's audit entry is one more item (docs/access.md), and so is
	// the version the definition change publishes (docs/api.md, versions).
	if bound := 1 + 2*len(automation.WebhookMethods) + 2 + 3 + 1 + 1; largestTx != bound || bound > 100 {
		t.Errorf("largest transaction %d items (bound %d); DynamoDB takes 100", largestTx, bound)
	}
}

func errCode(b map[string]any) string {
	e, _ := b["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

// TestFlowDeleteBounded deletes, through the api function, a flow with more
// runs than DeleteFlow removes itself: the DELETE makes a fixed number of
// AWS calls however many runs there are (so it stays within API Gateway's
// 29 s), removes dynamostore.DefaultFlowDeleteRuns of them, and leaves the
// rest to TTL (each carries expiresAt) where nothing reaches them.
func TestFlowDeleteBounded(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	f := st.flow(t, formFlow, true)
	const runs = dynamostore.DefaultFlowDeleteRuns + 30
	// One run through the store, then copies of its item under new IDs
	// (moto is slow at 530 transactions).
	first := automation.Run{
		ID: automation.NewID(automation.PrefixRun), Project: st.project.ID, FlowID: f.ID, Status: automation.RunSucceeded,
		Trigger: automation.TriggerData{Method: "POST", Headers: map[string]string{}, Query: map[string]string{}, Body: json.RawMessage(`{}`)},
		Steps:   []automation.StepResult{}, Created: time.Now().UTC().Truncate(time.Millisecond),
	}
	if err := st.store.CreateRun(ctx, first); err != nil {
		t.Fatal(err)
	}
	db := dynamodb.NewFromConfig(st.aws)
	got, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &st.cfg.Tables.Runs, Key: map[string]dbtypes.AttributeValue{
		"id": &dbtypes.AttributeValueMemberS{Value: first.ID}}})
	if err != nil || len(got.Item) == 0 {
		t.Fatalf("read the run item: %v", err)
	}
	var reqs []dbtypes.WriteRequest
	for range runs - 1 {
		item := maps.Clone(got.Item)
		id := automation.NewID(automation.PrefixRun)
		item["id"] = &dbtypes.AttributeValueMemberS{Value: id}
		if cs, ok := item["createdSort"].(*dbtypes.AttributeValueMemberS); ok {
			item["createdSort"] = &dbtypes.AttributeValueMemberS{Value: cs.Value + id}
		}
		reqs = append(reqs, dbtypes.WriteRequest{PutRequest: &dbtypes.PutRequest{Item: item}})
	}
	for chunk := range slices.Chunk(reqs, 25) {
		if _, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]dbtypes.WriteRequest{st.cfg.Tables.Runs: chunk}}); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	calls, deleted := 0, 0
	cfg := st.cfg
	cfg.Observe = func(_, _ string, in any) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if b, ok := in.(*dynamodb.BatchWriteItemInput); ok {
			// The runs' batches; the flow's versions go in batches too.
			deleted += len(b.RequestItems[st.cfg.Tables.Runs])
		}
	}
	h, err := management.NewHandler(ctx, st.aws, cfg)
	if err != nil {
		t.Fatal(err)
	}
	calls = 0 // the cold start's calls are not the DELETE's
	if code, b := call(t, h, "DELETE", "/api/v1/flows/"+f.ID, st.key, ""); code != 204 {
		t.Fatalf("delete = %d %v", code, b)
	}
	// A fixed handful (authentication, flow reads, its transaction and
	// secrets, one query page) and a batch per 25 runs deleted.
	if bound := 10 + dynamostore.DefaultFlowDeleteRuns/25; calls > bound || deleted != dynamostore.DefaultFlowDeleteRuns {
		t.Errorf("DELETE made %d AWS calls (bound %d) and deleted %d runs, want %d", calls, bound, deleted, dynamostore.DefaultFlowDeleteRuns)
	}
	left, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: &st.cfg.Tables.Runs})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != runs-dynamostore.DefaultFlowDeleteRuns {
		t.Errorf("%d runs left, want %d", len(left.Items), runs-dynamostore.DefaultFlowDeleteRuns)
	}
	for _, it := range left.Items {
		if _, ok := it["expiresAt"]; !ok {
			t.Fatalf("a run left behind has no expiresAt: TTL would never remove it")
		}
	}
	if code, _ := call(t, h, "GET", "/api/v1/flows/"+f.ID+"/runs", st.key, ""); code != 404 {
		t.Errorf("runs of the deleted flow = %d, want 404", code)
	}
}
