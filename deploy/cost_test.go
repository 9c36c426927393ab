package deploy

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/middleware"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/dynamostore"
)

// Recorded DynamoDB cost of one flow builder webhook and its run (one HTTP
// step), as docs/cost.md prices them. TestDynamoCostPerWebhookAndRun fails
// when a change makes either grow; lower them when a change cuts them.
const (
	maxWebhookCalls      = 4
	maxWebhookWriteUnits = 5 // the run: table + 4 keys-only index entries
	maxWebhookReadUnits  = 3 // the flow twice, the armed flag
	maxRunCalls          = 5
	maxRunWriteUnits     = 10 // claim 1, finish 7 (run 2, byStatus and byProjectStatus moved 2 each, byProject status 1), stats 1, insights 1
	maxRunReadUnits      = 1  // the flow
)

// dynamoMeter is SDK middleware that counts DynamoDB calls by operation
// and estimates the capacity units each consumes on DynamoDB, by its
// published rules, from the items as they were before and after the call
// (moto reports fixed capacities, so they are read back with a client that
// is not metered):
//
//   - a write pays 1 unit per KB (rounded up) of the larger of the item's
//     old and new versions on the table, and the same for each global
//     secondary index copy it writes: an index whose keys the item gains
//     or loses writes a copy (or deletes one: 1 unit per KB of the old
//     copy); an index whose keys change deletes and writes; an index whose
//     keys and projected attributes are unchanged writes nothing. A copy's
//     size is its projection: the table and index keys, plus the INCLUDE
//     attributes, or everything for ALL. Inside a transaction, twice.
//   - a read pays 1 unit per 4 KB of each item read, whatever a
//     ProjectionExpression returns, half for an eventually consistent
//     read; a query pays for the sum of the index entries it returns.
type dynamoMeter struct {
	raw    *dynamodb.Client
	tables map[string]meteredTable
	mu     sync.Mutex
	ops    map[string]int
	wcu    float64
	rcu    float64
	detail []string // each call: operation, table, units
	// limitsApart, when set, leaves the reads of a project's item out of
	// the counts and counts them in limitsReads instead. A function reads
	// a project's limits at most once per 10 s (automation's limitsTTL),
	// not once per run: whether a measured run pays that read depends only
	// on when the previous one was, which a loaded machine moves. The
	// per-run figures leave it out; docs/cost.md prices it apart.
	limitsApart bool
	limitsReads int
}

type meteredTable struct {
	keys    []string // the table's key attributes
	indexes []meteredIndex
}

type meteredIndex struct {
	keys    []string
	all     bool     // ProjectionType ALL
	include []string // INCLUDE's attributes
}

func newDynamoMeter(raw *dynamodb.Client, tables dynamostore.Tables) *dynamoMeter {
	m := &dynamoMeter{raw: raw, tables: map[string]meteredTable{}, ops: map[string]int{}}
	keyNames := func(ks []types.KeySchemaElement) []string {
		var out []string
		for _, k := range ks {
			out = append(out, *k.AttributeName)
		}
		return out
	}
	for _, def := range dynamostore.TableDefinitions(tables) {
		mt := meteredTable{keys: keyNames(def.KeySchema)}
		for _, g := range def.GlobalSecondaryIndexes {
			mt.indexes = append(mt.indexes, meteredIndex{
				keys: keyNames(g.KeySchema), all: g.Projection.ProjectionType == types.ProjectionTypeAll,
				include: g.Projection.NonKeyAttributes,
			})
		}
		m.tables[*def.TableName] = mt
	}
	return m
}

func (m *dynamoMeter) reset() (ops map[string]int, wcu, rcu float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ops, wcu, rcu = m.ops, m.wcu, m.rcu
	m.ops, m.wcu, m.rcu, m.detail = map[string]int{}, 0, 0, nil
	return ops, wcu, rcu
}

// details returns what each call since the last reset cost.
func (m *dynamoMeter) details() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.detail, "; ")
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

// write is one item a call writes: its table and key, the item before the
// call, and a factor (2 in a transaction).
type write struct {
	table  string
	key    map[string]types.AttributeValue
	before map[string]types.AttributeValue
	factor float64
}

