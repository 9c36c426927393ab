package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"flowservice/pkg/automation"
)

// finishedRun is a new run of f as its first attempt left it, final:
// what a receiver hands to FinishedRuns.InsertFinishedRun.
func finishedRun(f automation.Flow, created time.Time, status automation.RunStatus) automation.Run {
	r := newRun(f, created)
	started, fin, d := created.Add(time.Millisecond), created.Add(3*time.Millisecond), int64(2)
	r.Status, r.Attempts = status, 1
	r.Started, r.Finished, r.DurationMs = &started, &fin, &d
	r.Steps = []automation.StepResult{{Name: "shape", Type: automation.StepSet, Status: automation.StepSucceeded,
		Output: json.RawMessage(`{"ok":true}`), StartedAt: &started, FinishedAt: &fin, Attempts: 1}}
	switch status {
	case automation.RunSucceeded:
		r.Response = &automation.RunResponse{StatusCode: 201, Body: json.RawMessage(`{"ok":true}`)}
	default:
		r.Error = "step shape: failed"
	}
	return r
}

// testRunInsertFinished: a run stored final in one write reads back as
// written, counts in its flow's stats as FinishRun counts it, leaves
// nothing to claim, and refuses a taken ID or a deleted flow without a
// change. It is the same record as a run created claimed and finished.
func testRunInsertFinished(t *testing.T, env RunEnv) {
	if env.InsertFinished == nil {
		t.Skip("the adapter stores no run final at creation")
	}
	ctx := context.Background()
	f := runFixture(t, env)
	base := now()

	later := finishedRun(f, base.Add(2*time.Second), automation.RunSucceeded)
	must(t, "insert finished", env.InsertFinished(ctx, later))
	wantSame(t, "inserted finished run", getRun(t, env, later), later)
	older := finishedRun(f, base.Add(time.Second), automation.RunFailed) // older, stored later
	must(t, "insert finished", env.InsertFinished(ctx, older))
	must(t, "insert finished", env.InsertFinished(ctx, finishedRun(f, base, automation.RunTimeout)))
	fl := getFlow(t, env.Store, f.Project, f.ID)
	if fl.Stats.Finished != 3 || fl.Stats.Succeeded != 1 || fl.Stats.LastRun == nil || !fl.Stats.LastRun.Equal(later.Created) {
		t.Fatalf("stats = %+v, want 3 finished, 1 succeeded, last run %v", fl.Stats, later.Created)
	}

	// A taken ID changes nothing, whichever way the first run came.
	again := later
	again.Status, again.Error, again.Response = automation.RunFailed, "second", nil
	wantKind(t, "insert finished twice", env.InsertFinished(ctx, again), automation.ErrConflict, "RUN_EXISTS")
	wantKind(t, "create an ID inserted finished", env.Create(ctx, newRunWithID(f, later.ID)), automation.ErrConflict, "RUN_EXISTS")
	queued := newRun(f, now())
	must(t, "create run", env.Create(ctx, queued))
	wantKind(t, "insert finished over a queued run", env.InsertFinished(ctx, finishedRunWithID(queued)), automation.ErrConflict, "RUN_EXISTS")
	wantSame(t, "run after a refused insert", getRun(t, env, later), later)
	if fl2 := getFlow(t, env.Store, f.Project, f.ID); fl2.Stats.Finished != 3 || fl2.Stats.Succeeded != 1 || !fl2.Stats.LastRun.Equal(later.Created) {
		t.Fatalf("stats after refused inserts = %+v, want %+v", fl2.Stats, fl.Stats)
	}

	// Final: nothing to claim or finish again.
	_, err := env.Runs.ClaimRun(ctx, f.Project, later.ID, now(), time.Minute)
	wantKind(t, "claim an inserted finished run", err, automation.ErrConflict, "RUN_FINISHED")
	wantKind(t, "finish an inserted finished run", env.Runs.FinishRun(ctx, again), automation.ErrConflict, "RUN_FINISHED")

	// A flow deleted meanwhile: no run outlives it.
	gone := flowBuilderWebhook(f.Project, "gone", now())
	orphan := finishedRun(gone, now(), automation.RunSucceeded)
	wantKind(t, "insert finished for a flow that is gone", env.InsertFinished(ctx, orphan), automation.ErrNotFound, "")
	_, err = env.Runs.Run(ctx, f.Project, gone.ID, orphan.ID)
	wantKind(t, "run of a flow that is gone", err, automation.ErrNotFound, "RUN_NOT_FOUND")

	notFinal := newRun(f, now())
	if err := env.InsertFinished(ctx, notFinal); err == nil {
		t.Fatal("insert finished of a RUNNING run: no error")
	}
	_, err = env.Runs.Run(ctx, f.Project, f.ID, notFinal.ID)
	wantKind(t, "a RUNNING run refused", err, automation.ErrNotFound, "RUN_NOT_FOUND")

	// The record is the one the usual path leaves: created claimed by its
	// first attempt, then finished by it.
	if env.CreateClaimed == nil {
		return
	}
	direct := finishedRun(f, now(), automation.RunSucceeded)
	usual := newRunWithID(f, automation.NewID(automation.PrefixRun))
	usual.Created = direct.Created
	c, err := env.CreateClaimed(ctx, usual, now(), time.Minute)
	must(t, "create claimed", err)
	fin := direct
	fin.ID, fin.LeaseToken = c.ID, c.LeaseToken
	must(t, "finish claimed", env.Runs.FinishRun(ctx, fin))
	must(t, "insert finished", env.InsertFinished(ctx, direct))
	wantSame(t, "a run inserted finished beside one created claimed and finished",
		getRun(t, env, direct), getRun(t, env, fin), cmpopts.IgnoreFields(automation.Run{}, "ID"))
}

func newRunWithID(f automation.Flow, id string) automation.Run {
	r := newRun(f, now())
	r.ID = id
	return r
}

// finishedRunWithID is a final version of r, under r's ID.
func finishedRunWithID(r automation.Run) automation.Run {
	f := automation.Flow{ID: r.FlowID, Project: r.Project}
	out := finishedRun(f, r.Created, automation.RunSucceeded)
	out.ID = r.ID
	return out
}
