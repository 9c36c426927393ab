package sqlitestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestInsightsBoundedPerFlow: a flow that finishes runs every hour keeps
// InsightRetention of hourly rows (744), never more: each hour's first
// finish drops the hours past it. It measures what those rows take on
// disk (docs/reliability.md states the figure).
func TestInsightsBoundedPerFlow(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "insights.db")
	s := openAt(t, path)
	start := time.Now().UTC().Truncate(time.Hour).Add(-900 * time.Hour)
	p := automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "insights", Created: start}
	if err := s.CreateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	f := flow(p.ID, "POST", "insights/hook", start)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	const hours = 800
	keep := int(automation.InsightRetention / time.Hour)
	// Three runs an hour in three duration bins, a failure among them:
	// a flow busy all day.
	durations := []int64{40, 800, 4000}
	for h := range hours {
		for i, ms := range durations {
			r := benchRun(p.ID, f.ID)
			fin := start.Add(time.Duration(h)*time.Hour + time.Duration(i)*time.Minute)
			began := fin.Add(-time.Duration(ms) * time.Millisecond)
			d := ms
			r.Created, r.Started, r.Finished, r.DurationMs = began, &began, &fin, &d
			r.Status = automation.RunSucceeded
			if i == 2 {
				r.Status = automation.RunFailed
			}
			if err := s.InsertFinishedRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	end := start.Add(hours * time.Hour)
	cells, err := s.FlowInsights(ctx, p.ID, f.ID, start.Add(-time.Hour), end)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != keep {
		t.Fatalf("the flow keeps %d hours after %d hours of runs, want %d", len(cells), hours, keep)
	}
	if first := end.Add(-time.Duration(keep) * time.Hour); !cells[0].Hour.Equal(first) {
		t.Errorf("the oldest hour kept is %v, want %v", cells[0].Hour, first)
	}
	for _, c := range cells {
		if c.Succeeded != 2 || c.Failed != 1 || c.Bins[4] != 1 || c.Bins[12] != 1 || c.Bins[16] != 1 {
			t.Fatalf("hour %v = %+v, want 2 succeeded, 1 failed, one run in bins 4, 12 and 16", c.Hour, c)
		}
	}
	db := rawDB(t, path)
	var rows, bytes int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM flow_insights`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT sum(pgsize) FROM dbstat WHERE name = 'flow_insights'`).Scan(&bytes); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d rows of one flow take %d bytes on disk (%d a row)", rows, bytes, bytes/rows)
	if rows != int64(keep) || bytes > 200*int64(keep) {
		t.Errorf("%d rows, %d bytes: want %d rows under 200 bytes each", rows, bytes, keep)
	}
	// The worst case: every bin of every hour holds a two-byte count.
	set := "succeeded = 30000, failed = 30000, timeout = 30000"
	for i := range automation.DurationBinCount {
		set += fmt.Sprintf(", b%d = 30000", i)
	}
	if _, err := db.ExecContext(ctx, `UPDATE flow_insights SET `+set); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, `SELECT sum(pgsize) FROM dbstat WHERE name = 'flow_insights'`).Scan(&bytes); err != nil {
		t.Fatal(err)
	}
	t.Logf("with every counter in use: %d bytes (%d a row)", bytes, bytes/rows)
	if bytes > 256*int64(keep) {
		t.Errorf("every counter in use: %d bytes, want under 256 a row", bytes)
	}
}