// Add installs the middleware on a client's stack (aws.Config.APIOptions).
func (m *dynamoMeter) Add(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("dynamoMeter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if awsmiddleware.GetServiceID(ctx) != dynamodb.ServiceID {
				return next.HandleInitialize(ctx, in)
			}
			if m.limitsApart && awsmiddleware.GetOperationName(ctx) == "GetItem" && tableOf(in.Parameters) == "projects" {
				m.mu.Lock()
				m.limitsReads++
				m.mu.Unlock()
				return next.HandleInitialize(ctx, in)
			}
			writes := m.writes(ctx, in.Parameters)
			out, md, err := next.HandleInitialize(ctx, in)
			m.mu.Lock()
			m.ops[awsmiddleware.GetOperationName(ctx)]++
			m.mu.Unlock()
			if err != nil {
				return out, md, err
			}
			var w float64
			for _, wr := range writes {
				w += wr.factor * m.writeUnits(wr.table, wr.before, m.read(ctx, wr.table, wr.key))
			}
			r := m.readUnits(ctx, in.Parameters, out.Result)
			m.mu.Lock()
			m.wcu += w
			m.rcu += r
			m.detail = append(m.detail, fmt.Sprintf("%s %s %.0f WCU %.1f RCU", awsmiddleware.GetOperationName(ctx), tableOf(in.Parameters), w, r))
			m.mu.Unlock()
			return out, md, err
		}), middleware.After)
}

// writes lists the items a call writes, each with its version before the
// call.
func (m *dynamoMeter) writes(ctx context.Context, params any) []write {
	var ws []write
	add := func(table string, key map[string]types.AttributeValue, factor float64) {
		ws = append(ws, write{table, key, m.read(ctx, table, key), factor})
	}
	keyOf := func(table string, item map[string]types.AttributeValue) map[string]types.AttributeValue {
		k := map[string]types.AttributeValue{}
		for _, a := range m.tables[table].keys {
			k[a] = item[a]
		}
		return k
	}
	switch p := params.(type) {
	case *dynamodb.PutItemInput:
		add(*p.TableName, keyOf(*p.TableName, p.Item), 1)
	case *dynamodb.UpdateItemInput:
		add(*p.TableName, p.Key, 1)
	case *dynamodb.DeleteItemInput:
		add(*p.TableName, p.Key, 1)
	case *dynamodb.BatchWriteItemInput:
		for table, reqs := range p.RequestItems {
			for _, r := range reqs {
				if r.PutRequest != nil {
					add(table, keyOf(table, r.PutRequest.Item), 1)
				} else {
					add(table, r.DeleteRequest.Key, 1)
				}
			}
		}
	case *dynamodb.TransactWriteItemsInput:
		for _, it := range p.TransactItems {
			switch {
			case it.Put != nil:
				add(*it.Put.TableName, keyOf(*it.Put.TableName, it.Put.Item), 2)
			case it.Update != nil:
				add(*it.Update.TableName, it.Update.Key, 2)
			case it.Delete != nil:
				add(*it.Delete.TableName, it.Delete.Key, 2)
			case it.ConditionCheck != nil:
				// A condition check is charged as a write of the item
				// it reads, without index copies.
				ws = append(ws, write{table: "", before: m.read(ctx, *it.ConditionCheck.TableName, it.ConditionCheck.Key), factor: 2})
			}
		}
	}
	return ws
}

// read returns an item as it is now, or nil; it reads nothing for an
// unknown table (a condition check's marker above).
func (m *dynamoMeter) read(ctx context.Context, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	if table == "" || key == nil {
		return nil
	}
	out, err := m.raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key, ConsistentRead: boolPtr(true)})
	if err != nil {
		return nil
	}
	return out.Item
}

func boolPtr(b bool) *bool { return &b }

// tableOf names the table a call is on, by its suffix (flows, runs, ...).
func tableOf(params any) string {
	var t *string
	switch p := params.(type) {
	case *dynamodb.GetItemInput:
		t = p.TableName
	case *dynamodb.PutItemInput:
		t = p.TableName
	case *dynamodb.UpdateItemInput:
		t = p.TableName
	case *dynamodb.DeleteItemInput:
		t = p.TableName
	case *dynamodb.QueryInput:
		t = p.TableName
	}
	if t == nil {
		return ""
	}
	return (*t)[strings.LastIndex(*t, "-")+1:]
}

func kb(size int) float64 { return math.Max(1, math.Ceil(float64(size)/1024)) }

