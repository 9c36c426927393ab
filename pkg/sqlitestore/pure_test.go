package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestInsertFinishedRunLeavesNoQueueEntry: a run stored final in its one
// commit has nothing left for the workers: no queue entry, pending or
// parked, and nothing due to claim.
func TestInsertFinishedRunLeavesNoQueueEntry(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "pure.db"))
	now := time.Now().UTC().Truncate(time.Millisecond)
	p := automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "pure", Created: now}
	if err := s.CreateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	f := flow(p.ID, "POST", "pure/hook", now)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	for _, status := range []automation.RunStatus{automation.RunSucceeded, automation.RunFailed} {
		r := benchRun(p.ID, f.ID)
		fin := now.Add(time.Millisecond)
		r.Status, r.Started, r.Finished = status, &now, &fin
		if err := s.InsertFinishedRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	pending, parked, err := s.QueueStats(ctx)
	if err != nil || pending != 0 || parked != 0 {
		t.Fatalf("queue after finished inserts: %d pending, %d parked, %v; want empty", pending, parked, err)
	}
	es, err := s.ClaimDueBatch(ctx, now.Add(time.Hour), time.Minute, 10)
	if err != nil || len(es) != 0 {
		t.Fatalf("ClaimDueBatch after finished inserts = %d entries, %v; want none", len(es), err)
	}
}

// BenchmarkInsertFinishedRun is the store's share of an ON_COMPLETION run
// without side effects: one commit, beside BenchmarkInlineRun's two.
func BenchmarkInsertFinishedRun(b *testing.B) {
	s, project, _, f := hotStore(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r := benchRun(project, f.ID)
		fin := time.Now().UTC()
		r.Status, r.Started, r.Finished, r.Attempts = automation.RunSucceeded, &r.Created, &fin, 1
		if err := s.InsertFinishedRun(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}
