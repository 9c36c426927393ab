package deploy

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"testing"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/dynamostore"
)

// Recorded DynamoDB cost of one flow builder webhook and its run (one HTTP
// step), as docs/cost.md prices them. TestDynamoCostPerWebhookAndRun fails
// when a change makes either grow; lower them when a change cuts them.
const (
	maxWebhookCalls      = 4
	maxWebhookWriteUnits = 4
	maxRunCalls          = 4
	maxRunWriteUnits     = 15
)

// dynamoMeter is SDK middleware that counts DynamoDB calls by operation
// and estimates the write units each write consumes on DynamoDB: for each
// item written, ceil(size/1 KB) on the table plus the same on every global
// secondary index whose keys the item carries (the tables project ALL), and
// twice that inside a transaction. moto reports fixed capacities, so the
// size of an updated item is read back after the call with a client that is
// not metered.
type dynamoMeter struct {
	raw  *dynamodb.Client
	gsis map[string][]string // table -> hash key attribute of each index
	mu   sync.Mutex
	ops  map[string]int
	wcu  float64
}

func newDynamoMeter(raw *dynamodb.Client, tables dynamostore.Tables) *dynamoMeter {
	m := &dynamoMeter{raw: raw, gsis: map[string][]string{}, ops: map[string]int{}}
	for _, def := range dynamostore.TableDefinitions(tables) {
		for _, g := range def.GlobalSecondaryIndexes {
			m.gsis[*def.TableName] = append(m.gsis[*def.TableName], *g.KeySchema[0].AttributeName)
		}
	}
	return m
}

func (m *dynamoMeter) reset() (ops map[string]int, wcu float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ops, wcu = m.ops, m.wcu
	m.ops, m.wcu = map[string]int{}, 0
	return ops, wcu
}

func (m *dynamoMeter) calls(ops map[string]int) (n int, desc string) {
	var names []string
	for op, c := range ops {
		n += c
		names = append(names, fmt.Sprintf("%s×%d", op, c))
	}
	sort.Strings(names)
	return n, strings.Join(names, ", ")
}

// Add installs the middleware on a client's stack (aws.Config.APIOptions).
func (m *dynamoMeter) Add(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("dynamoMeter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if awsmiddleware.GetServiceID(ctx) != dynamodb.ServiceID {
				return out, md, err
			}
			m.mu.Lock()
			m.ops[awsmiddleware.GetOperationName(ctx)]++
			m.mu.Unlock()
			if err == nil {
				w := m.units(ctx, in.Parameters)
				m.mu.Lock()
				m.wcu += w
				m.mu.Unlock()
			}
			return out, md, err
		}), middleware.After)
}

func (m *dynamoMeter) units(ctx context.Context, params any) float64 {
	switch p := params.(type) {
	case *dynamodb.PutItemInput:
		return m.itemUnits(*p.TableName, p.Item)
	case *dynamodb.UpdateItemInput:
		return m.itemUnits(*p.TableName, m.read(ctx, *p.TableName, p.Key))
	case *dynamodb.DeleteItemInput:
		return 1 + float64(len(m.gsis[*p.TableName]))
	case *dynamodb.BatchWriteItemInput:
		var w float64
		for table, reqs := range p.RequestItems {
			for _, r := range reqs {
				if r.PutRequest != nil {
					w += m.itemUnits(table, r.PutRequest.Item)
				} else {
					w += 1 + float64(len(m.gsis[table]))
				}
			}
		}
		return w
	case *dynamodb.TransactWriteItemsInput:
		var w float64
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				w += 2 * m.itemUnits(*it.Put.TableName, it.Put.Item)
			case it.Update != nil:
				w += 2 * m.itemUnits(*it.Update.TableName, m.read(ctx, *it.Update.TableName, it.Update.Key))
			case it.Delete != nil:
				w += 2 * (1 + float64(len(m.gsis[*it.Delete.TableName])))
			case it.ConditionCheck != nil:
				w += 2
			}
		}
		return w
	}
	return 0
}

func (m *dynamoMeter) read(ctx context.Context, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	out, err := m.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: boolPtr(true)})
	if err != nil || out.Item == nil {
		return key
	}
	return out.Item
}

