package sqlitestore_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestChildFinishWakesCaller checks the embedded queue's side of CALL_FLOW:
// finishing a child whose caller waits makes the caller's entry due in the
// same write, also when the caller's attempt still holds its entry (the
// Retry that parks it then keeps it due), while a child without a waiting
// caller leaves other entries alone.
func TestChildFinishWakesCaller(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "wake.db"))
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	newRun := func(id string, caller *automation.Caller) automation.Run {
		return automation.Run{ID: id, Project: "prj_w", FlowID: "flw_w", Status: automation.RunRunning, Created: t0,
			Trigger: automation.TriggerData{Body: json.RawMessage(`{}`), Caller: caller}}
	}
	finishChild := func(id string, at time.Time) {
		t.Helper()
		c, err := s.ClaimRun(ctx, "prj_w", id, at, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		c.Status, c.Finished = automation.RunSucceeded, &at
		c.Started, c.DurationMs = &at, new(int64)
		if err := s.FinishRun(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	due := func(at time.Time) []string {
		t.Helper()
		es, err := s.ClaimDueBatch(ctx, at, time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, e := range es {
			ids = append(ids, e.RunID)
		}
		return ids
	}

	// The caller is parked until its next check, an hour away.
	if err := s.Enqueue(ctx, newRun("run_parent", nil)); err != nil {
		t.Fatal(err)
	}
	if got := due(t0); len(got) != 1 || got[0] != "run_parent" {
		t.Fatalf("due at start = %v, want run_parent", got)
	}
	if err := s.Retry(ctx, "run_parent", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}

	// A child that nobody waits for wakes nothing.
	if err := s.Enqueue(ctx, newRun("run_free", &automation.Caller{RunID: "run_parent", FlowID: "flw_w"})); err != nil {
		t.Fatal(err)
	}
	finishChild("run_free", t0.Add(time.Second))
	if got := due(t0.Add(2 * time.Second)); len(got) != 0 {
		t.Fatalf("due after a child without a waiting caller ended = %v, want none", got)
	}

	// A child the caller waits for wakes it at once.
	if err := s.Enqueue(ctx, newRun("run_child1", &automation.Caller{RunID: "run_parent", FlowID: "flw_w", Wait: true})); err != nil {
		t.Fatal(err)
	}
	finishChild("run_child1", t0.Add(3*time.Second))
	if got := due(t0.Add(3 * time.Second)); len(got) != 1 || got[0] != "run_parent" {
		t.Fatalf("due after the awaited child ended = %v, want run_parent", got)
	}

	// The caller's attempt holds its entry (just claimed above) when its
	// next child ends: the Retry that parks it keeps it due.
	if err := s.Enqueue(ctx, newRun("run_child2", &automation.Caller{RunID: "run_parent", FlowID: "flw_w", Wait: true})); err != nil {
		t.Fatal(err)
	}
	finishChild("run_child2", t0.Add(4*time.Second))
	if err := s.Retry(ctx, "run_parent", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := due(t0.Add(5 * time.Second)); len(got) != 1 || got[0] != "run_parent" {
		t.Fatalf("due after a wake during the caller's attempt = %v, want run_parent", got)
	}
	// Once parked again without a wake, the Retry's time holds.
	if err := s.Retry(ctx, "run_parent", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := due(t0.Add(time.Hour - time.Second)); len(got) != 0 {
		t.Fatalf("due before the caller's check = %v, want none", got)
	}
}
