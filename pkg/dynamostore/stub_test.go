package dynamostore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// stub is an API whose methods are function fields, to inject failures; an
// unset one fails the call.
type stub struct {
	getItem  func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
	query    func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error)
	transact func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error)
	update   func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	delete   func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error)
	put      func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
}

var errUnexpected = errors.New("unexpected call")

func (s *stub) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	// A project's flow count (flowcount.go) is read before every create:
	// none counted yet unless a case says otherwise.
	if k, ok := in.Key["flowId"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(k.Value, "flowcount#") {
		return &dynamodb.GetItemOutput{Item: map[string]types.AttributeValue{"flowCount": &types.AttributeValueMemberN{Value: "0"}}}, nil
	}
	if s.getItem == nil {
		return nil, errUnexpected
	}
	return s.getItem(in)
}

func (s *stub) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if s.put == nil {
		return nil, errUnexpected
	}
	return s.put(in)
}

func (s *stub) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if s.update == nil {
		return nil, errUnexpected
	}
	return s.update(in)
}

func (s *stub) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if s.delete == nil {
		return nil, errUnexpected
	}
	return s.delete(in)
}

func (s *stub) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	// The shape registry (shapes.go) is read before every route write:
	// empty unless a case says otherwise.
	if p, ok := in.ExpressionAttributeValues[":p"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(p.Value, "#shapes/") {
		return &dynamodb.QueryOutput{}, nil
	}
	if s.query == nil {
		return nil, errUnexpected
	}
	return s.query(in)
}

func (s *stub) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return nil, errUnexpected
}

func (s *stub) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if s.transact == nil {
		return nil, errUnexpected
	}
	return s.transact(in)
}

func (s *stub) BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return nil, errUnexpected
}

func (s *stub) BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	return nil, errUnexpected
}

func canceled(codes ...string) error {
	rs := make([]types.CancellationReason, len(codes))
	for i, c := range codes {
		rs[i] = types.CancellationReason{Code: aws.String(c)}
	}
	return &types.TransactionCanceledException{Message: aws.String("Transaction cancelled"), CancellationReasons: rs}
}

// stubTables are a stage's tables without the alerts table: the stubs
// answer the calls of the paths they test, and no subscription lookup.
var stubTables = func() Tables {
	t := TableNames("stub")
	t.Alerts = ""
	return t
}()

// storedFlow is the item of a flow builder flow of prj_a at version 1.
func storedFlow(t *testing.T) map[string]types.AttributeValue {
	f := automation.Flow{
		ID: "flw_1", Project: "prj_a", Name: "n", Status: automation.FlowInactive, Engine: automation.WorkflowBuilder,
		TriggerType: automation.TriggerWebhook, Version: 1,
		Trigger: automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{HTTPMethod: "POST", Path: "p"}},
	}
	item, err := flowAttrs(f)
	if err != nil {
		t.Fatal(err)
	}
	item[attrID], item[attrProject] = str(f.ID), str(f.Project)
	return item
}