// writeUnits is what writing an item from before to after (nil: absent)
// costs on its table and indexes.
func (m *dynamoMeter) writeUnits(table string, before, after map[string]types.AttributeValue) float64 {
	if table == "" { // a condition check
		return kb(dynamostore.ItemSize(before))
	}
	w := kb(max(dynamostore.ItemSize(before), dynamostore.ItemSize(after)))
	mt := m.tables[table]
	for _, ix := range mt.indexes {
		inBefore, inAfter := hasAll(before, ix.keys), hasAll(after, ix.keys)
		pb, pa := m.project(mt, ix, before), m.project(mt, ix, after)
		switch {
		case inBefore && inAfter && !sameValues(before, after, ix.keys):
			w += kb(dynamostore.ItemSize(pb)) + kb(dynamostore.ItemSize(pa))
		case inBefore && inAfter:
			if !reflect.DeepEqual(pb, pa) {
				w += kb(max(dynamostore.ItemSize(pb), dynamostore.ItemSize(pa)))
			}
		case inBefore:
			w += kb(dynamostore.ItemSize(pb))
		case inAfter:
			w += kb(dynamostore.ItemSize(pa))
		}
	}
	return w
}

// project is an item's copy in an index.
func (m *dynamoMeter) project(mt meteredTable, ix meteredIndex, item map[string]types.AttributeValue) map[string]types.AttributeValue {
	if item == nil || ix.all {
		return item
	}
	out := map[string]types.AttributeValue{}
	for _, a := range slices.Concat(mt.keys, ix.keys, ix.include) {
		if v, ok := item[a]; ok {
			out[a] = v
		}
	}
	return out
}

func hasAll(item map[string]types.AttributeValue, attrs []string) bool {
	if item == nil {
		return false
	}
	for _, a := range attrs {
		if _, ok := item[a]; !ok {
			return false
		}
	}
	return true
}

func sameValues(a, b map[string]types.AttributeValue, attrs []string) bool {
	for _, k := range attrs {
		if !reflect.DeepEqual(a[k], b[k]) {
			return false
		}
	}
	return true
}

// readUnits is what a read call costs: by the whole item for GetItem and
// BatchGetItem (read back, since a ProjectionExpression does not lower the
// charge), by the entries returned for Query and Scan.
func (m *dynamoMeter) readUnits(ctx context.Context, params, result any) float64 {
	units := func(size int, consistent *bool) float64 {
		u := math.Max(1, math.Ceil(float64(size)/4096))
		if consistent == nil || !*consistent {
			u /= 2
		}
		return u
	}
	switch p := params.(type) {
	case *dynamodb.GetItemInput:
		return units(dynamostore.ItemSize(m.read(ctx, *p.TableName, p.Key)), p.ConsistentRead)
	case *dynamodb.BatchGetItemInput:
		var r float64
		if out, ok := result.(*dynamodb.BatchGetItemOutput); ok {
			for table, items := range out.Responses {
				for _, it := range items {
					r += units(dynamostore.ItemSize(it), p.RequestItems[table].ConsistentRead)
				}
			}
		}
		return r
	case *dynamodb.QueryInput:
		n := 0
		if out, ok := result.(*dynamodb.QueryOutput); ok {
			for _, it := range out.Items {
				n += dynamostore.ItemSize(it)
			}
		}
		return units(n, p.ConsistentRead)
	case *dynamodb.ScanInput:
		n := 0
		if out, ok := result.(*dynamodb.ScanOutput); ok {
			for _, it := range out.Items {
				n += dynamostore.ItemSize(it)
			}
		}
		return units(n, p.ConsistentRead)
	}
	return 0
}

