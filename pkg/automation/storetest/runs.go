package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// RunEnv is a store with its run store, as an adapter wires them.
type RunEnv struct {
	Store automation.Store
	Runs  automation.RunStore
	// Create records a new RUNNING run: the store half of the adapter's
	// RunQueue.Enqueue (embedded: Enqueue itself; AWS: the run item write
	// that precedes the SQS message).
	Create func(ctx context.Context, r automation.Run) error
	// CreateClaimed records a new RUNNING run claimed for its first attempt
	// (automation.InlineQueue.EnqueueClaimed), or is nil where the adapter
	// has no such fast path (AWS): its contract is then skipped.
	CreateClaimed func(ctx context.Context, r automation.Run, now time.Time, lease time.Duration) (automation.Run, error)
	// InsertFinished stores a new run final (automation.FinishedRuns), or
	// is nil where the adapter has no such path (AWS): skipped then.
	InsertFinished func(ctx context.Context, r automation.Run) error
}

// RunRuns runs the run store contract against the environment open makes.
// open must return empty stores each call and arrange its own cleanup.
func RunRuns(t *testing.T, open func(t *testing.T) RunEnv) {
	t.Run("RunGet", func(t *testing.T) { testRunGet(t, open(t)) })
	t.Run("RunClaim", func(t *testing.T) { testRunClaim(t, open(t)) })
	t.Run("RunClaimRace", func(t *testing.T) { testRunClaimRace(t, open(t)) })
	t.Run("RunFencing", func(t *testing.T) { testRunFencing(t, open(t)) })
	t.Run("RunCrashes", func(t *testing.T) { testRunCrashes(t, open(t)) })
	t.Run("RunJournal", func(t *testing.T) { testRunJournal(t, open(t)) })
	t.Run("RunJournalInternals", func(t *testing.T) { testRunJournalInternals(t, open(t)) })
	t.Run("RunFinishStats", func(t *testing.T) { testRunFinishStats(t, open(t)) })
	t.Run("RunCreateClaimed", func(t *testing.T) { testRunCreateClaimed(t, open(t)) })
	t.Run("RunInsertFinished", func(t *testing.T) { testRunInsertFinished(t, open(t)) })
	t.Run("ListRuns", func(t *testing.T) { testListRuns(t, open(t)) })
	t.Run("RunsJSON", func(t *testing.T) { testRunsJSON(t, open(t)) })
	t.Run("ListRunSummaries", func(t *testing.T) { testListRunSummaries(t, open(t)) })
	t.Run("SearchRuns", func(t *testing.T) { testSearchRuns(t, open(t)) })
	t.Run("RunsGoWithFlow", func(t *testing.T) { testRunsGoWithFlow(t, open(t)) })
	t.Run("RunsPurge", func(t *testing.T) { testRunsPurge(t, open(t)) })
	t.Run("RunNestedResults", func(t *testing.T) { testRunNestedResults(t, open(t)) })
	t.Run("RunJournalAppend", func(t *testing.T) { testRunJournalAppend(t, open(t)) }) // journal.go
	t.Run("RunPinned", func(t *testing.T) { testRunPinned(t, open(t)) })               // versions.go
	t.Run("RunsStopWithFlow", func(t *testing.T) { testRunsStopWithFlow(t, open(t)) }) // flowstop.go
	t.Run("StoredBytes", func(t *testing.T) { testStoredBytes(t, open(t)) })           // usage.go
	t.Run("VersionsPruned", func(t *testing.T) { testVersionsPruned(t, open(t)) })     // quota.go
	t.Run("RunWaitingFor", func(t *testing.T) { testRunWaitingFor(t, open(t)) })       // slots.go
	t.Run("RunInsights", func(t *testing.T) { testRunInsights(t, open(t)) })           // insights.go
}

// runFixture is a project with one flow, stored.
func runFixture(t *testing.T, env RunEnv) automation.Flow {
	t.Helper()
	p := newProject("runs", now())
	must(t, "create project", env.Store.CreateProject(context.Background(), p))
	f := flowBuilderWebhook(p.ID, "hook", now())
	must(t, "create flow", env.Store.CreateFlow(context.Background(), f))
	return f
}

// storedRun is runFixture's flow and a new run of it, created.
func storedRun(t *testing.T, env RunEnv) (automation.Flow, automation.Run) {
	t.Helper()
	f := runFixture(t, env)
	r := newRun(f, now())
	must(t, "create run", env.Create(context.Background(), r))
	return f, r
}

