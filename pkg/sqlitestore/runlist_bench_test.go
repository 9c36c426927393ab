package sqlitestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/sqlitestore"
)

// runListBench is the data of BenchmarkListRuns: a store with many
// finished runs of one flow, every tenth FAILED, each with the one SET
// step result its flow produced.
type runListBench struct {
	s                *sqlitestore.Store
	project, flow    string
	deep, deepFailed string // cursors 10 pages in
	since, until     time.Time
}

// runListStore opens the benchmark's store. The number of runs is
// SQLITESTORE_BENCH_RUNS (100,000 unless set); SQLITESTORE_BENCH_DB names
// a file to keep them in between runs of the benchmark (seeding a million
// takes minutes), reused when it exists. The seeded project and flow ids
// are kept in a small file beside it.
func runListStore(b *testing.B) runListBench {
	ctx := context.Background()
	n := 100_000
	if v := os.Getenv("SQLITESTORE_BENCH_RUNS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1000 {
			b.Fatalf("SQLITESTORE_BENCH_RUNS=%q: want a number >= 1000", v)
		}
	}
	path := os.Getenv("SQLITESTORE_BENCH_DB")
	if path == "" {
		path = filepath.Join(b.TempDir(), "runs.db")
	}
	var rb runListBench
	ids, err := os.ReadFile(path + ".ids")
	reuse := err == nil
	rb.s = openAt(b, path)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if reuse {
		if _, err := fmt.Sscan(string(ids), &rb.project, &rb.flow); err != nil {
			b.Fatalf("%s.ids: %v", path, err)
		}
	} else {
		now := time.Now().UTC().Truncate(time.Millisecond)
		rb.project = automation.NewID(automation.PrefixProject)
		f := flow(rb.project, "POST", "bench/runs", now)
		if err := rb.s.CreateFlow(ctx, f); err != nil {
			b.Fatal(err)
		}
		rb.flow = f.ID
		seedRunsForBench(b, rb.s, rb.project, rb.flow, base, n)
		if err := os.WriteFile(path+".ids", []byte(rb.project+" "+rb.flow+"\n"), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	// The window of the search: a minute of runs in the middle.
	rb.since = base.Add(time.Duration(n/2) * time.Millisecond)
	rb.until = rb.since.Add(time.Minute)
	rb.deep = cursorAt(b, func(after string) (automation.Page[automation.Run], error) {
		return rb.s.ListRuns(ctx, rb.project, rb.flow, automation.ListQuery{Limit: 100, After: after})
	})
	rb.deepFailed = cursorAt(b, func(after string) (automation.Page[automation.Run], error) {
		return rb.s.ListRuns(ctx, rb.project, rb.flow, automation.ListQuery{Limit: 100, After: after, Status: "FAILED"})
	})
	return rb
}

// cursorAt walks 10 pages in and returns the cursor of the 11th.
func cursorAt(b *testing.B, list func(after string) (automation.Page[automation.Run], error)) string {
	after := ""
	for range 10 {
		page, err := list(after)
		if err != nil {
			b.Fatal(err)
		}
		if page.Next == "" {
			b.Fatal("fewer than 11 pages")
		}
		after = page.Next
	}
	return after
}

// seedRunsForBench enqueues n finished runs from many goroutines, so that
// group commit writes them in batches. Their queue entries stay: the run
// list never reads the queue.
func seedRunsForBench(b *testing.B, s *sqlitestore.Store, project, flowID string, base time.Time, n int) {
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				at := base.Add(time.Duration(i) * time.Millisecond)
				fin := at.Add(3 * time.Millisecond)
				d := int64(3)
				status := automation.RunSucceeded
				if i%10 == 0 {
					status = automation.RunFailed
				}
				r := automation.Run{
					ID: automation.NewID(automation.PrefixRun), Project: project, FlowID: flowID, Status: status,
					Trigger: automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + flowID,
						Headers: map[string]string{"content-type": "application/json", "user-agent": "bench"},
						Body:    json.RawMessage(`{"event":"push","ref":"refs/heads/main","data":{"id":12345,"user":"octo"}}`)},
					Steps: []automation.StepResult{{Name: "s", Type: automation.StepSet, Status: automation.StepSucceeded,
						Output: json.RawMessage(`{"ref":"refs/heads/main"}`), StartedAt: &at, FinishedAt: &fin, DurationMs: 1, Attempts: 1}},
					Created: at, Started: &at, Finished: &fin, DurationMs: &d, Attempts: 1,
				}
				if err := s.Enqueue(ctx, r); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// BenchmarkListRuns reads pages of 100 run summaries of one flow, and of
// the project-wide search, at the start, 10 pages in, by status and in a
// creation window: the management API's run list and search, minus HTTP.
// The "json" ones read the pages as the API does, each summary's stored
// JSON (ListRunsJSON, SearchRunsJSON); the others decode them into runs.
func BenchmarkListRuns(b *testing.B) {
	ctx := context.Background()
	rb := runListStore(b)
	runs := func(p automation.Page[automation.Run], err error) (int, error) { return len(p.Items), err }
	raw := func(p automation.Page[json.RawMessage], err error) (int, error) { return len(p.Items), err }
	first := automation.ListQuery{Limit: 100}
	window := automation.RunQuery{ListQuery: first, Since: rb.since, Until: rb.until}
	for _, bc := range []struct {
		name string
		list func() (int, error)
	}{
		{"flow/first", func() (int, error) { return runs(rb.s.ListRuns(ctx, rb.project, rb.flow, first)) }},
		{"flow/first/json", func() (int, error) { return raw(rb.s.ListRunsJSON(ctx, rb.project, rb.flow, first)) }},
		{"flow/11th", func() (int, error) {
			return runs(rb.s.ListRuns(ctx, rb.project, rb.flow, automation.ListQuery{Limit: 100, After: rb.deep}))
		}},
		{"flow/FAILED", func() (int, error) {
			return runs(rb.s.ListRuns(ctx, rb.project, rb.flow, automation.ListQuery{Limit: 100, Status: "FAILED"}))
		}},
		{"search/first", func() (int, error) {
			return runs(rb.s.SearchRuns(ctx, rb.project, automation.RunQuery{ListQuery: first}))
		}},
		{"search/first/json", func() (int, error) {
			return raw(rb.s.SearchRunsJSON(ctx, rb.project, automation.RunQuery{ListQuery: first}))
		}},
		{"search/11th", func() (int, error) {
			return runs(rb.s.SearchRuns(ctx, rb.project, automation.RunQuery{ListQuery: automation.ListQuery{Limit: 100, After: rb.deep}}))
		}},
		{"search/FAILED", func() (int, error) {
			return runs(rb.s.SearchRuns(ctx, rb.project, automation.RunQuery{ListQuery: automation.ListQuery{Limit: 100, Status: "FAILED"}}))
		}},
		{"search/window", func() (int, error) { return runs(rb.s.SearchRuns(ctx, rb.project, window)) }},
		{"search/window/json", func() (int, error) { return raw(rb.s.SearchRunsJSON(ctx, rb.project, window)) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				n, err := bc.list()
				if err != nil {
					b.Fatal(err)
				}
				if n != 100 {
					b.Fatalf("%d items", n)
				}
			}
		})
	}
}
