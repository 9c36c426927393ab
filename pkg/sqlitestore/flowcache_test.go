package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
	"flowservice/pkg/sqlitestore"
)

func openCached(t *testing.T, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(context.Background(), path, sqlitestore.CacheFlows(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestContractCached: the store contract holds with the flow and route
// cache on (as flowd opens the store), with a TTL long enough that only
// invalidation can make a change visible.
func TestContractCached(t *testing.T) {
	storetest.Run(t, func(t *testing.T) automation.Store {
		return openCached(t, filepath.Join(t.TempDir(), "flows.db"))
	})
}

// TestFlowCacheSeesChanges: a flow read (and so cached) by the receivers'
// lookups is seen changed, moved and gone right after each write.
func TestFlowCacheSeesChanges(t *testing.T) {
	ctx := context.Background()
	s := openCached(t, filepath.Join(t.TempDir(), "flows.db"))
	now := time.Now().UTC().Truncate(time.Millisecond)
	f := flow(automation.NewID(automation.PrefixProject), "POST", "cache/a", now)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second read is served from the cache
		got, err := s.FlowByID(ctx, f.ID)
		if err != nil || got.Status != automation.FlowInactive {
			t.Fatalf("FlowByID = %v, %v", got.Status, err)
		}
		routes, err := s.RouteFlows(ctx, "cache/a")
		if err != nil || routes["POST"] != f.ID {
			t.Fatalf("RouteFlows = %v, %v", routes, err)
		}
		routes["POST"] = "tampered" // a caller's copy: must not reach the cache
	}

	f.Status, f.Version = automation.FlowActive, 2
	f.Trigger.Webhook.Path = "cache/b"
	if err := s.PutFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	if got, err := s.FlowByID(ctx, f.ID); err != nil || got.Status != automation.FlowActive {
		t.Errorf("FlowByID after PutFlow = %v, %v; want ACTIVE", got.Status, err)
	}
	if routes, err := s.RouteFlows(ctx, "cache/a"); err != nil || len(routes) != 0 {
		t.Errorf("RouteFlows(old path) after PutFlow = %v, %v; want none", routes, err)
	}
	if routes, err := s.RouteFlows(ctx, "cache/b"); err != nil || routes["POST"] != f.ID {
		t.Errorf("RouteFlows(new path) after PutFlow = %v, %v", routes, err)
	}

	if err := s.DeleteFlow(ctx, f.Project, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FlowByID(ctx, f.ID); err == nil {
		t.Error("FlowByID after DeleteFlow found the flow")
	}
	if routes, err := s.RouteFlows(ctx, "cache/b"); err != nil || len(routes) != 0 {
		t.Errorf("RouteFlows after DeleteFlow = %v, %v; want none", routes, err)
	}
}

// TestArmedCacheSeesChanges: a flow's arming, read (and so cached) by
// every delivery, is seen armed right after ArmCapture and disarmed right
// after TakeCapture, with a TTL of an hour.
func TestArmedCacheSeesChanges(t *testing.T) {
	ctx := context.Background()
	s := openCached(t, filepath.Join(t.TempDir(), "flows.db"))
	now := time.Now().UTC().Truncate(time.Millisecond)
	f := flow(automation.NewID(automation.PrefixProject), "POST", "armed/a", now)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second read is served from the cache
		if until, err := s.ArmedUntil(ctx, f.Project, f.ID); err != nil || !until.IsZero() {
			t.Fatalf("ArmedUntil before arming = %v, %v; want zero", until, err)
		}
		if taken, err := s.TakeCapture(ctx, f.Project, f.ID, now); err != nil || taken {
			t.Fatalf("TakeCapture before arming = %v, %v; want false", taken, err)
		}
	}
	until := now.Add(time.Minute)
	if err := s.ArmCapture(ctx, f.Project, f.ID, until); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ArmedUntil(ctx, f.Project, f.ID); err != nil || !got.Equal(until) {
		t.Fatalf("ArmedUntil after arming = %v, %v; want %v", got, err, until)
	}
	if taken, err := s.TakeCapture(ctx, f.Project, f.ID, now); err != nil || !taken {
		t.Fatalf("TakeCapture when armed = %v, %v; want true", taken, err)
	}
	for range 2 {
		if got, err := s.ArmedUntil(ctx, f.Project, f.ID); err != nil || !got.IsZero() {
			t.Fatalf("ArmedUntil after the take = %v, %v; want zero", got, err)
		}
		if taken, err := s.TakeCapture(ctx, f.Project, f.ID, now); err != nil || taken {
			t.Fatalf("TakeCapture after the take = %v, %v; want false", taken, err)
		}
	}
}
