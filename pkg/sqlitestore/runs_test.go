package sqlitestore_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
)

func TestRunContract(t *testing.T) {
	storetest.RunRuns(t, func(t *testing.T) storetest.RunEnv {
		s := openAt(t, filepath.Join(t.TempDir(), "runs.db"))
		return storetest.RunEnv{Store: s, Runs: s, Create: s.Enqueue, CreateClaimed: s.EnqueueClaimed, InsertFinished: s.InsertFinishedRun}
	})
}

// TestQueue walks one entry through claim, retry, lease expiry and park,
// and another through ack.
func TestQueue(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "queue.db"))
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	run := func(id string, created time.Time) automation.Run {
		return automation.Run{ID: id, Project: "prj_q", FlowID: "flw_q", Status: automation.RunRunning,
			Created: created, Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}}
	}
	if err := s.Enqueue(ctx, run("run_a", t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.Enqueue(ctx, run("run_b", t0.Add(time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	claim := func(at time.Time) (string, int, bool) {
		t.Helper()
		e, ok, err := s.ClaimDue(ctx, at, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if ok && e.Project != "prj_q" {
			t.Fatalf("claimed %s of project %q", e.RunID, e.Project)
		}
		return e.RunID, e.Claims, ok
	}
	if _, _, ok := claim(t0.Add(-time.Second)); ok {
		t.Fatal("claimed an entry before it was due")
	}
	if id, n, ok := claim(t0); !ok || id != "run_a" || n != 1 {
		t.Fatalf("first claim = %s attempt %d ok %v, want run_a attempt 1", id, n, ok)
	}
	if id, _, ok := claim(t0.Add(time.Millisecond)); !ok || id != "run_b" {
		t.Fatalf("second claim = %s %v, want run_b (run_a is leased)", id, ok)
	}
	if _, _, ok := claim(t0.Add(2 * time.Millisecond)); ok {
		t.Fatal("claimed while both entries are leased")
	}
	if err := s.Ack(ctx, "run_b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Retry(ctx, "run_a", t0.Add(10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := claim(t0.Add(9 * time.Second)); ok {
		t.Fatal("claimed a retry before its time")
	}
	id, n, ok := claim(t0.Add(10 * time.Second))
	if !ok || id != "run_a" || n != 2 {
		t.Fatalf("retry claim = %s attempt %d ok %v", id, n, ok)
	}
	// Crash: nobody settles it; after the lease it comes back.
	if id, n, ok := claim(t0.Add(10*time.Second + time.Minute)); !ok || id != "run_a" || n != 3 {
		t.Fatalf("claim after an expired lease = %s attempt %d ok %v", id, n, ok)
	}
	// A restart releases the dead process's leases at once.
	if n, err := s.ReleaseLeases(ctx); err != nil || n != 1 {
		t.Fatalf("ReleaseLeases = %d, %v; want 1", n, err)
	}
	if id, n, ok := claim(t0.Add(10*time.Second + time.Minute)); !ok || id != "run_a" || n != 4 {
		t.Fatalf("claim after a restart = %s attempt %d ok %v", id, n, ok)
	}
	if err := s.Park(ctx, "run_a", "gave up"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := claim(t0.Add(time.Hour)); ok {
		t.Fatal("claimed a parked entry")
	}
	pending, parked, err := s.QueueStats(ctx)
	if err != nil || pending != 0 || parked != 1 {
		t.Fatalf("queue stats = %d pending, %d parked, %v; want 0, 1", pending, parked, err)
	}
}

// TestFinishRemovesQueueEntry: ClaimDue claims the entry's run with it, and
// FinishRun takes a finished run's queue entry with it, so the worker's Ack has nothing left to write; a FAILED run keeps
// its entry, for the worker to park or acknowledge.
func TestFinishRemovesQueueEntry(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "finish.db"))
	now := time.Now().UTC().Truncate(time.Millisecond)
	finish := func(id string, status automation.RunStatus) {
		t.Helper()
		err := s.Enqueue(ctx, automation.Run{ID: id, Project: "prj_f", FlowID: "flw_f", Status: automation.RunRunning,
			Created: now, Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}})
		if err != nil {
			t.Fatal(err)
		}
		e, ok, err := s.ClaimDue(ctx, now, time.Minute)
		if err != nil || !ok || e.RunID != id {
			t.Fatalf("ClaimDue = %+v %v %v, want %s", e, ok, err, id)
		}
		// The queue claimed the run with its entry, in the same write.
		if e.Run == nil || e.Run.ID != id || e.Run.LeaseToken == "" || e.Run.Attempts != 1 || e.Run.Interrupted != 0 {
			t.Fatalf("ClaimDue's run = %+v; want %s claimed for its first attempt", e.Run, id)
		}
		if _, err := s.ClaimRun(ctx, "prj_f", id, now, time.Minute); !automation.IsRunClaimed(err) {
			t.Fatalf("ClaimRun after ClaimDue = %v; want the run held by the queue's claim", err)
		}
		r := *e.Run
		r.Status = status
		if err := s.FinishRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	stats := func() (int, int) {
		t.Helper()
		pending, parked, err := s.QueueStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return pending, parked
	}

	finish("run_ok", automation.RunSucceeded)
	if p, k := stats(); p != 0 || k != 0 {
		t.Fatalf("after a SUCCEEDED finish the queue keeps %d pending, %d parked; want none", p, k)
	}
	if err := s.Ack(ctx, "run_ok"); err != nil {
		t.Fatalf("Ack of an entry FinishRun removed: %v", err)
	}

	finish("run_bad", automation.RunFailed)
	if p, k := stats(); p != 1 || k != 0 {
		t.Fatalf("after a FAILED finish the queue has %d pending, %d parked; want the entry kept", p, k)
	}
	if err := s.Park(ctx, "run_bad", "gave up"); err != nil {
		t.Fatal(err)
	}
	if p, k := stats(); p != 0 || k != 1 {
		t.Fatalf("queue has %d pending, %d parked; want the FAILED run's entry parked", p, k)
	}

	// An attempt claimed with its entry that dies unsettled counts as
	// interrupted at the next claim, as with ClaimRun.
	err := s.Enqueue(ctx, automation.Run{ID: "run_crash", Project: "prj_f", FlowID: "flw_f", Status: automation.RunRunning,
		Created: now, Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if e, ok, err := s.ClaimDue(ctx, now, time.Minute); err != nil || !ok || e.Run == nil {
		t.Fatalf("ClaimDue = %+v %v %v", e, ok, err)
	}
	e, ok, err := s.ClaimDue(ctx, now.Add(2*time.Minute), time.Minute)
	if err != nil || !ok || e.Claims != 2 || e.Run == nil || e.Run.Attempts != 2 || e.Run.Interrupted != 1 {
		t.Fatalf("claim after an expired lease = %+v (run %+v) %v %v; want attempt 2 with 1 interrupted", e, e.Run, ok, err)
	}
}

// TestEnqueueClaimedHoldsItsEntry: a run enqueued claimed (the ON_COMPLETION
// fast path) has its queue entry held by the same lease. No worker's claim
// takes it while the lease holds; once it ran out (the receiver died) the
// next claim takes entry and run, counting the dead attempt; a restart's
// ReleaseLeases frees it at once; the creator's finish removes it.
func TestEnqueueClaimedHoldsItsEntry(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "inline.db"))
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	lease := time.Minute
	enqueue := func(id string) automation.Run {
		t.Helper()
		c, err := s.EnqueueClaimed(ctx, automation.Run{ID: id, Project: "prj_i", FlowID: "flw_i", Status: automation.RunRunning,
			Created: t0, Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}}, t0, lease)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	claimDue := func(at time.Time) (automation.QueueEntry, bool) {
		t.Helper()
		e, ok, err := s.ClaimDue(ctx, at, lease)
		if err != nil {
			t.Fatal(err)
		}
		return e, ok
	}

	enqueue("run_dead")
	if e, ok := claimDue(t0.Add(lease - time.Millisecond)); ok {
		t.Fatalf("ClaimDue took %s under its creator's lease", e.RunID)
	}
	e, ok := claimDue(t0.Add(lease))
	if !ok || e.RunID != "run_dead" || e.Claims != 2 || e.Run == nil || e.Run.Attempts != 2 || e.Run.Interrupted != 1 {
		t.Fatalf("ClaimDue after the lease = %+v %v; want run_dead, its run claimed for attempt 2 with 1 interrupted", e, ok)
	}
	if err := s.Ack(ctx, "run_dead"); err != nil {
		t.Fatal(err)
	}

	enqueue("run_restart")
	if n, err := s.ReleaseLeases(ctx); err != nil || n != 1 {
		t.Fatalf("ReleaseLeases = %d, %v; want 1", n, err)
	}
	if e, ok := claimDue(t0.Add(time.Second)); !ok || e.RunID != "run_restart" || e.Run == nil {
		t.Fatalf("ClaimDue after a restart = %+v %v; want run_restart at once", e, ok)
	}
	if err := s.Ack(ctx, "run_restart"); err != nil {
		t.Fatal(err)
	}

	c := enqueue("run_done")
	c.Status = automation.RunSucceeded
	if err := s.FinishRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	pending, parked, err := s.QueueStats(ctx)
	if err != nil || pending != 0 || parked != 0 {
		t.Fatalf("queue after the creator finished = %d pending, %d parked, %v; want empty", pending, parked, err)
	}
}

// TestClaimDueBatch: one claim takes up to max due entries, oldest first,
// passing over leased and future ones, and claims each one's run with it;
// an entry whose run is final comes without a run, for ExecuteRun to settle.
func TestClaimDueBatch(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "batch.db"))
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	enqueue := func(id string, created time.Time) {
		t.Helper()
		if err := s.Enqueue(ctx, automation.Run{ID: id, Project: "prj_b", FlowID: "flw_b", Status: automation.RunRunning,
			Created: created, Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	for i, id := range []string{"run_1", "run_2", "run_3", "run_4", "run_5"} {
		enqueue(id, t0.Add(time.Duration(i)*time.Millisecond))
	}
	enqueue("run_later", t0.Add(time.Hour))
	// run_2 is held by another attempt; run_3 finished without its entry
	// being settled.
	if _, err := s.ClaimRun(ctx, "prj_b", "run_2", t0, time.Minute); err != nil {
		t.Fatal(err)
	}
	c3, err := s.ClaimRun(ctx, "prj_b", "run_3", t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c3.Status = automation.RunFailed // a FAILED run keeps its entry
	if err := s.FinishRun(ctx, c3); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.ClaimDue(ctx, t0, time.Minute); err != nil || !ok {
		t.Fatalf("ClaimDue = %v, %v", ok, err)
	} // takes run_1

	es, err := s.ClaimDueBatch(ctx, t0.Add(10*time.Millisecond), time.Minute, 3)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range es {
		ids = append(ids, e.RunID)
	}
	if len(es) != 3 || ids[0] != "run_2" || ids[1] != "run_3" || ids[2] != "run_4" {
		t.Fatalf("batch claim = %v; want run_2, run_3, run_4 (run_1 leased, at most 3)", ids)
	}
	if es[0].Run != nil || es[1].Run != nil {
		t.Fatalf("runs held or final came claimed: %+v, %+v", es[0].Run, es[1].Run)
	}
	if r := es[2].Run; r == nil || r.ID != "run_4" || r.Attempts != 1 || r.LeaseToken == "" || r.Interrupted != 0 || es[2].Claims != 1 {
		t.Fatalf("run_4's entry = %+v, run %+v; want its run claimed for attempt 1", es[2], r)
	}
	if _, err := s.ClaimRun(ctx, "prj_b", "run_4", t0.Add(10*time.Millisecond), time.Minute); !automation.IsRunClaimed(err) {
		t.Fatalf("ClaimRun after the batch claim = %v; want RUN_CLAIMED", err)
	}
	es, err = s.ClaimDueBatch(ctx, t0.Add(10*time.Millisecond), time.Minute, 10)
	if err != nil || len(es) != 1 || es[0].RunID != "run_5" || es[0].Run == nil {
		t.Fatalf("second batch claim = %+v, %v; want run_5 alone (run_later is not due)", es, err)
	}
	if es, err := s.ClaimDueBatch(ctx, t0.Add(10*time.Millisecond), time.Minute, 10); err != nil || len(es) != 0 {
		t.Fatalf("claim with nothing due = %+v, %v; want none", es, err)
	}
}
