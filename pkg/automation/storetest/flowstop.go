package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// testRunsStopWithFlow: once a flow is stored with StoppedAt (disabled), a
// journal write of a run created until then is refused with FlowStopped
// and writes nothing, while a run created after it journals as before; the
// flow reads back with StoppedAt.
func testRunsStopWithFlow(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f, old := storedRun(t, env)
	lease := time.Minute
	a, err := env.Runs.ClaimRun(ctx, f.Project, old.ID, now(), lease)
	must(t, "claim", err)
	step := func(tag string) []automation.StepResult {
		return []automation.StepResult{{Name: "call", Type: automation.StepHTTP, Status: automation.StepSucceeded,
			Attempts: 1, Output: json.RawMessage(`{"by":"` + tag + `"}`)}}
	}
	must(t, "journal before the flow stops", env.Runs.AppendSteps(ctx, a, automation.DiffSteps(automation.PatchRootSteps, a.Steps, step("before"))))
	a.Steps, a.JournalLen = step("before"), a.JournalLen+1

	stored, err := env.Store.Flow(ctx, f.Project, f.ID)
	must(t, "read flow", err)
	stoppedAt := old.Created.Add(time.Second)
	stored.Status, stored.StoppedAt, stored.Version = automation.FlowInactive, &stoppedAt, stored.Version+1
	must(t, "disable flow", env.Store.PutFlow(ctx, stored))
	back, err := env.Store.Flow(ctx, f.Project, f.ID)
	must(t, "read flow again", err)
	if back.StoppedAt == nil || !back.StoppedAt.Equal(stoppedAt) {
		t.Fatalf("flow read back with StoppedAt %v, want %v", back.StoppedAt, stoppedAt)
	}

	err = env.Runs.AppendSteps(ctx, a, automation.DiffSteps(automation.PatchRootSteps, a.Steps, step("after")))
	wantKind(t, "journal after the flow stopped", err, automation.ErrConflict, automation.CodeFlowStopped)
	if got := getRun(t, env, old); got.JournalLen != 1 {
		t.Errorf("refused journal write changed the run: JournalLen %d, want 1", got.JournalLen)
	}

	// A run of the disabled flow created after it stopped (a test run, or
	// after it is enabled again) is not stopped.
	later := newRun(f, stoppedAt.Add(time.Millisecond))
	must(t, "create later run", env.Create(ctx, later))
	b, err := env.Runs.ClaimRun(ctx, f.Project, later.ID, now(), lease)
	must(t, "claim later run", err)
	must(t, "journal of the later run", env.Runs.AppendSteps(ctx, b, automation.DiffSteps(automation.PatchRootSteps, b.Steps, step("later"))))
}