func newRun(f automation.Flow, created time.Time) automation.Run {
	return automation.Run{
		ID: automation.NewID(automation.PrefixRun), Project: f.Project, FlowID: f.ID,
		Status: automation.RunRunning, Created: created, Steps: []automation.StepResult{},
		Trigger: automation.TriggerData{
			Method: "POST", Path: "/api/v1/webhooks/" + f.ID,
			Headers: map[string]string{"content-type": "application/json"},
			Query:   map[string]string{"a": "1"},
			Body:    json.RawMessage(`{"event":"push","data":{"ref":"main"}}`),
		},
	}
}

func getRun(t *testing.T, env RunEnv, r automation.Run) automation.Run {
	t.Helper()
	got, err := env.Runs.Run(context.Background(), r.Project, r.FlowID, r.ID)
	must(t, "get run "+r.ID, err)
	return got
}

func testRunGet(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f, r := storedRun(t, env)
	wantSame(t, "created run", getRun(t, env, r), r)
	dup := r
	dup.Trigger.Body = json.RawMessage(`{"second":true}`)
	wantKind(t, "create a run ID twice", env.Create(ctx, dup), automation.ErrConflict, "RUN_EXISTS")
	if again := getRun(t, env, r); jsonOf(t, again.Trigger) != jsonOf(t, r.Trigger) {
		t.Fatalf("a duplicate create changed the run: %s", jsonOf(t, again.Trigger))
	}
	_, err := env.Runs.Run(ctx, "prj_other", f.ID, r.ID)
	wantKind(t, "run of another project", err, automation.ErrNotFound, "RUN_NOT_FOUND")
	_, err = env.Runs.Run(ctx, f.Project, "flw_other", r.ID)
	wantKind(t, "run of another flow", err, automation.ErrNotFound, "RUN_NOT_FOUND")
	// A run a CALL_FLOW step started keeps its caller, whose end wakes.
	called := newRun(f, now())
	called.Trigger.Caller = &automation.Caller{RunID: r.ID, FlowID: f.ID, Wait: true, Secrets: []string{"s3cr3t-of-the-caller"}}
	must(t, "create called run", env.Create(ctx, called))
	wantSame(t, "called run", getRun(t, env, called), called)
	// The caller's secrets it masks are kept with it, and never listed.
	js, err := env.Runs.ListRunsJSON(ctx, f.Project, f.ID, automation.ListQuery{Limit: 10})
	must(t, "list runs as JSON", err)
	for _, j := range js.Items {
		if strings.Contains(string(j), "s3cr3t-of-the-caller") {
			t.Errorf("a run summary lists the caller's secrets: %s", j)
		}
	}
}

func testRunClaim(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f, r := storedRun(t, env)
	t0, lease := now(), time.Minute

	c1, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0, lease)
	must(t, "first claim", err)
	if c1.Attempts != 1 || c1.Status != automation.RunRunning || c1.FlowID != f.ID {
		t.Fatalf("first claim = attempts %d status %s flow %s", c1.Attempts, c1.Status, c1.FlowID)
	}
	_, err = env.Runs.ClaimRun(ctx, f.Project, r.ID, t0.Add(time.Second), lease)
	wantKind(t, "claim under a live lease", err, automation.ErrConflict, "RUN_CLAIMED")
	_, err = env.Runs.ClaimRun(ctx, "prj_other", r.ID, t0, lease)
	wantKind(t, "claim from another project", err, automation.ErrNotFound, "")

	// A crashed attempt: once its lease has passed, the run is claimable.
	c2, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0.Add(lease+time.Millisecond), lease)
	must(t, "claim after the lease", err)
	if c2.Attempts != 2 {
		t.Fatalf("attempts after the second claim = %d, want 2", c2.Attempts)
	}

	// A released attempt keeps its record and frees the run at once.
	c2.Error = "step call: 503 Service Unavailable"
	c2.Steps = []automation.StepResult{{Name: "call", Type: automation.StepHTTP, Status: automation.StepFailed, Error: "503"}}
	must(t, "release", env.Runs.ReleaseRun(ctx, c2))
	wantSame(t, "released run", getRun(t, env, r), c2)
	c3, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0.Add(lease+2*time.Millisecond), lease)
	must(t, "claim after release", err)
	if c3.Attempts != 3 {
		t.Fatalf("attempts = %d, want 3", c3.Attempts)
	}

	c3.Status = automation.RunSucceeded
	must(t, "finish", env.Runs.FinishRun(ctx, c3))
	_, err = env.Runs.ClaimRun(ctx, f.Project, r.ID, t0.Add(10*lease), lease)
	wantKind(t, "claim of a finished run", err, automation.ErrConflict, "RUN_FINISHED")
	_, err = env.Runs.ClaimRun(ctx, f.Project, "run_missing", t0, lease)
	wantKind(t, "claim of a missing run", err, automation.ErrNotFound, "")
}

