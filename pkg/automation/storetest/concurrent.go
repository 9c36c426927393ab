package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// testConcurrentWrites has many writers at once, some of whose writes must
// fail: every write that succeeded is there afterwards with its routes, and
// none of a failed write is. A store that batches writers into one
// transaction (the SQLite store's group commit) must keep a failing
// writer's changes out without losing its neighbours'.
func testConcurrentWrites(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p := automation.NewID(automation.PrefixProject)
	held := webhookFlow(p, "holder", automation.MethodAny, "concurrent/held", base)
	must(t, "CreateFlow holder", s.CreateFlow(ctx, held))

	// Enough writers at once for SQLite's group commit to batch them with
	// failures among them; DynamoDB serialises path writes of one segment
	// count on its shape registry (retried inside the store), so many more
	// only make the moto run slow.
	const good, bad = 12, 4
	flows := make([]automation.Flow, good+bad)
	errs := make([]error, good+bad)
	for i := range flows {
		path := fmt.Sprintf("concurrent/%d", i)
		if i >= good {
			path = "concurrent/held" // held by another flow: ROUTE_CONFLICT
		}
		flows[i] = webhookFlow(p, fmt.Sprintf("writer %d", i), automation.MethodAny, path, base.Add(time.Duration(i+1)*time.Millisecond))
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range flows {
		wg.Go(func() {
			<-start
			errs[i] = s.CreateFlow(ctx, flows[i])
		})
	}
	close(start)
	wg.Wait()

	for i, f := range flows {
		if i < good {
			must(t, "CreateFlow "+f.Name, errs[i])
			equalFlow(t, "Flow("+f.Name+")", getFlow(t, s, p, f.ID), f)
			wantRoutes(t, s, fmt.Sprintf("concurrent/%d", i), allMethods(f.ID))
			continue
		}
		wantKind(t, "CreateFlow "+f.Name+" on a held route", errs[i], automation.ErrConflict, "ROUTE_CONFLICT")
		wantNoFlow(t, s, p, f.ID)
	}
	wantRoutes(t, s, "concurrent/held", allMethods(held.ID))
	ids, _ := walk(t, "ListFlows", func(after string) (automation.Page[automation.Flow], error) {
		return s.ListFlows(ctx, p, automation.ListQuery{Limit: 100, After: after})
	})
	if len(ids) != good+1 {
		t.Errorf("ListFlows after concurrent writes: %d flows, want %d", len(ids), good+1)
	}
}
