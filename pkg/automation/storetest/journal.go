package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"

	"flowservice/pkg/automation"
)

// testRunJournalAppend: AppendSteps adds what changed to a claimed
// attempt's journal; every read returns the run with its entries folded in
// and counted (JournalLen); a stale attempt appends nothing; a release
// writes the run whole and empties the journal, whose old entries are never
// read again; the finish keeps the last results.
func testRunJournalAppend(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f, r := storedRun(t, env)
	t0, lease := now(), time.Minute
	a, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0, lease)
	must(t, "claim", err)
	if a.JournalLen != 0 {
		t.Fatalf("first claim: JournalLen %d, want 0", a.JournalLen)
	}
	// A FOR_EACH of three items begins (entry 1), then its items finish
	// one by one (entries 2, 3).
	loop := func(done int, tag string) []automation.StepResult {
		st := automation.StepResult{Name: "each", Type: automation.StepForEach, Status: automation.StepSkipped,
			ItemsJournal: &automation.ItemsJournal{Count: 3, SHA256: "00", Items: json.RawMessage(`[1,2,3]`)}}
		for i := range 3 {
			it := automation.Iteration{Index: i, Status: automation.StepSkipped,
				Steps: []automation.StepResult{{Name: "call", Type: automation.StepHTTP, Status: automation.StepSkipped}}}
			if i < done {
				it.Status = automation.StepSucceeded
				it.Steps[0].Status, it.Steps[0].Attempts = automation.StepSucceeded, 1
				it.Steps[0].Output = json.RawMessage(fmt.Sprintf(`{"item":%d,"by":%q}`, i, tag))
			}
			st.Iterations = append(st.Iterations, it)
		}
		return []automation.StepResult{{Name: "first", Type: automation.StepCode, Status: automation.StepSucceeded,
			Output: json.RawMessage(`{"ok":true}`), Attempts: 1}, st}
	}
	appendAll := func(who string, c *automation.Run, from []automation.StepResult, steps ...[]automation.StepResult) {
		t.Helper()
		for _, s := range steps {
			p := automation.DiffSteps(automation.PatchRootSteps, from, s)
			must(t, who+" appends", env.Runs.AppendSteps(ctx, *c, p))
			c.Steps, c.JournalLen, from = s, c.JournalLen+1, s
		}
	}
	appendAll("the first attempt", &a, a.Steps, loop(0, "a"), loop(1, "a"), loop(2, "a"))
	got := getRun(t, env, r)
	wantSame(t, "run read with its journal", got, a)

	// The attempt dies; the next claim folds the three entries.
	b, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0.Add(lease+time.Millisecond), lease)
	must(t, "claim after the crash", err)
	if b.JournalLen != 3 {
		t.Fatalf("claim after the crash: JournalLen %d, want 3", b.JournalLen)
	}
	wantSame(t, "claimed run", b, a, cmpopts.IgnoreFields(automation.Run{}, "Attempts"))
	stale := a
	err = env.Runs.AppendSteps(ctx, stale, automation.DiffSteps(automation.PatchRootSteps, a.Steps, loop(3, "stale")))
	wantKind(t, "append of the stale attempt", err, automation.ErrConflict, automation.CodeRunLeaseLost)

	appendAll("the second attempt", &b, b.Steps, loop(3, "b"))
	// Released whole: the next claim starts a journal of its own.
	must(t, "release", env.Runs.ReleaseRun(ctx, b))
	c, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0.Add(2*lease), lease)
	must(t, "claim after the release", err)
	if c.JournalLen != 0 {
		t.Fatalf("claim after the release: JournalLen %d, want 0", c.JournalLen)
	}
	wantSame(t, "released run", c.Steps, b.Steps)
	// One entry over the four the store may still keep: only it counts.
	changed := loop(3, "b")
	changed[0].Output = json.RawMessage(`{"ok":"again"}`)
	appendAll("the third attempt", &c, c.Steps, changed)
	d, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0.Add(3*lease+time.Millisecond), lease)
	must(t, "claim after the third attempt", err)
	if d.JournalLen != 1 {
		t.Fatalf("claim after the third attempt: JournalLen %d, want 1", d.JournalLen)
	}
	wantSame(t, "run after a release and one more entry", d.Steps, changed)

	d.Status = automation.RunSucceeded
	must(t, "finish", env.Runs.FinishRun(ctx, d))
	final := getRun(t, env, r)
	if final.JournalLen != 0 || final.Status != automation.RunSucceeded {
		t.Fatalf("finished run: status %s, JournalLen %d", final.Status, final.JournalLen)
	}
	wantSame(t, "finished run's steps", final.Steps, changed)
}