// testRunClaimRace claims one run from many goroutines at once: exactly one
// wins, which is what makes redelivered messages harmless.
func testRunClaimRace(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f, r := storedRun(t, env)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	t0 := now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = env.Runs.ClaimRun(ctx, f.Project, r.ID, t0, time.Minute)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
		} else {
			wantKind(t, "losing claim", err, automation.ErrConflict, "RUN_CLAIMED")
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d simultaneous claims won, want exactly 1", won, n)
	}
}

func testRunFinishStats(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f := runFixture(t, env)
	base := now()
	finish := func(created time.Time, status automation.RunStatus) automation.Run {
		t.Helper()
		r := newRun(f, created)
		must(t, "create run", env.Create(ctx, r))
		c, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, now(), time.Minute)
		must(t, "claim", err)
		c.Status = status
		fin := created.Add(5 * time.Millisecond)
		d := int64(5)
		c.Started, c.Finished, c.DurationMs = &created, &fin, &d
		c.Response = &automation.RunResponse{StatusCode: 202, Body: json.RawMessage(`{"ok":"yes"}`)}
		must(t, "finish", env.Runs.FinishRun(ctx, c))
		return c
	}
	later := finish(base.Add(2*time.Second), automation.RunSucceeded)
	finish(base.Add(time.Second), automation.RunFailed) // older, finishing later
	finish(base, automation.RunTimeout)

	wantSame(t, "finished run", getRun(t, env, later), later)
	fl := getFlow(t, env.Store, f.Project, f.ID)
	if fl.Stats.Finished != 3 || fl.Stats.Succeeded != 1 || fl.Stats.LastRun == nil || !fl.Stats.LastRun.Equal(later.Created) {
		t.Fatalf("stats = %+v, want 3 finished, 1 succeeded, last run %v", fl.Stats, later.Created)
	}

	// Finishing again changes nothing: stats count each run once.
	again := later
	again.Status = automation.RunFailed
	err := env.Runs.FinishRun(ctx, again)
	wantKind(t, "finish twice", err, automation.ErrConflict, "RUN_FINISHED")
	if fl2 := getFlow(t, env.Store, f.Project, f.ID); fl2.Stats.Finished != 3 || fl2.Stats.Succeeded != 1 {
		t.Fatalf("stats after a second finish = %+v", fl2.Stats)
	}
	if got := getRun(t, env, later); got.Status != automation.RunSucceeded {
		t.Fatalf("a second finish overwrote the run: %s", got.Status)
	}
}

func testListRuns(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f := runFixture(t, env)
	other := flowBuilderWebhook(f.Project, "other", now())
	must(t, "create other flow", env.Store.CreateFlow(ctx, other))
	base := now()
	var want []string // newest first
	var failed []string
	for i := range 12 {
		r := newRun(f, base.Add(time.Duration(i)*time.Millisecond))
		must(t, "create run", env.Create(ctx, r))
		must(t, "create other run", env.Create(ctx, newRun(other, base)))
		if i%3 == 0 {
			c, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, now(), time.Minute)
			must(t, "claim", err)
			c.Status = automation.RunFailed
			must(t, "finish", env.Runs.FinishRun(ctx, c))
			failed = append([]string{r.ID}, failed...)
		}
		want = append([]string{r.ID}, want...)
	}
	for _, limit := range []int{5, 12, 100} {
		items, sizes := walk(t, "list runs", func(after string) (automation.Page[automation.Run], error) {
			return env.Runs.ListRuns(ctx, f.Project, f.ID, automation.ListQuery{Limit: limit, After: after})
		})
		if got := runIDs(items); !slices.Equal(got, want) {
			t.Fatalf("limit %d: runs %v, want newest first %v", limit, got, want)
		}
		if !slices.Equal(sizes, pageSizes(len(want), limit)) {
			t.Fatalf("limit %d: page sizes %v", limit, sizes)
		}
	}
	items, sizes := walk(t, "list failed runs", func(after string) (automation.Page[automation.Run], error) {
		return env.Runs.ListRuns(ctx, f.Project, f.ID, automation.ListQuery{Limit: 2, After: after, Status: string(automation.RunFailed)})
	})
	if got := runIDs(items); !slices.Equal(got, failed) || !slices.Equal(sizes, pageSizes(len(failed), 2)) {
		t.Fatalf("failed runs %v in pages %v, want %v in full pages", got, sizes, failed)
	}
	page, err := env.Runs.ListRuns(ctx, "prj_other", f.ID, automation.ListQuery{Limit: 10})
	must(t, "list another project's", err)
	if len(page.Items) != 0 {
		t.Fatalf("another project sees %d runs", len(page.Items))
	}
}