func TestErrorMapping(t *testing.T) {
	boom := errors.New("boom")
	flow := func(version int64, method, path string) automation.Flow {
		return automation.Flow{ID: "flw_1", Project: "prj_a", Engine: automation.WorkflowBuilder, Version: version,
			Trigger: automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{HTTPMethod: method, Path: path}}}
	}
	tests := []struct {
		name     string
		stub     func(t *testing.T) *stub
		call     func(s *Store) error
		wantKind error  // nil: not an *automation.Error
		wantCode string // or the wrapped message prefix when wantKind is nil
		wantIn   string // in the message
	}{
		{
			name: "get flow fails: wrapped with context",
			stub: func(*testing.T) *stub {
				return &stub{getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return nil, boom }}
			},
			call:     func(s *Store) error { _, err := s.Flow(context.Background(), "prj_a", "flw_1"); return err },
			wantCode: "dynamostore: get flow flw_1: boom",
		},
		{
			name: "missing flow",
			stub: func(*testing.T) *stub {
				return &stub{getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return &dynamodb.GetItemOutput{}, nil }}
			},
			call:     func(s *Store) error { _, err := s.FlowByID(context.Background(), "flw_1"); return err },
			wantKind: automation.ErrNotFound, wantCode: "FLOW_NOT_FOUND",
		},
		{
			name: "another project's flow is not found",
			stub: func(t *testing.T) *stub {
				return &stub{getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
					return &dynamodb.GetItemOutput{Item: storedFlow(t)}, nil
				}}
			},
			call:     func(s *Store) error { _, err := s.Flow(context.Background(), "prj_b", "flw_1"); return err },
			wantKind: automation.ErrNotFound, wantCode: "FLOW_NOT_FOUND",
		},
		{
			name: "create flow: second route taken",
			stub: func(*testing.T) *stub {
				return &stub{transact: func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
					return nil, canceled(reasonNone, reasonNone, reasonCondition, reasonNone, reasonNone)
				}}
			},
			call:     func(s *Store) error { return s.CreateFlow(context.Background(), flow(1, "ANY", "hooks/x")) },
			wantKind: automation.ErrConflict, wantCode: "ROUTE_CONFLICT", wantIn: `POST requests on webhook path "hooks/x"`,
		},
		{
			name: "create flow: reasons only in the message",
			stub: func(*testing.T) *stub {
				return &stub{transact: func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
					return nil, &types.TransactionCanceledException{Message: aws.String(
						"Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed]")}
				}}
			},
			call:     func(s *Store) error { return s.CreateFlow(context.Background(), flow(1, "DELETE", "x")) },
			wantKind: automation.ErrConflict, wantCode: "ROUTE_CONFLICT", wantIn: "DELETE",
		},
		{
			name: "create flow: ID taken",
			stub: func(*testing.T) *stub {
				return &stub{transact: func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
					return nil, canceled(reasonCondition, reasonNone)
				}}
			},
			call:     func(s *Store) error { return s.CreateFlow(context.Background(), flow(1, "GET", "x")) },
			wantKind: automation.ErrConflict, wantCode: "FLOW_EXISTS",
		},
		{
			name: "create flow: throttled is an internal error",
			stub: func(*testing.T) *stub {
				return &stub{transact: func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
					return nil, canceled(reasonNone, "ThrottlingError")
				}}
			},
			call:     func(s *Store) error { return s.CreateFlow(context.Background(), flow(1, "GET", "x")) },
			wantCode: "dynamostore: create flow flw_1: ",
		},
		{
			name: "put flow: changed between read and write",
			stub: func(t *testing.T) *stub {
				return &stub{
					getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
						return &dynamodb.GetItemOutput{Item: storedFlow(t)}, nil
					},
					transact: func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
						err := canceled(reasonCondition, reasonNone)
						err.(*types.TransactionCanceledException).CancellationReasons[0].Item = storedFlow(t)
						return nil, err
					},
				}
			},
			call:     func(s *Store) error { return s.PutFlow(context.Background(), flow(2, "GET", "q")) },
			wantKind: automation.ErrConflict, wantCode: "FLOW_MODIFIED",
		},
		{
			name: "put flow: deleted between read and write",
			stub: func(t *testing.T) *stub {
				reads := 0
				return &stub{
					getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
						reads++
						if reads > 1 {
							return &dynamodb.GetItemOutput{}, nil
						}
						return &dynamodb.GetItemOutput{Item: storedFlow(t)}, nil
					},
					transact: func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
						return nil, canceled(reasonCondition, reasonNone, reasonNone)
					},
				}
			},
			call:     func(s *Store) error { return s.PutFlow(context.Background(), flow(2, "GET", "q")) },
			wantKind: automation.ErrNotFound, wantCode: "FLOW_NOT_FOUND",
		},
		{
			name: "put flow: concurrent transaction",
			stub: func(t *testing.T) *stub {
				return &stub{
					getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
						return &dynamodb.GetItemOutput{Item: storedFlow(t)}, nil
					},
					transact: func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
						return nil, canceled(reasonTxnConflict, reasonNone)
					},
				}
			},
			call:     func(s *Store) error { return s.PutFlow(context.Background(), flow(2, "GET", "q")) },
			wantKind: automation.ErrConflict, wantCode: "FLOW_MODIFIED",
		},
		{
			name: "put flow: new route taken (after the removed one in the request)",
			stub: func(t *testing.T) *stub {
				return &stub{
					getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
						return &dynamodb.GetItemOutput{Item: storedFlow(t)}, nil
					},
					transact: func(in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
						// flow, PUT q (added), the delete of POST p, then the
						// claim of path q and its shape, the shapes' version,
						// and the release of path p and its shape.
						if len(in.TransactItems) != 8 || in.TransactItems[1].Put == nil || in.TransactItems[2].Delete == nil ||
							in.TransactItems[3].Update == nil || in.TransactItems[4].Update == nil {
							t.Errorf("transaction = %+v, want update, put, delete, then updates", in.TransactItems)
						}
						return nil, canceled(reasonNone, reasonCondition, reasonNone, reasonNone, reasonNone, reasonNone, reasonNone, reasonNone)
					},
				}
			},
			call:     func(s *Store) error { return s.PutFlow(context.Background(), flow(2, "PUT", "q")) },
			wantKind: automation.ErrConflict, wantCode: "ROUTE_CONFLICT", wantIn: `PUT requests on webhook path "q"`,
		},
		{
			name: "put flow: new path held by another project",
			stub: func(t *testing.T) *stub {
				return &stub{
					getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
						return &dynamodb.GetItemOutput{Item: storedFlow(t)}, nil
					},
					transact: func(in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
						return nil, canceled(reasonNone, reasonNone, reasonNone, reasonCondition, reasonNone)
					},
				}
			},
			call:     func(s *Store) error { return s.PutFlow(context.Background(), flow(2, "PUT", "q")) },
			wantKind: automation.ErrConflict, wantCode: "ROUTE_CONFLICT", wantIn: "another project",
		},
		{
			name: "put flow: stale version seen on read",
			stub: func(t *testing.T) *stub {
				return &stub{getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
					return &dynamodb.GetItemOutput{Item: storedFlow(t)}, nil
				}}
			},
			call:     func(s *Store) error { return s.PutFlow(context.Background(), flow(5, "GET", "q")) },
			wantKind: automation.ErrConflict, wantCode: "FLOW_MODIFIED",
		},
		{
			name: "project name taken",
			stub: func(*testing.T) *stub {
				return &stub{transact: func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
					return nil, canceled(reasonNone, reasonCondition)
				}}
			},
			call: func(s *Store) error {
				return s.CreateProject(context.Background(), automation.Project{ID: "prj_1", Name: "acme"})
			},
			wantKind: automation.ErrConflict, wantCode: "PROJECT_EXISTS", wantIn: `"acme"`,
		},
		{
			name: "delete connection of another project",
			stub: func(*testing.T) *stub {
				return &stub{delete: func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
					return nil, &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
				}}
			},
			call:     func(s *Store) error { return s.DeleteConnection(context.Background(), "prj_b", "con_1") },
			wantKind: automation.ErrNotFound, wantCode: "CONNECTION_NOT_FOUND",
		},
		{
			name: "set connection status fails",
			stub: func(*testing.T) *stub {
				return &stub{update: func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) { return nil, boom }}
			},
			call: func(s *Store) error {
				return s.SetConnectionStatus(context.Background(), "prj_a", "con_1", automation.ConnectionError, time.Time{})
			},
			wantCode: "dynamostore: set status of connection con_1: boom",
		},
		{
			name: "list flows with a malformed position",
			stub: func(*testing.T) *stub { return &stub{} },
			call: func(s *Store) error {
				_, err := s.ListFlows(context.Background(), "prj_a", automation.ListQuery{Limit: 1, After: "garbage"})
				return err
			},
			wantCode: "dynamostore: list flows of prj_a: malformed list position",
		},
		{
			name: "undecodable item",
			stub: func(*testing.T) *stub {
				return &stub{getItem: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
					return &dynamodb.GetItemOutput{Item: map[string]types.AttributeValue{
						attrID: str("flw_1"), attrProject: str("prj_a"), attrVersion: str("one"),
					}}, nil
				}}
			},
			call:     func(s *Store) error { _, err := s.Flow(context.Background(), "prj_a", "flw_1"); return err },
			wantCode: "dynamostore: decode flow flw_1: attribute version: want a number",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(New(tt.stub(t), stubTables))
			if err == nil {
				t.Fatal("no error")
			}
			var e *automation.Error
			isDomain := errors.As(err, &e)
			switch {
			case tt.wantKind != nil && (!isDomain || !errors.Is(err, tt.wantKind) || e.Code != tt.wantCode):
				t.Errorf("err = %v, want code %s (%v)", err, tt.wantCode, tt.wantKind)
			case tt.wantKind == nil && (isDomain || !strings.HasPrefix(err.Error(), tt.wantCode)):
				t.Errorf("err = %v, want an internal error starting %q", err, tt.wantCode)
			case !strings.Contains(err.Error(), tt.wantIn):
				t.Errorf("err = %v, want it to mention %q", err, tt.wantIn)
			}
			if tt.wantCode == "dynamostore: get flow flw_1: boom" && !errors.Is(err, boom) {
				t.Errorf("err = %v does not wrap the SDK error", err)
			}
		})
	}
}

