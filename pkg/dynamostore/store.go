// Package dynamostore implements automation.Store and automation.RunStore on
// Amazon DynamoDB, for the service's AWS deployment. Each kind of record has
// its own table, so that every Lambda function gets least-privilege IAM per
// table; docs/dynamodb.md describes the tables, their keys and indexes, and
// the access patterns they serve.
package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// API is the part of the DynamoDB client the Store uses. *dynamodb.Client
// implements it; tests substitute a stub to inject failures.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var _ API = (*dynamodb.Client)(nil)

// Tables names the tables of one deployment (one stage).
type Tables struct {
	Projects    string // projects and their name reservations
	Keys        string // API keys by hash, and ID pointers
	Flows       string // flows by ID; indexes by project (and status) in creation order
	Routes      string // workflow builder routes by (path, method)
	Connections string // connection metadata by ID; index by project
	Runs        string // runs by ID; indexes by project+flow (and status); TTL on expiresAt
	Samples     string // Test Trigger state and latest sample by flow ID
	OAuthApps   string // the operator's OAuth2 apps by name (oauthapps.go)
	// Alerts holds event subscriptions and deliveries (alerts.go); "" for
	// none: then the subscription routes answer SUBSCRIPTIONS_UNAVAILABLE
	// and a finish costs no request more. TableNames and the template name
	// it; a project without subscriptions costs a cached query per 30 s.
	Alerts string
	Audit  string // audit log by project and time; TTL on expiresAt (audit.go)
}

// TableNames returns the tables of a stage, named prefix-projects,
// prefix-keys, and so on.
func TableNames(prefix string) Tables {
	return Tables{
		Projects:    prefix + "-projects",
		Keys:        prefix + "-keys",
		Flows:       prefix + "-flows",
		Routes:      prefix + "-routes",
		Connections: prefix + "-connections",
		Runs:        prefix + "-runs",
		Samples:     prefix + "-samples",
		OAuthApps:   prefix + "-oauth-apps",
		Audit:       prefix + "-audit",
		Alerts:      prefix + "-alerts",
	}
}

// Store is an automation.Store and automation.RunStore on DynamoDB. It is
// safe for concurrent use.
type Store struct {
	db        API
	t         Tables
	retention time.Duration
	payloads  Payloads // nil: run items hold everything
	threshold int
	log       *slog.Logger
	// flowDeleteRuns bounds the runs DeleteFlow removes itself.
	flowDeleteRuns int
	// alerts caches subscriptions for the run path (alerts.go).
	alerts alertCache
}

var _ automation.Store = (*Store)(nil)

// New returns a Store on the given tables, which must exist (CreateTables).
func New(client API, tables Tables, opts ...Option) *Store {
	s := &Store{db: client, t: tables, retention: DefaultRunRetention, threshold: DefaultPayloadThreshold, log: slog.Default(),
		flowDeleteRuns: DefaultFlowDeleteRuns}
	for _, o := range opts {
		o(s)
	}
	return s
}

// DefaultFlowDeleteRuns is how many runs DeleteFlow removes itself; TTL
// removes the rest. 500 runs are 20 batch writes and their payloads, well
// within API Gateway's 29 s.
const DefaultFlowDeleteRuns = 500

// Attribute and index names shared by several tables.
const (
	attrCreatedSort = "createdSort" // creation time (fixed width) + "#" + ID: orders lists
	indexByProject  = "byProject"   // (project, createdSort)
	indexByStatus   = "byStatus"    // (projectStatus, createdSort) on flows
)

// sortTimeLayout writes times at a fixed width, so that their strings sort
// as the times do.
const sortTimeLayout = "2006-01-02T15:04:05.000000000Z"

// createdSort is the sort key that lists items in creation order. The ID
// breaks ties between items created in the same instant, so every item has
// a distinct, stable position.
func createdSort(created time.Time, id string) string {
	return created.UTC().Format(sortTimeLayout) + "#" + id
}

// positionID returns the ID inside a position made by createdSort. Positions
// reach the store only through the Service's sealed cursors, so a malformed
// one is a bug, not a client error.
func positionID(pos string) (string, error) {
	t, id, ok := strings.Cut(pos, "#")
	if !ok || id == "" || len(t) != len(sortTimeLayout) {
		return "", fmt.Errorf("malformed list position %q", pos)
	}
	if _, err := time.Parse(sortTimeLayout, t); err != nil {
		return "", fmt.Errorf("malformed list position %q", pos)
	}
	return id, nil
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// timeValue is how times are stored: RFC 3339 with nanoseconds, UTC, which
// round-trips exactly.
func timeValue(t time.Time) types.AttributeValue { return str(t.UTC().Format(time.RFC3339Nano)) }

// reader decodes the attributes of one item, keeping the first error, so
// that decoders read as a list of fields.
type reader struct {
	item map[string]types.AttributeValue
	err  error
}

func (r *reader) fail(name, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("attribute %s: want %s, got %T", name, want, r.item[name])
	}
}

// str returns a string attribute; a missing one is "".
func (r *reader) str(name string) string {
	switch v := r.item[name].(type) {
	case nil:
		return ""
	case *types.AttributeValueMemberS:
		return v.Value
	default:
		r.fail(name, "a string")
		return ""
	}
}