// testRunsJSON: ListRunsJSON and SearchRunsJSON return, item for item
// and byte for byte, json.Marshal of the summaries ListRuns and SearchRuns
// return for the same query, with the same next position: for runs
// waiting, claimed (attempts counted since their document was written),
// failed, and with text that JSON escapes.
func testRunsJSON(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f := runFixture(t, env)
	base := now()
	for i := range 7 {
		r := newRun(f, base.Add(time.Duration(i)*time.Millisecond))
		r.Trigger.Headers["attempts"] = `9 "attempts":9 <b>&amp;` + "\u2028\x01"
		if i == 3 {
			r.Trigger.Headers["raw"] = "\xff" // not UTF-8: JSON has it as U+FFFD
		}
		r.Trigger.Query["q"] = `{"attempts":8}`
		must(t, "create run", env.Create(ctx, r))
		switch i % 3 {
		case 1:
			_, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, now(), time.Minute)
			must(t, "claim", err)
		case 2:
			c, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, now(), time.Minute)
			must(t, "claim", err)
			c.Status, c.Error = automation.RunFailed, "step call: <refused> \"quoted\""
			fin := now()
			c.Steps = []automation.StepResult{{Name: "call", Type: automation.StepHTTP, Status: automation.StepFailed,
				Output: json.RawMessage(`{"status":500}`), Error: "500", StartedAt: &base, FinishedAt: &fin, Attempts: 3,
				Logs: []string{"attempts: 3"}}}
			c.Response = &automation.RunResponse{StatusCode: 502, Body: json.RawMessage(`{"error":"x"}`),
				Headers: map[string]string{"attempts": "2"}}
			must(t, "finish", env.Runs.FinishRun(ctx, c))
		}
	}
	same := func(what string, runs automation.Page[automation.Run], err error, js automation.Page[json.RawMessage], jerr error) string {
		t.Helper()
		must(t, what, err)
		must(t, what+" as JSON", jerr)
		if len(js.Items) != len(runs.Items) || js.Next != runs.Next {
			t.Fatalf("%s: %d items as JSON, next %q; want %d, next %q", what, len(js.Items), js.Next, len(runs.Items), runs.Next)
		}
		for i, r := range runs.Items {
			want, err := json.Marshal(r)
			must(t, "encode", err)
			if string(js.Items[i]) != string(want) {
				t.Fatalf("%s: item %d as JSON\n%s\nwant\n%s", what, i, js.Items[i], want)
			}
		}
		return runs.Next
	}
	after := ""
	for {
		q := automation.ListQuery{Limit: 3, After: after}
		p, err := env.Runs.ListRuns(ctx, f.Project, f.ID, q)
		j, jerr := env.Runs.ListRunsJSON(ctx, f.Project, f.ID, q)
		if after = same("list", p, err, j, jerr); after == "" {
			break
		}
	}
	q := automation.ListQuery{Limit: 10, Status: string(automation.RunFailed)}
	p, err := env.Runs.ListRuns(ctx, f.Project, f.ID, q)
	j, jerr := env.Runs.ListRunsJSON(ctx, f.Project, f.ID, q)
	same("list failed", p, err, j, jerr)
	for _, rq := range []automation.RunQuery{
		{ListQuery: automation.ListQuery{Limit: 4}},
		{ListQuery: automation.ListQuery{Limit: 10, Status: string(automation.RunRunning)}, FlowID: f.ID},
		{ListQuery: automation.ListQuery{Limit: 4}, Since: base.Add(-time.Second), Until: base.Add(time.Hour)},
	} {
		p, err := env.Runs.SearchRuns(ctx, f.Project, rq)
		j, jerr := env.Runs.SearchRunsJSON(ctx, f.Project, rq)
		same("search", p, err, j, jerr)
	}
}

func testRunsGoWithFlow(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f, r := storedRun(t, env)
	must(t, "delete flow", env.Store.DeleteFlow(ctx, f.Project, f.ID))
	_, err := env.Runs.Run(ctx, f.Project, f.ID, r.ID)
	wantKind(t, "run of a deleted flow", err, automation.ErrNotFound, "")
	_, err = env.Runs.ClaimRun(ctx, f.Project, r.ID, now(), time.Minute)
	wantKind(t, "claim of a deleted flow's run", err, automation.ErrNotFound, "")
}