func TestPositions(t *testing.T) {
	ts := []time.Time{
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 1, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 100_000_000, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 6, 0, time.FixedZone("x", 3600)), // 02:04:06 UTC: earliest
	}
	sorts := make([]string, len(ts))
	for i, tm := range ts {
		sorts[i] = createdSort(tm, "flw_x")
		id, err := positionID(sorts[i])
		if err != nil || id != "flw_x" {
			t.Errorf("positionID(%q) = %q, %v", sorts[i], id, err)
		}
	}
	if !(sorts[3] < sorts[0] && sorts[0] < sorts[1] && sorts[1] < sorts[2]) {
		t.Errorf("sort keys do not order as times: %q", sorts)
	}
	for _, bad := range []string{"", "flw_x", "#flw_x", "2026-01-02T03:04:05.000000000Z#", "2026-13-02T03:04:05.000000000Z#flw_x"} {
		if _, err := positionID(bad); err == nil {
			t.Errorf("positionID(%q) accepted a malformed position", bad)
		}
	}
}

// TestRunBookkeepingShapes asserts the request shapes that keep run
// bookkeeping off the hot flow item, which moto cannot show (it never
// rejects concurrent transactions on one item): creating a run reads the
// flow and puts the run alone, with no transaction; finishing updates the
// run (fenced on its claim), then adds to the flow's stats with atomic ADDs
// in a write of their own, then to the day's insight counters with an
// unconditional ADD (insights.go); when a newer run holds lastRun, the
// counts alone are added; a run already final adds nothing.
func TestRunBookkeepingShapes(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	run := automation.Run{ID: "run_1", Project: "prj_a", FlowID: "flw_1", Status: automation.RunRunning, Created: created,
		LeaseToken: "lease_1"}
	conditionFailed := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	tests := []struct {
		name        string
		lastRunNews bool // a newer run set lastRun: the first stats update fails its condition
		finished    bool // the run is final already
		wantUpdates []string
		wantCode    string
	}{
		{"finish", false, false, []string{"runs", "flows ADD SET", "insights ADD"}, ""},
		{"newer lastRun", true, false, []string{"runs", "flows ADD SET", "flows ADD", "insights ADD"}, ""},
		{"already finished", false, true, []string{"runs"}, automation.CodeRunFinished},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var updates []string
			var put *dynamodb.PutItemInput
			st := &stub{
				getItem: func(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
					if *in.TableName == stubTables.Flows {
						return &dynamodb.GetItemOutput{Item: storedFlow(t)}, nil
					}
					rec, err := runRecord(run)
					if err != nil {
						t.Fatal(err)
					}
					rec[attrID], rec[attrProject], rec["status"] = str("run_1"), str("prj_a"), str("SUCCEEDED")
					return &dynamodb.GetItemOutput{Item: rec}, nil
				},
				put: func(in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
					put = in
					return &dynamodb.PutItemOutput{}, nil
				},
				update: func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
					expr := *in.UpdateExpression
					switch id, _ := in.Key[attrID].(*types.AttributeValueMemberS); {
					case *in.TableName == stubTables.Runs && id != nil && strings.HasPrefix(id.Value, insightPrefix):
						updates = append(updates, "insights ADD")
						if in.ConditionExpression != nil || !strings.HasPrefix(expr, "ADD ") {
							t.Errorf("insight update %q (condition %v): want a plain ADD", expr, in.ConditionExpression)
						}
					case *in.TableName == stubTables.Runs:
						updates = append(updates, "runs")
						if !strings.Contains(*in.ConditionExpression, "#token = :token") {
							t.Errorf("run write %q is not fenced on the claim", *in.ConditionExpression)
						}
						if tt.finished {
							return nil, conditionFailed
						}
					case strings.Contains(expr, "SET"):
						updates = append(updates, "flows ADD SET")
						if !strings.HasPrefix(expr, "ADD #f :one, #s :s") {
							t.Errorf("stats update %q does not ADD", expr)
						}
						if tt.lastRunNews {
							return nil, conditionFailed
						}
					default:
						updates = append(updates, "flows ADD")
					}
					return &dynamodb.UpdateItemOutput{}, nil
				},
				// transact is nil: any transaction fails the test.
			}
			s := New(st, stubTables)
			if err := s.CreateRun(context.Background(), run); err != nil {
				t.Fatalf("CreateRun = %v", err)
			}
			if put == nil || *put.TableName != stubTables.Runs || *put.ConditionExpression != "attribute_not_exists(id)" {
				t.Fatalf("CreateRun put %+v, want one conditional put of the run", put)
			}
			fin := run
			fin.Status = automation.RunSucceeded
			err := s.FinishRun(context.Background(), fin)
			switch {
			case tt.wantCode == "" && err != nil:
				t.Errorf("FinishRun = %v", err)
			case tt.wantCode != "" && !automation.HasCode(err, tt.wantCode):
				t.Errorf("FinishRun = %v, want %s", err, tt.wantCode)
			}
			if !slices.Equal(updates, tt.wantUpdates) {
				t.Errorf("updates %v, want %v", updates, tt.wantUpdates)
			}
		})
	}
}