// TestDynamoCostPerWebhookAndRun counts, on moto, the DynamoDB calls and
// write units of one accepted flow builder webhook (the webhook function)
// and of its run (the runner function, one HTTP step), and fails if they
// grow above the recorded numbers that docs/cost.md prices.
func TestDynamoCostPerWebhookAndRun(t *testing.T) {
	st := newStack(t)
	ctx := context.Background()
	meter := newDynamoMeter(dynamodb.NewFromConfig(st.aws), st.cfg.Tables)
	meter.limitsApart = true
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

	// A Test Trigger captured a large delivery once: the flow's sample is
	// about 250 KB. The deliveries measured below read the armed flag
	// alone, not the sample (their read units would be about 60, not 3).
	if _, err := st.svc.ArmWebhookTest(ctx, st.project, f.ID); err != nil {
		t.Fatal(err)
	}
	big := fmt.Sprintf(`{"event": "push", "ref": "main", "blob": %q}`, strings.Repeat("x", 120<<10))
	if status, acc := call(t, hook, "POST", "/api/v1/webhooks/"+f.ID, "", big); status != 200 {
		t.Fatalf("captured webhook = %d %v", status, acc)
	}
	if c, err := st.store.Capture(ctx, st.project.ID, f.ID); err != nil || c.Sample == nil {
		t.Fatalf("capture = %+v, %v; want the large delivery as the sample", c, err)
	}
	for j := 0; j < 5 && calls() == 0; j++ {
		if _, err := awsdev.PollOnce(ctx, sqs.NewFromConfig(st.aws), st.cfg.QueueURL, 0, runner); err != nil {
			t.Fatal(err)
		}
	}
	if calls() != 1 {
		t.Fatalf("the captured delivery's run made %d external calls", calls())
	}

	type phase struct {
		name        string
		calls, max  int
		wcu, maxWCU float64
		rcu, maxRCU float64
		desc        string
	}
	var phases []phase
	for i := range 2 { // the second webhook and run: warm caches, as in steady state
		meter.reset()
		began := time.Now()
		status, acc := call(t, hook, "POST", "/api/v1/webhooks/"+f.ID, "", `{"event": "push", "ref": "main"}`)
		hookTook := time.Since(began)
		if status != 200 || acc["status"] != "RUNNING" {
			t.Fatalf("webhook = %d %v", status, acc)
		}
		hookDetail := meter.details()
		hookOps, hookWCU, hookRCU := meter.reset()
		began = time.Now()
		delivered := 0
		for j := 0; j < 5 && delivered == 0; j++ {
			if delivered, err = awsdev.PollOnce(ctx, sqs.NewFromConfig(st.aws), st.cfg.QueueURL, 0, runner); err != nil {
				t.Fatal(err)
			}
		}
		if delivered != 1 || calls() != i+2 {
			t.Fatalf("delivered %d messages, %d external calls", delivered, calls())
		}
		runTook := time.Since(began) // with the queue receive, not only the handler
		runDetail := meter.details()
		runOps, runWCU, runRCU := meter.reset()
		if i == 0 {
			continue
		}
		// For docs/cost.md's Lambda durations; on moto over loopback, so
		// a figure to price with, not a test.
		t.Logf("warm webhook handler %s: %s", hookTook.Round(time.Millisecond), hookDetail)
		t.Logf("warm poll and runner %s: %s", runTook.Round(time.Millisecond), runDetail)
		n, d := meter.calls(hookOps)
		phases = append(phases, phase{"webhook", n, maxWebhookCalls, hookWCU, maxWebhookWriteUnits, hookRCU, maxWebhookReadUnits, d})
		n, d = meter.calls(runOps)
		phases = append(phases, phase{"run", n, maxRunCalls, runWCU, maxRunWriteUnits, runRCU, maxRunReadUnits, d})
	}
	// What a page of the run history and of the flow list costs, now that
	// the indexes hold keys and the page is read with BatchGetItem.
	listing := dynamostore.New(dynamodb.NewFromConfig(metered), st.cfg.Tables)
	meter.reset()
	runsPage, err := listing.ListRuns(ctx, st.project.ID, f.ID, automation.ListQuery{Limit: 100})
	if err != nil || len(runsPage.Items) != 3 {
		t.Fatalf("run history = %d runs, %v; want the 3 runs", len(runsPage.Items), err)
	}
	ops, _, rcu := meter.reset()
	n, d := meter.calls(ops)
	t.Logf("a page of %d run summaries: %d calls (%s), %.1f read units", len(runsPage.Items), n, d, rcu)
	flowsPage, err := listing.ListFlows(ctx, st.project.ID, automation.ListQuery{Limit: 100})
	if err != nil || len(flowsPage.Items) != 1 {
		t.Fatalf("flow list = %d flows, %v; want 1", len(flowsPage.Items), err)
	}
	ops, _, rcu = meter.reset()
	n, d = meter.calls(ops)
	t.Logf("a page of %d flows: %d calls (%s), %.1f read units", len(flowsPage.Items), n, d, rcu)

	for _, p := range phases {
		t.Logf("%s: %d DynamoDB calls (%s), about %.0f write units and %.1f read units", p.name, p.calls, p.desc, p.wcu, p.rcu)
		if p.calls > p.max {
			t.Errorf("%s: %d DynamoDB calls, more than the recorded %d (docs/cost.md)", p.name, p.calls, p.max)
		}
		if p.wcu > p.maxWCU {
			t.Errorf("%s: about %.0f write units, more than the recorded %.0f (docs/cost.md)", p.name, p.wcu, p.maxWCU)
		}
		if p.rcu > p.maxRCU {
			t.Errorf("%s: about %.1f read units, more than the recorded %.1f (docs/cost.md)", p.name, p.rcu, p.maxRCU)
		}
	}
}