func testRunsPurge(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f := runFixture(t, env)
	base := now()
	old1, old2, fresh := newRun(f, base.Add(-48*time.Hour)), newRun(f, base.Add(-25*time.Hour)), newRun(f, base)
	for _, r := range []automation.Run{old1, old2, fresh} {
		must(t, "create run", env.Create(ctx, r))
	}
	n, err := env.Runs.DeleteRunsBefore(ctx, base.Add(-24*time.Hour), 1)
	must(t, "purge one", err)
	if n != 1 {
		t.Fatalf("purged %d with limit 1", n)
	}
	n, err = env.Runs.DeleteRunsBefore(ctx, base.Add(-24*time.Hour), 100)
	must(t, "purge rest", err)
	if n != 1 {
		t.Fatalf("purged %d more, want 1", n)
	}
	for _, r := range []automation.Run{old1, old2} {
		_, err := env.Runs.Run(ctx, f.Project, f.ID, r.ID)
		wantKind(t, "purged run", err, automation.ErrNotFound, "")
	}
	getRun(t, env, fresh)
}

func runIDs(rs []automation.Run) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}

// testRunFencing is the frozen attempt: attempt A pauses past its lease
// (a frozen Lambda, a stopped process), attempt B claims the run, and then
// A wakes and writes. While B holds the run, A's writes are refused
// (RUN_LEASE_LOST); once B finished, they are refused as RUN_FINISHED. B's
// result stands, and the flow's stats count the run once.
func testRunFencing(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f, r := storedRun(t, env)
	t0, lease := now(), time.Minute

	a, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0, lease)
	must(t, "claim A", err)
	b, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0.Add(lease+time.Millisecond), lease)
	must(t, "claim B after A's lease", err)
	if a.LeaseToken == "" || a.LeaseToken == b.LeaseToken {
		t.Fatalf("lease tokens A %q, B %q: want two different tokens", a.LeaseToken, b.LeaseToken)
	}

	// A wakes while B runs.
	staleRelease := a
	staleRelease.Error = "stale attempt"
	wantKind(t, "release by A while B holds the run", env.Runs.ReleaseRun(ctx, staleRelease), automation.ErrConflict, automation.CodeRunLeaseLost)
	staleFinish := a
	staleFinish.Status, staleFinish.Error = automation.RunTimeout, "stale attempt timed out"
	wantKind(t, "finish by A while B holds the run", env.Runs.FinishRun(ctx, staleFinish), automation.ErrConflict, automation.CodeRunLeaseLost)
	if got := getRun(t, env, r); got.Status != automation.RunRunning || got.Error != "" {
		t.Fatalf("a stale attempt's write reached the run: %s", jsonOf(t, got))
	}

	// B finishes; A's late writes are refused and change nothing.
	b.Status = automation.RunSucceeded
	b.Steps = []automation.StepResult{{Name: "call", Type: automation.StepHTTP, Status: automation.StepSucceeded}}
	must(t, "finish by B", env.Runs.FinishRun(ctx, b))
	wantKind(t, "finish by A after B", env.Runs.FinishRun(ctx, staleFinish), automation.ErrConflict, automation.CodeRunFinished)
	wantKind(t, "release by A after B", env.Runs.ReleaseRun(ctx, staleRelease), automation.ErrConflict, automation.CodeRunFinished)
	wantSame(t, "the run after the stale writes", getRun(t, env, r), b)
	if st := getFlow(t, env.Store, f.Project, f.ID).Stats; st.Finished != 1 || st.Succeeded != 1 {
		t.Fatalf("stats = %+v, want the run counted once, SUCCEEDED", st)
	}
}

// testRunCrashes counts attempts that never ended: each claim reports how
// many earlier claims were neither released nor finished (their process
// died, or they lost the lease), which is what lets the Service stop a run
// that kills its executor.
func testRunCrashes(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f, r := storedRun(t, env)
	at, lease := now(), time.Minute
	claim := func(wantInterrupted int) automation.Run {
		t.Helper()
		c, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, at, lease)
		must(t, "claim", err)
		if c.Interrupted != wantInterrupted {
			t.Fatalf("claim %d: interrupted = %d, want %d", c.Attempts, c.Interrupted, wantInterrupted)
		}
		at = at.Add(lease + time.Millisecond)
		return c
	}
	claim(0)
	claim(1) // the first attempt's lease ran out: it died
	c := claim(2)
	must(t, "release", env.Runs.ReleaseRun(ctx, c)) // an attempt that ended
	c = claim(2)
	c.Status = automation.RunFailed
	must(t, "finish", env.Runs.FinishRun(ctx, c))
	if got := getRun(t, env, r); got.Attempts != 4 {
		t.Fatalf("attempts = %d, want 4", got.Attempts)
	}
}

