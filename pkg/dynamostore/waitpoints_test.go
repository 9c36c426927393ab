package dynamostore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/awstest"
	"flowservice/pkg/dynamostore"
)

// TestWaitpointTooLarge: a callback body that would pass the item limit is
// a 400 PAYLOAD_TOO_LARGE naming the bound, and the waitpoint stays
// pending, not a failed write (a 500).
func TestWaitpointTooLarge(t *testing.T) {
	t.Parallel()
	_, client, tables := newStore(t)
	s := dynamostore.New(client, tables)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	_, hash := automation.NewWaitpointToken()
	if _, err := s.UpdateWaitpoint(ctx, "prj_a", "run_1", "job", func(w *automation.Waitpoint, found bool) (bool, error) {
		*w = automation.Waitpoint{Kind: automation.WaitCallback, Status: automation.WaitpointPending, Created: now,
			ExpiresAt: now.Add(time.Hour), TokenHash: hash}
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	_, err := s.UpdateWaitpoint(ctx, "prj_a", "run_1", "job", func(w *automation.Waitpoint, found bool) (bool, error) {
		w.Status, w.Callback = automation.WaitpointDecided, &automation.Callback{Body: strings.Repeat("x", 500_000), ReceivedAt: now}
		return true, nil
	})
	var e *automation.Error
	if !errors.As(err, &e) || e.Code != "PAYLOAD_TOO_LARGE" || !strings.Contains(e.Message, "350000") {
		t.Fatalf("a 500 KB callback = %v, want 400 PAYLOAD_TOO_LARGE naming 350000", err)
	}
	if w, err := s.Waitpoint(ctx, "prj_a", "run_1", "job"); err != nil || w.Decided() {
		t.Fatalf("after the refusal: %+v, %v; want it pending", w, err)
	}
}

// txRecorder keeps the largest TransactWriteItems the store sent.
type txRecorder struct {
	dynamostore.API
	mu           sync.Mutex
	items, bytes int
}

func (r *txRecorder) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	n := 0
	for _, it := range in.TransactItems {
		if it.Put != nil {
			for k, v := range it.Put.Item {
				n += len(k)
				if s, ok := v.(*types.AttributeValueMemberS); ok {
					n += len(s.Value)
				} else if num, ok := v.(*types.AttributeValueMemberN); ok {
					n += len(num.Value)
				}
			}
		}
	}
	r.mu.Lock()
	r.items, r.bytes = max(r.items, len(in.TransactItems)), max(r.bytes, n)
	r.mu.Unlock()
	return r.API.TransactWriteItems(ctx, in, opts...)
}

// TestWaitpointEventsFitOneTransaction: an approval decided with answers
// near the waitpoint's size bound, wanted by alerts.MaxSubscriptions
// subscriptions, commits with its event in one TransactWriteItems within
// DynamoDB's limits (100 items, 4 MB): each delivery's payload leaves the
// values out (valuesOmitted) rather than carry them twenty times.
func TestWaitpointEventsFitOneTransaction(t *testing.T) {
	t.Parallel()
	_, client, tables := newStore(t)
	tables.Alerts = awstest.UniqueName(t, "fs") + "-alerts"
	if err := dynamostore.CreateTables(t.Context(), client, tables); err != nil {
		t.Fatal(err)
	}
	rec := &txRecorder{API: client}
	s := dynamostore.New(rec, tables)
	at := time.Now().UTC().Truncate(time.Millisecond)
	s.UseOutbox(alerts.NewOutbox(func() time.Time { return at }))
	ctx := context.Background()
	for range alerts.MaxSubscriptions {
		sub := alerts.Subscription{ID: automation.NewID(alerts.PrefixSubscription), Project: "prj_a", URL: "https://x.example/",
			Events: []string{alerts.EventApprovalDecided}, Status: alerts.StatusActive, Secret: alerts.NewSecret(), Created: at}
		if err := s.CreateSubscription(ctx, sub); err != nil {
			t.Fatal(err)
		}
	}
	_, hash := automation.NewWaitpointToken()
	if _, err := s.UpdateWaitpoint(ctx, "prj_a", "run_1", "ok", func(w *automation.Waitpoint, found bool) (bool, error) {
		*w = automation.Waitpoint{Kind: automation.WaitApproval, Status: automation.WaitpointPending, Approvals: 10,
			Decisions: []automation.Decision{}, Created: at, ExpiresAt: at.Add(time.Hour), TokenHash: hash}
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Ten deciders, 30 KB of values each: a 300 KB document, under
	// MaxWaitpointBytes, that twenty deliveries would carry as 6 MB.
	_, err := s.UpdateWaitpoint(ctx, "prj_a", "run_1", "ok", func(w *automation.Waitpoint, found bool) (bool, error) {
		for i := range 10 {
			w.Decisions = append(w.Decisions, automation.Decision{By: fmt.Sprintf("p%d@example.com", i), Via: automation.ViaAPI,
				Decision: automation.DecisionApproved, Values: map[string]any{"note": strings.Repeat("v", 30_000)}, At: at})
		}
		w.Status, w.Decision, w.TokenHash = automation.WaitpointDecided, automation.DecisionApproved, ""
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if rec.items > 100 || rec.bytes > 4_000_000 {
		t.Fatalf("largest transaction: %d items, %d bytes; DynamoDB takes 100 and 4 MB", rec.items, rec.bytes)
	}
	got, err := s.ClaimDeliveries(ctx, at.Add(time.Minute), time.Minute, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != alerts.MaxSubscriptions {
		t.Fatalf("%d deliveries, want %d", len(got), alerts.MaxSubscriptions)
	}
	var payload struct {
		Data struct {
			Decision      string
			ValuesOmitted bool
			Decisions     []automation.Decision
		}
	}
	if err := json.Unmarshal(got[0].Event.Payload, &payload); err != nil {
		t.Fatal(err)
	}
	d := payload.Data
	if len(got[0].Event.Payload) > alerts.MaxApprovalEventBytes || !d.ValuesOmitted || d.Decision != automation.DecisionApproved ||
		len(d.Decisions) != 10 || d.Decisions[0].Values != nil || d.Decisions[0].By != "p0@example.com" {
		t.Fatalf("approval.decided payload of %d bytes: %+v; want the decisions without values, valuesOmitted", len(got[0].Event.Payload), d)
	}
	t.Logf("largest transaction: %d items, %d bytes; payload %d bytes", rec.items, rec.bytes, len(got[0].Event.Payload))
}
