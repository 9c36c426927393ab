package deploy

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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
	// A path move removes every route and adds every route: the largest
	// transaction a flow write builds.
	if bound := 1 + 2*len(automation.WebhookMethods) + 1; largestTx != 1+2*len(automation.WebhookMethods) || bound > 100 {
		t.Errorf("largest transaction %d items (bound %d); DynamoDB takes 100", largestTx, bound)
	}
}

func errCode(b map[string]any) string {
	e, _ := b["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}