// testListRunSummaries: lists hold summaries (no trigger body, step
// outputs or response body; the single-run read has them), and a page ends
// early, with a cursor, once its summaries reach RunPageBudget bytes.
func testListRunSummaries(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f, r := storedRun(t, env)
	c, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, now(), time.Minute)
	must(t, "claim", err)
	c.Status = automation.RunSucceeded
	c.Steps = []automation.StepResult{{Name: "call", Type: automation.StepHTTP, Status: automation.StepSucceeded,
		Output: json.RawMessage(`{"status":200,"body":{"big":"output"}}`)}}
	c.Response = &automation.RunResponse{StatusCode: 200, Body: json.RawMessage(`{"answer":"kept in the run"}`)}
	must(t, "finish", env.Runs.FinishRun(ctx, c))

	page, err := env.Runs.ListRuns(ctx, f.Project, f.ID, automation.ListQuery{Limit: 10})
	must(t, "list runs", err)
	if len(page.Items) != 1 {
		t.Fatalf("%d runs listed, want 1", len(page.Items))
	}
	wantSame(t, "listed run", page.Items[0], c.Summary())
	if full := getRun(t, env, r); !equalJSON(full.Trigger.Body, r.Trigger.Body) || len(full.Steps) != 1 ||
		full.Steps[0].Output == nil || full.Response == nil || full.Response.Body == nil {
		t.Fatalf("the single-run read lost its large parts: %s", jsonOf(t, full))
	}

	// Summaries of ~200 KiB each (large headers): a page of 100 stops
	// early, and the pages still hold every run once.
	g := flowBuilderWebhook(f.Project, "big", now())
	must(t, "create flow", env.Store.CreateFlow(ctx, g))
	big := strings.Repeat("h", 200<<10)
	var want []string
	for i := range 8 {
		br := newRun(g, now().Add(time.Duration(i)*time.Millisecond))
		br.Trigger.Headers = map[string]string{"x-big": big}
		must(t, "create big run", env.Create(ctx, br))
		want = append([]string{br.ID}, want...)
	}
	items, sizes := walk(t, "list big runs", func(after string) (automation.Page[automation.Run], error) {
		return env.Runs.ListRuns(ctx, g.Project, g.ID, automation.ListQuery{Limit: 100, After: after})
	})
	if got := runIDs(items); !slices.Equal(got, want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	if len(sizes) < 2 {
		t.Fatalf("page sizes %v: want the first page cut by the byte budget", sizes)
	}
	for i, n := range sizes {
		if bytes := (n - 1) * (200 << 10); bytes >= automation.RunPageBudget {
			t.Fatalf("page %d holds %d runs of 200 KiB: over the budget", i, n)
		}
	}
}

// testRunJournal: RecordSteps makes an attempt's steps durable and keeps
// its claim; a stale attempt cannot journal; the next claim after a crash
// gets the journaled steps back (and counts the crash).
func testRunJournal(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f, r := storedRun(t, env)
	t0, lease := now(), time.Minute
	a, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0, lease)
	must(t, "claim", err)
	a.Steps = []automation.StepResult{{Name: "pay", Type: automation.StepHTTP, Status: automation.StepSucceeded,
		Output: json.RawMessage(`{"status":201,"body":{"charge":"ch_1"}}`)}}
	must(t, "record steps", env.Runs.RecordSteps(ctx, a))
	wantSame(t, "journaled run", getRun(t, env, r), a)
	_, err = env.Runs.ClaimRun(ctx, f.Project, r.ID, t0.Add(time.Second), lease)
	wantKind(t, "claim while the journaling attempt holds the run", err, automation.ErrConflict, automation.CodeRunClaimed)

	// The attempt dies; the next one resumes with the journal.
	b, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0.Add(lease+time.Millisecond), lease)
	must(t, "claim after the crash", err)
	if len(b.Steps) != 1 || !equalJSON(b.Steps[0].Output, a.Steps[0].Output) || b.Interrupted != 1 {
		t.Fatalf("claim after the crash: steps %s, interrupted %d; want the journal and 1", jsonOf(t, b.Steps), b.Interrupted)
	}
	stale := a
	stale.Steps = append(stale.Steps, automation.StepResult{Name: "late", Type: automation.StepHTTP, Status: automation.StepSucceeded})
	wantKind(t, "journal of the stale attempt", env.Runs.RecordSteps(ctx, stale), automation.ErrConflict, automation.CodeRunLeaseLost)
	if got := getRun(t, env, r); len(got.Steps) != 1 {
		t.Fatalf("a stale journal write reached the run: %s", jsonOf(t, got.Steps))
	}
}