func boolPtr(b bool) *bool { return &b }

// itemUnits is the write units of writing item to table: the table and
// each index the item appears in.
func (m *dynamoMeter) itemUnits(table string, item map[string]types.AttributeValue) float64 {
	per := math.Max(1, math.Ceil(float64(itemSize(item))/1024))
	copies := 1
	for _, attr := range m.gsis[table] {
		if _, ok := item[attr]; ok {
			copies++
		}
	}
	return per * float64(copies)
}

// itemSize follows DynamoDB's item size rules closely enough for units:
// names plus values, numbers at about one byte per two digits.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch x := v.(type) {
	case *types.AttributeValueMemberS:
		return len(x.Value)
	case *types.AttributeValueMemberN:
		return len(x.Value)/2 + 1
	case *types.AttributeValueMemberB:
		return len(x.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		return 3 + itemSize(x.Value) + len(x.Value)
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range x.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range x.Value {
			n += len(s)
		}
		return n
	}
	return 1
}

// TestDynamoCostPerWebhookAndRun counts, on moto, the DynamoDB calls and
// write units of one accepted flow builder webhook (the webhook function)
// and of its run (the runner function, one HTTP step), and fails if they
// grow above the recorded numbers that docs/cost.md prices.
func TestDynamoCostPerWebhookAndRun(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	meter := newDynamoMeter(dynamodb.NewFromConfig(st.aws), st.cfg.Tables)
	metered := st.aws.Copy()
	metered.APIOptions = append(metered.APIOptions, meter.Add)
	st.cfg.AllowPrivateNetworks = true // the external service is a loopback fake
	hook, err := awsapp.NewWebhookHandler(ctx, metered, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, metered, st.cfg)
	if err != nil {
		t.Fatal(err)
	}
	ext, calls := external(t, 200)
	f := st.flow(t, fmt.Sprintf(`{"name": "Deploys", "engine": "FLOW_BUILDER",
		"steps": [{"name": "notify", "type": "HTTP", "method": "POST", "url": %q, "body": {"ref": "{{ trigger.body.ref }}"}}]}`, ext.URL), true)

	type phase struct {
		name        string
		calls, max  int
		wcu, maxWCU float64
		desc        string
	}
	var phases []phase
	for i := range 2 { // the second webhook and run: warm caches, as in steady state
		meter.reset()
		status, acc := call(t, hook, "POST", "/api/v1/webhooks/"+f.ID, "", `{"event": "push", "ref": "main"}`)
		if status != 200 || acc["status"] != "RUNNING" {
			t.Fatalf("webhook = %d %v", status, acc)
		}
		hookOps, hookWCU := meter.reset()
		delivered := 0
		for j := 0; j < 5 && delivered == 0; j++ {
			if delivered, err = awsdev.PollOnce(ctx, sqs.NewFromConfig(st.aws), st.cfg.QueueURL, 0, runner); err != nil {
				t.Fatal(err)
			}
		}
		if delivered != 1 || calls() != i+1 {
			t.Fatalf("delivered %d messages, %d external calls", delivered, calls())
		}
		runOps, runWCU := meter.reset()
		if i == 0 {
			continue
		}
		n, d := meter.calls(hookOps)
		phases = append(phases, phase{"webhook", n, maxWebhookCalls, hookWCU, maxWebhookWriteUnits, d})
		n, d = meter.calls(runOps)
		phases = append(phases, phase{"run", n, maxRunCalls, runWCU, maxRunWriteUnits, d})
	}
	for _, p := range phases {
		t.Logf("%s: %d DynamoDB calls (%s), about %.0f write units", p.name, p.calls, p.desc, p.wcu)
		if p.calls > p.max {
			t.Errorf("%s: %d DynamoDB calls, more than the recorded %d (docs/cost.md)", p.name, p.calls, p.max)
		}
		if p.wcu > p.maxWCU {
			t.Errorf("%s: about %.0f write units, more than the recorded %.0f (docs/cost.md)", p.name, p.wcu, p.maxWCU)
		}
	}
}
