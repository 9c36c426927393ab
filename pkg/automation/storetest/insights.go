package storetest

import (
	"context"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// finishAt creates, claims and finishes a run of f that finished at fin
// after ms milliseconds of execution, with status.
func finishAt(t *testing.T, env RunEnv, f automation.Flow, fin time.Time, ms int64, status automation.RunStatus) automation.Run {
	t.Helper()
	ctx := context.Background()
	started := fin.Add(-time.Duration(ms) * time.Millisecond)
	r := newRun(f, started.Add(-time.Second))
	must(t, "create run", env.Create(ctx, r))
	c, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, started, time.Hour)
	must(t, "claim", err)
	c.Status, c.Started, c.Finished, c.DurationMs = status, &started, &fin, &ms
	if status != automation.RunSucceeded {
		c.Error = "step a: failed"
	}
	must(t, "finish", env.Runs.FinishRun(ctx, c))
	return c
}

// cellOf is what a store should hold for an hour: counts by status, runs by
// duration bin.
type cellOf struct {
	ok, failed, timeout int64
	bins                map[int]int64
}

func wantCells(t *testing.T, what string, got []automation.InsightCell, hours []time.Time, want []cellOf) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hours %+v, want %d", what, len(got), got, len(want))
	}
	for i, c := range got {
		w := want[i]
		if !c.Hour.Equal(hours[i]) {
			t.Errorf("%s: hour %d is %v, want %v", what, i, c.Hour, hours[i])
		}
		if c.Succeeded != w.ok || c.Failed != w.failed || c.Timeout != w.timeout {
			t.Errorf("%s: hour %v counts %d/%d/%d, want %d/%d/%d", what, c.Hour,
				c.Succeeded, c.Failed, c.Timeout, w.ok, w.failed, w.timeout)
		}
		var wantBins [automation.DurationBinCount]int64
		for b, n := range w.bins {
			wantBins[b] = n
		}
		if c.Bins != wantBins {
			t.Errorf("%s: hour %v bins %v, want %v", what, c.Hour, c.Bins, wantBins)
		}
	}
}

// testRunInsights: every finish adds the run, once, to its flow's hour of
// finishing: its status counter and its duration's bin. A span reads
// exactly the hours that begin in it, oldest first; another project reads
// nothing of the flow, and another flow's runs count for that flow alone.
// A finish that is refused (the run is final already) adds nothing, and a
// run stored final at once (InsertFinishedRun) counts like a finished one.
func testRunInsights(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f := runFixture(t, env)
	other := flowBuilderWebhook(f.Project, "other", now())
	must(t, "create other flow", env.Store.CreateFlow(ctx, other))
	// Whole hours of the past, well inside the retention, so that no
	// finish below prunes another's hour.
	h0 := now().Truncate(time.Hour).Add(-6 * time.Hour)
	h2 := h0.Add(2 * time.Hour)

	finishAt(t, env, f, h0.Add(time.Minute), 12, automation.RunSucceeded)                     // bin 1 (≤ 15 ms)
	finishAt(t, env, f, h0.Add(30*time.Minute), 40, automation.RunSucceeded)                  // bin 4 (≤ 50 ms)
	failed := finishAt(t, env, f, h0.Add(59*time.Minute), 1200, automation.RunFailed)         // bin 13 (≤ 1.5 s)
	finishAt(t, env, f, h0.Add(59*time.Minute+59*time.Second), 90_000, automation.RunTimeout) // bin 24 (≤ 100 s)
	finishAt(t, env, f, h2, 5, automation.RunSucceeded)                                       // bin 0, the hour's first instant
	finishAt(t, env, f, h2.Add(time.Minute), 10, automation.RunSucceeded)                     // bin 0 (≤ 10 ms, inclusive)
	finishAt(t, env, other, h0.Add(time.Minute), 7, automation.RunFailed)                     // another flow's

	// A second finish of a final run is refused and counts nothing.
	again := failed
	again.Status = automation.RunSucceeded
	wantKind(t, "finish twice", env.Runs.FinishRun(ctx, again), automation.ErrConflict, "RUN_FINISHED")

	hourH0 := cellOf{ok: 2, failed: 1, timeout: 1, bins: map[int]int64{1: 1, 4: 1, 13: 1, 24: 1}}
	hourH2 := cellOf{ok: 2, bins: map[int]int64{0: 2}}
	got, err := env.Store.FlowInsights(ctx, f.Project, f.ID, h0.Add(-time.Hour), h2.Add(time.Hour))
	must(t, "insights", err)
	wantCells(t, "the whole span", got, []time.Time{h0, h2}, []cellOf{hourH0, hourH2})

	got, err = env.Store.FlowInsights(ctx, f.Project, f.ID, h0.Add(time.Hour), h2.Add(time.Hour))
	must(t, "insights", err)
	wantCells(t, "from the hour after h0", got, []time.Time{h2}, []cellOf{hourH2})
	got, err = env.Store.FlowInsights(ctx, f.Project, f.ID, h0, h2)
	must(t, "insights", err)
	wantCells(t, "until h2, which is left out", got, []time.Time{h0}, []cellOf{hourH0})
	// A span that starts inside an hour leaves that hour out: it began
	// before the span.
	got, err = env.Store.FlowInsights(ctx, f.Project, f.ID, h0.Add(time.Minute), h2.Add(time.Minute))
	must(t, "insights", err)
	wantCells(t, "from inside h0", got, []time.Time{h2}, []cellOf{hourH2})

	got, err = env.Store.FlowInsights(ctx, f.Project, other.ID, h0.Add(-time.Hour), h2.Add(time.Hour))
	must(t, "insights of the other flow", err)
	wantCells(t, "the other flow", got, []time.Time{h0}, []cellOf{{failed: 1, bins: map[int]int64{0: 1}}})
	got, err = env.Store.FlowInsights(ctx, "prj_other", f.ID, h0.Add(-time.Hour), h2.Add(time.Hour))
	must(t, "insights of another project", err)
	wantCells(t, "another project", got, nil, nil)

	if env.InsertFinished != nil {
		r := finishedRun(f, h2.Add(5*time.Minute), automation.RunFailed) // 2 ms: bin 0
		must(t, "insert finished", env.InsertFinished(ctx, r))
		got, err = env.Store.FlowInsights(ctx, f.Project, f.ID, h2, h2.Add(time.Hour))
		must(t, "insights", err)
		wantCells(t, "with a run stored final", got, []time.Time{h2}, []cellOf{{ok: 2, failed: 1, bins: map[int]int64{0: 3}}})
	}
}