// testRunJournalInternals: the journal's internal fields (a FOR_EACH's
// list, the outcome of a run whose onError steps run) come back with the
// next claim, and a final run keeps no onErrorOf.
func testRunJournalInternals(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f, r := storedRun(t, env)
	t0, lease := now(), time.Minute
	a, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0, lease)
	must(t, "claim", err)
	list := &automation.ItemsJournal{Count: 2, SHA256: strings.Repeat("ab", 32), Items: json.RawMessage(`["a","b"]`)}
	a.Steps = []automation.StepResult{{Name: "each", Type: automation.StepForEach, Status: automation.StepFailed, ItemsJournal: list,
		Iterations: []automation.Iteration{{Index: 0, Status: automation.StepSucceeded, Steps: []automation.StepResult{}}}}}
	a.Error, a.OnErrorOf = "step each: item 1 failed", automation.RunFailed
	a.OnErrorSteps = []automation.StepResult{{Name: "alert", Type: automation.StepHTTP, Status: automation.StepSucceeded, Output: json.RawMessage(`{"status":200}`)}}
	must(t, "record steps", env.Runs.RecordSteps(ctx, a))
	b, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, t0.Add(lease+time.Millisecond), lease)
	must(t, "claim after the crash", err)
	if b.Status != automation.RunRunning || b.OnErrorOf != automation.RunFailed || b.Error != a.Error || len(b.OnErrorSteps) != 1 ||
		len(b.Steps) != 1 || b.Steps[0].ItemsJournal == nil || b.Steps[0].ItemsJournal.Count != 2 ||
		b.Steps[0].ItemsJournal.SHA256 != list.SHA256 || !equalJSON(b.Steps[0].ItemsJournal.Items, list.Items) {
		t.Fatalf("claim after the crash: %s", jsonOf(t, b))
	}
	b.Status, b.OnErrorOf = automation.RunFailed, ""
	must(t, "finish", env.Runs.FinishRun(ctx, b))
	if got := getRun(t, env, r); got.OnErrorOf != "" || got.Status != automation.RunFailed {
		t.Fatalf("finished run: status %s, onErrorOf %q", got.Status, got.OnErrorOf)
	}
}

// testSearchRuns: a project's runs across its flows, newest first, by
// flow, status and creation window, in pages; another project's are never
// seen.
func testSearchRuns(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f := runFixture(t, env)
	g := flowBuilderWebhook(f.Project, "second", now())
	must(t, "create flow", env.Store.CreateFlow(ctx, g))
	other := newProject("other", now())
	must(t, "create project", env.Store.CreateProject(ctx, other))
	h := flowBuilderWebhook(other.ID, "theirs", now())
	must(t, "create their flow", env.Store.CreateFlow(ctx, h))

	base := now().Add(-time.Hour)
	type made struct {
		id, flow string
		failed   bool
		at       time.Time
	}
	var all []made // oldest first
	for i := range 10 {
		fl := f
		if i%2 == 1 {
			fl = g
		}
		r := newRun(fl, base.Add(time.Duration(i)*time.Minute))
		must(t, "create run", env.Create(ctx, r))
		failed := i%3 == 0
		if failed {
			c, err := env.Runs.ClaimRun(ctx, fl.Project, r.ID, now(), time.Minute)
			must(t, "claim", err)
			c.Status = automation.RunFailed
			must(t, "finish", env.Runs.FinishRun(ctx, c))
		}
		all = append(all, made{r.ID, fl.ID, failed, r.Created})
		must(t, "create their run", env.Create(ctx, newRun(h, r.Created)))
	}
	want := func(keep func(m made) bool) []string {
		var ids []string
		for i := len(all) - 1; i >= 0; i-- {
			if keep(all[i]) {
				ids = append(ids, all[i].id)
			}
		}
		return ids
	}
	tests := []struct {
		name string
		q    automation.RunQuery
		want []string
	}{
		{"project", automation.RunQuery{}, want(func(made) bool { return true })},
		{"failed", automation.RunQuery{ListQuery: automation.ListQuery{Status: string(automation.RunFailed)}},
			want(func(m made) bool { return m.failed })},
		{"flow", automation.RunQuery{FlowID: g.ID}, want(func(m made) bool { return m.flow == g.ID })},
		{"flow and status", automation.RunQuery{FlowID: f.ID, ListQuery: automation.ListQuery{Status: string(automation.RunRunning)}},
			want(func(m made) bool { return m.flow == f.ID && !m.failed })},
		{"window", automation.RunQuery{Since: all[2].at, Until: all[7].at},
			want(func(m made) bool { return !m.at.Before(all[2].at) && m.at.Before(all[7].at) })},
		{"since", automation.RunQuery{Since: all[8].at}, want(func(m made) bool { return !m.at.Before(all[8].at) })},
		{"until, failed", automation.RunQuery{Until: all[6].at, ListQuery: automation.ListQuery{Status: string(automation.RunFailed)}},
			want(func(m made) bool { return m.failed && m.at.Before(all[6].at) })},
	}
	for _, tt := range tests {
		for _, limit := range []int{3, 100} {
			items, _ := walk(t, "search runs "+tt.name, func(after string) (automation.Page[automation.Run], error) {
				q := tt.q
				q.Limit, q.After = limit, after
				return env.Runs.SearchRuns(ctx, f.Project, q)
			})
			if got := runIDs(items); !slices.Equal(got, tt.want) {
				t.Errorf("%s, pages of %d: runs %v, want %v", tt.name, limit, got, tt.want)
			}
		}
	}
}

