package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
	"flowservice/pkg/dynamostore"
)

// countingDB counts UpdateItem calls: what a bucket costs.
type countingDB struct {
	*dynamodb.Client
	updates atomic.Int64
}

func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.updates.Add(1)
	return c.Client.UpdateItem(ctx, in, opts...)
}

// TestRateBucketsPerProject: two Services over one stage's tables, as two
// Lambda environments, each with its own memory, share the project's
// webhooksPerSecond and outboundPerMinute buckets: together they admit
// the plan's figure, not that figure each. The clock is injected and
// moves only when the test moves it, so the counts are exact. An
// admitted delivery costs one UpdateItem when one environment delivers
// the project's traffic; an unlimited plan costs none.
func TestRateBucketsPerProject(t *testing.T) {
	store, client, tables := newStore(t)
	ctx := t.Context()
	db := &countingDB{Client: client}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var svcs []*automation.Service
	for range 2 {
		svc, err := automation.NewService(automation.Config{
			Store: store, Secrets: &memSecrets{m: map[string][]byte{}}, Checker: anyChecker{},
			CursorKey: bytes.Repeat([]byte("k"), 32), EngineURL: "https://engine.test", WorkflowURL: "https://wf.test",
			RateBuckets: dynamostore.NewBuckets(db, tables.Projects),
			Clock:       func() time.Time { return now },
		})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
	}
	free, err := svcs[0].CreateProject(ctx, "free", automation.PlanFree)
	if err != nil {
		t.Fatal(err)
	}
	admitted := func(n int, svc func(i int) *automation.Service) (ok int) {
		for i := range n {
			err := svc(i).AdmitDelivery(ctx, free.ID)
			var rl *automation.RateLimited
			switch {
			case err == nil:
				ok++
			case errors.As(err, &rl):
				if rl.RetryAfter <= 0 || rl.RetryAfter > time.Second {
					t.Fatalf("retry after %v", rl.RetryAfter)
				}
			default:
				t.Fatal(err)
			}
		}
		return ok
	}
	alternate := func(i int) *automation.Service { return svcs[i%2] }
	// FREE: 10 a second, a burst of 10. Both environments together, at
	// one instant: 10, not 20.
	if got := admitted(40, alternate); got != 10 {
		t.Errorf("two environments admitted %d deliveries at once, want the plan's 10", got)
	}
	// Half a second later, half a second's worth.
	now = now.Add(500 * time.Millisecond)
	if got := admitted(40, alternate); got != 5 {
		t.Errorf("after 0.5 s: %d admitted, want 5", got)
	}
	// A bucket refilled, one environment: one UpdateItem per admitted
	// delivery.
	now = now.Add(10 * time.Second)
	before := db.updates.Load()
	if got := admitted(10, func(int) *automation.Service { return svcs[0] }); got != 10 {
		t.Errorf("after a pause: %d admitted, want 10", got)
	}
	if n := db.updates.Load() - before; n != 10 {
		t.Errorf("%d UpdateItems for 10 admitted deliveries, want 10", n)
	}

	// outboundPerMinute: FREE 600, a burst of 10; past it a request waits
	// (here until its context ends: the clock does not move).
	for i := range 10 {
		if err := svcs[i%2].AdmitOutbound(ctx, free.ID); err != nil {
			t.Fatalf("outbound %d: %v", i, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := svcs[1].AdmitOutbound(short, free.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the 11th outbound request at one instant: %v, want it held", err)
	}

	// ENTERPRISE has no webhooksPerSecond: no bucket, no write.
	ent, err := svcs[0].CreateProject(ctx, "ent", automation.PlanEnterprise)
	if err != nil {
		t.Fatal(err)
	}
	before = db.updates.Load()
	for range 20 {
		if err := svcs[1].AdmitDelivery(ctx, ent.ID); err != nil {
			t.Fatal(err)
		}
		if err := svcs[1].AdmitOutbound(ctx, ent.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n := db.updates.Load() - before; n != 0 {
		t.Errorf("an unlimited plan cost %d UpdateItems", n)
	}
}

// TestRateBucketsContract: two environments' Buckets over one table.
func TestRateBucketsContract(t *testing.T) {
	storetest.RunRateBuckets(t, func(t *testing.T) (a, b automation.RateBuckets) {
		_, client, tables := newStore(t)
		return dynamostore.NewBuckets(client, tables.Projects), dynamostore.NewBuckets(client, tables.Projects)
	})
}
