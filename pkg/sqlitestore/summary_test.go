package sqlitestore_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestRunSummaryColumn follows runs through every write of their document
// (enqueue, claim, journal, release, finish) and checks after each that
// the run list and the search show exactly the summary of the run as the
// single-run read returns it; then that rows without the summary column
// (written before it existed) list the same, cut down from their document.
func TestRunSummaryColumn(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "summary.db")
	s := openAt(t, path)
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	f := flow("prj_s", "POST", "summary/hook", t0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	newRun := func(i int) automation.Run {
		return automation.Run{ID: automation.NewID(automation.PrefixRun), Project: f.Project, FlowID: f.ID,
			Status: automation.RunRunning, Created: t0.Add(time.Duration(i) * time.Millisecond),
			Trigger: automation.TriggerData{Method: "POST", Path: "/hook", Headers: map[string]string{"x-n": "1"},
				Query: map[string]string{"q": "v"}, Body: json.RawMessage(`{"big":"body"}`), RawBody: `{"big": "body"}`}}
	}
	var ids []string // newest first
	check := func(what string) {
		t.Helper()
		want := make([]automation.Run, len(ids))
		for i, id := range ids {
			r, err := s.Run(ctx, f.Project, f.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			want[i] = r.Summary()
		}
		list, err := s.ListRuns(ctx, f.Project, f.ID, automation.ListQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		search, err := s.SearchRuns(ctx, f.Project, automation.RunQuery{ListQuery: automation.ListQuery{Limit: 100}})
		if err != nil {
			t.Fatal(err)
		}
		window, err := s.SearchRuns(ctx, f.Project, automation.RunQuery{ListQuery: automation.ListQuery{Limit: 100},
			Since: t0, Until: t0.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		// A window search is newest first by creation time, then by
		// insertion; the others by insertion alone.
		byCreated := slices.Clone(want)
		slices.SortStableFunc(byCreated, func(a, b automation.Run) int { return b.Created.Compare(a.Created) })
		for name, got := range map[string][]automation.Run{"list": list.Items, "search": search.Items, "window search": window.Items} {
			want := want
			if name == "window search" {
				want = byCreated
			}
			if !reflect.DeepEqual(got, want) {
				gj, _ := json.Marshal(got)
				wj, _ := json.Marshal(want)
				t.Fatalf("%s: %s shows\n%s\nwant\n%s", what, name, gj, wj)
			}
		}
		// The pages as JSON, as the API writes them: each item byte for
		// byte json.Marshal of the summary.
		listJSON, err := s.ListRunsJSON(ctx, f.Project, f.ID, automation.ListQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		windowJSON, err := s.SearchRunsJSON(ctx, f.Project, automation.RunQuery{ListQuery: automation.ListQuery{Limit: 100},
			Since: t0, Until: t0.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		for name, got := range map[string][]json.RawMessage{"list as JSON": listJSON.Items, "window search as JSON": windowJSON.Items} {
			want := want
			if name == "window search as JSON" {
				want = byCreated
			}
			if len(got) != len(want) {
				t.Fatalf("%s: %s has %d runs, want %d", what, name, len(got), len(want))
			}
			for i, r := range want {
				if wj, _ := json.Marshal(r); string(got[i]) != string(wj) {
					t.Fatalf("%s: %s item %d\n%s\nwant\n%s", what, name, i, got[i], wj)
				}
			}
		}
	}

	a := newRun(0)
	if err := s.Enqueue(ctx, a); err != nil {
		t.Fatal(err)
	}
	ids = []string{a.ID}
	check("after enqueue")
	c, err := s.ClaimRun(ctx, f.Project, a.ID, t0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	check("after claim")
	c.Steps = []automation.StepResult{{Name: "call", Type: automation.StepHTTP, Status: automation.StepSucceeded,
		Output: json.RawMessage(`{"status":200,"body":{"big":"output"}}`), DurationMs: 4, Attempts: 1}}
	if err := s.RecordSteps(ctx, c); err != nil {
		t.Fatal(err)
	}
	check("after a journal")
	c.Error = "step next: refused"
	if err := s.ReleaseRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	check("after a release")
	c, err = s.ClaimRun(ctx, f.Project, a.ID, t0.Add(time.Second), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.Status, c.Error = automation.RunSucceeded, ""
	c.Response = &automation.RunResponse{StatusCode: 201, Body: json.RawMessage(`{"answer":"kept"}`), ContentType: "application/json"}
	if err := s.FinishRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	check("after finish")

	// A fenced write that fails writes no summary either.
	stale := c
	stale.Status, stale.LeaseToken = automation.RunFailed, "lease_gone"
	if err := s.FinishRun(ctx, stale); err == nil {
		t.Fatal("finish of a finished run succeeded")
	}
	check("after a refused finish")

	for i := 1; i < 5; i++ {
		r := newRun(i)
		if err := s.Enqueue(ctx, r); err != nil {
			t.Fatal(err)
		}
		ids = append([]string{r.ID}, ids...)
	}
	check("with more runs")

	// Enqueues that share a commit go in through the writer's multi-row
	// insert, and an ON_COMPLETION run through EnqueueClaimed: both write
	// the summary with the row (a missing one would be filled from the
	// document by the list, so the column itself is checked).
	batch := make([]automation.Run, 24)
	errs := make(chan error, len(batch))
	for i := range batch {
		batch[i] = newRun(10 + i)
		go func(r automation.Run) { errs <- s.Enqueue(ctx, r) }(batch[i])
	}
	for range batch {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	inline := newRun(40)
	if _, err := s.EnqueueClaimed(ctx, inline, t0, time.Minute); err != nil {
		t.Fatal(err)
	}
	var missing int
	if err := rawDB(t, path).QueryRowContext(ctx, `SELECT count(*) FROM runs WHERE summary IS NULL`).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if missing != 0 {
		t.Fatalf("%d runs stored without a summary", missing)
	}
	// Concurrent enqueues commit in no set order: the list's order is
	// the rows' insertion order.
	rows, err := rawDB(t, path).QueryContext(ctx, `SELECT id FROM runs ORDER BY seq DESC`)
	if err != nil {
		t.Fatal(err)
	}
	ids = ids[:0]
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if len(ids) != 5+len(batch)+1 {
		t.Fatalf("%d runs stored, want %d", len(ids), 5+len(batch)+1)
	}
	check("after batched and claimed enqueues")

	// Rows from before the column: the list cuts their documents down.
	if _, err := rawDB(t, path).ExecContext(ctx, `UPDATE runs SET summary = NULL WHERE id IN (?, ?, ?)`, a.ID, ids[0], inline.ID); err != nil {
		t.Fatal(err)
	}
	check("with rows without a summary")
}