// testRunCreateClaimed: a run created claimed is durable at once and held
// by the attempt that created it, exactly as after ClaimRun: other claims
// are refused while the lease holds, the attempt journals and finishes
// with its token (stats count it once), a duplicate ID changes nothing,
// and an attempt that died is counted by the claim after its lease.
func testRunCreateClaimed(t *testing.T, env RunEnv) {
	if env.CreateClaimed == nil {
		t.Skip("the adapter stores no run claimed at creation")
	}
	ctx := context.Background()
	f := runFixture(t, env)
	t0, lease := now(), time.Minute

	r := newRun(f, t0)
	c, err := env.CreateClaimed(ctx, r, t0, lease)
	must(t, "create claimed", err)
	if c.Attempts != 1 || c.Interrupted != 0 || c.LeaseToken == "" || c.Status != automation.RunRunning || c.ID != r.ID {
		t.Fatalf("created claimed = id %s attempts %d interrupted %d token %q status %s; want the run, attempt 1 claimed",
			c.ID, c.Attempts, c.Interrupted, c.LeaseToken, c.Status)
	}
	stored := getRun(t, env, r)
	want := r
	want.Attempts = 1
	wantSame(t, "stored claimed run", stored, want)

	_, err = env.Runs.ClaimRun(ctx, f.Project, r.ID, t0.Add(time.Second), lease)
	wantKind(t, "claim under the creator's lease", err, automation.ErrConflict, "RUN_CLAIMED")
	_, err = env.CreateClaimed(ctx, r, t0, lease)
	wantKind(t, "create claimed twice", err, automation.ErrConflict, "RUN_EXISTS")
	wantKind(t, "create an ID created claimed", env.Create(ctx, r), automation.ErrConflict, "RUN_EXISTS")

	stale := c
	stale.LeaseToken = "lease_not_this_one"
	stale.Status = automation.RunSucceeded
	wantKind(t, "finish with another token", env.Runs.FinishRun(ctx, stale), automation.ErrConflict, automation.CodeRunLeaseLost)

	c.Steps = []automation.StepResult{{Name: "call", Type: automation.StepHTTP, Status: automation.StepSucceeded, Output: json.RawMessage(`{"status":200}`)}}
	must(t, "journal with the creator's token", env.Runs.RecordSteps(ctx, c))
	c.Status = automation.RunSucceeded
	must(t, "finish with the creator's token", env.Runs.FinishRun(ctx, c))
	wantSame(t, "finished run", getRun(t, env, r), c)
	if st := getFlow(t, env.Store, f.Project, f.ID).Stats; st.Finished != 1 || st.Succeeded != 1 {
		t.Fatalf("stats = %+v, want the run counted once", st)
	}

	// A creator that died: the next claim, after the lease, counts it.
	dead := newRun(f, t0)
	_, err = env.CreateClaimed(ctx, dead, t0, lease)
	must(t, "create claimed", err)
	next, err := env.Runs.ClaimRun(ctx, f.Project, dead.ID, t0.Add(lease+time.Millisecond), lease)
	must(t, "claim after the creator's lease", err)
	if next.Attempts != 2 || next.Interrupted != 1 {
		t.Fatalf("claim after a dead creator = attempts %d interrupted %d; want 2 and 1", next.Attempts, next.Interrupted)
	}
}