// int returns a number attribute; a missing one is 0.
func (r *reader) int(name string) int64 {
	switch v := r.item[name].(type) {
	case nil:
		return 0
	case *types.AttributeValueMemberN:
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil && r.err == nil {
			r.err = fmt.Errorf("attribute %s: %w", name, err)
		}
		return n
	default:
		r.fail(name, "a number")
		return 0
	}
}

// time returns a time attribute; a missing one is the zero time.
func (r *reader) time(name string) time.Time {
	s := r.str(name)
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("attribute %s: %w", name, err)
	}
	return t
}

// timePtr returns a time attribute, or nil if it is missing or NULL.
func (r *reader) timePtr(name string) *time.Time {
	switch r.item[name].(type) {
	case nil, *types.AttributeValueMemberNULL:
		return nil
	}
	t := r.time(name)
	return &t
}

// Reasons a write's condition fails, as DynamoDB names them in transaction
// cancellation reasons.
const (
	reasonNone        = "None"
	reasonCondition   = "ConditionalCheckFailed"
	reasonTxnConflict = "TransactionConflict"
)

// cancelReasons returns the cancellation reasons of a failed transaction,
// one per item in request order, or nil if err is not a cancellation.
func cancelReasons(err error) []types.CancellationReason {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil
	}
	if len(tce.CancellationReasons) > 0 {
		return tce.CancellationReasons
	}
	// Some emulators only put the reasons in the message:
	// "Transaction cancelled, please refer cancellation reasons for specific
	// reasons [None, ConditionalCheckFailed]".
	msg := tce.ErrorMessage()
	open, end := strings.LastIndex(msg, "["), strings.LastIndex(msg, "]")
	if open < 0 || end < open {
		return nil
	}
	var rs []types.CancellationReason
	for _, code := range strings.Split(msg[open+1:end], ",") {
		code := strings.TrimSpace(code)
		rs = append(rs, types.CancellationReason{Code: &code})
	}
	return rs
}

// reasonCode is the code of reason i, or "" if there is none.
func reasonCode(rs []types.CancellationReason, i int) string {
	if i >= len(rs) || rs[i].Code == nil {
		return ""
	}
	return *rs[i].Code
}

// conditionFailed reports whether err is a failed condition of a single-item
// write, and returns the item as it was if the request asked for it.
func conditionFailed(err error) (map[string]types.AttributeValue, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true
	}
	return nil, false
}

// queryAll runs a query to its end, for the short lists that are not paged.
func (s *Store) queryAll(ctx context.Context, in *dynamodb.QueryInput) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	for p := dynamodb.NewQueryPaginator(s.db, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		items = append(items, out.Items...)
	}
	return items, nil
}

// scanAll reads a whole table (filtered), for the admin lists of all
// projects and all keys.
func (s *Store) scanAll(ctx context.Context, in *dynamodb.ScanInput) ([]map[string]types.AttributeValue, error) {
	var items []map[string]types.AttributeValue
	for p := dynamodb.NewScanPaginator(s.db, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		items = append(items, out.Items...)
	}
	return items, nil
}

// queryPage reads up to limit items of an index in key order, and reports
// whether more follow. It reads limit+1 items, looping because a query stops
// at 1 MB whatever its Limit.
func (s *Store) queryPage(ctx context.Context, in *dynamodb.QueryInput, limit int) ([]map[string]types.AttributeValue, bool, error) {
	var items []map[string]types.AttributeValue
	for len(items) <= limit {
		n := int32(limit + 1 - len(items))
		in.Limit = &n
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, false, err
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if len(items) > limit {
		return items[:limit], true, nil
	}
	return items, false, nil
}

// batchGetSize is BatchGetItem's most keys per call.
const batchGetSize = 100

// batchGet reads the items of a table keyed by id whose index entries a
// query returned (the indexes project little: tables.go), eventually
// consistent like the index itself, at most batchGetSize per call, and
// returns them in the entries' order. An item deleted since the query read
// its entry is left out. Keys DynamoDB leaves unprocessed (throttling, or
// 16 MB of items in one answer) are asked for again after a growing pause.
func (s *Store) batchGet(ctx context.Context, table string, entries []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	found := make(map[string]map[string]types.AttributeValue, len(entries))
	for chunk := range slices.Chunk(entries, batchGetSize) {
		keys := make([]map[string]types.AttributeValue, 0, len(chunk))
		for _, e := range chunk {
			keys = append(keys, map[string]types.AttributeValue{attrID: e[attrID]})
		}
		pending := map[string]types.KeysAndAttributes{table: {Keys: keys}}
		for attempt := 0; len(pending[table].Keys) > 0; attempt++ {
			if attempt == 8 {
				return nil, errors.New("batch get: keys still unprocessed after 8 attempts")
			}
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Duration(25<<attempt) * time.Millisecond):
				}
			}
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: pending})
			if err != nil {
				return nil, fmt.Errorf("batch get: %w", err)
			}
			for _, it := range out.Responses[table] {
				rd := reader{item: it}
				found[rd.str(attrID)] = it
			}
			pending = out.UnprocessedKeys
		}
	}
	items := make([]map[string]types.AttributeValue, 0, len(entries))
	for _, e := range entries {
		rd := reader{item: e}
		if it, ok := found[rd.str(attrID)]; ok {
			items = append(items, it)
		}
	}
	return items, nil
}
