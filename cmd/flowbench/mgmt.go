package main

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/datadir"
	"flowservice/pkg/sqlitestore"
)

func benchManagement(ctx context.Context, c config, r *report) error {
	dir, err := os.MkdirTemp("", "flowbench-mgmt")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := startFlowd(ctx, c, dir)
	if err != nil {
		return err
	}
	tmplID, err := p.createFlow(`{"name":"template","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"ref":"{{ trigger.body.ref }}"}}]}`)
	key := p.key
	p.stop()
	if err != nil {
		return err
	}

	r.section("(e) Management API")
	r.para("Flows and runs are seeded into one project directly through the store (sqlitestore, concurrent writers) while flowd is stopped; "+
		"then flowd is started on that data and one client calls the API in sequence (200 calls per figure after 20 of warm-up). "+
		"The runs are all in one flow, so that a flow's run list (GET /api/v1/flows/{id}/runs) and the project-wide run search (GET /api/v1/runs) "+
		"each page through all of them: first page, the 11th page (10 cursors in), status=FAILED (every 10th run), and for the search a window "+
		"(since, until) of one minute's runs in the middle of the history, first and 11th page. A figure's calls stop early at %v.", callBound)
	r.code("go run ./cmd/flowbench -only mgmt -flows 10000,100000 -runs 1000000")
	var rows [][]string
	have := 1
	for _, n := range c.flows {
		t := time.Now()
		if err := seedFlows(ctx, dir, tmplID, n-have); err != nil {
			return err
		}
		log.Printf("flowbench: seeded %d flows in %v", n-have, time.Since(t).Round(time.Millisecond))
		have = n
		p, err := startFlowd(ctx, c, dir)
		if err != nil {
			return err
		}
		p.key = key
		var first struct {
			Cursor *string `json:"cursor"`
		}
		if err := p.api("GET", "/api/v1/flows?limit=100", "", 200, &first); err != nil {
			p.stop()
			return err
		}
		// A cursor deep in the list: walk 10 pages in.
		deep := ""
		cur := first.Cursor
		for i := 0; i < 10 && cur != nil; i++ {
			deep = *cur
			var next struct {
				Cursor *string `json:"cursor"`
			}
			if err := p.api("GET", "/api/v1/flows?limit=100&cursor="+url.QueryEscape(deep), "", 200, &next); err != nil {
				p.stop()
				return err
			}
			cur = next.Cursor
		}
		list := timeCalls(func() error { return p.api("GET", "/api/v1/flows?limit=100", "", 200, nil) })
		listDeep := timeCalls(func() error {
			return p.api("GET", "/api/v1/flows?limit=100&cursor="+url.QueryEscape(deep), "", 200, nil)
		})
		get := timeCalls(func() error { return p.api("GET", "/api/v1/flows/"+tmplID, "", 200, nil) })
		i := 0
		create := timeCalls(func() error {
			i++
			return p.api("POST", "/api/v1/flows", fmt.Sprintf(`{"name":"new %d","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"a":"1"}}]}`, i), 201, nil)
		})
		have += i
		p.stop()
		for _, f := range []struct {
			name string
			l    latencies
			err  error
		}{{"list flows, first page (limit 100)", list.l, list.err}, {"list flows, 11th page", listDeep.l, listDeep.err},
			{"get flow", get.l, get.err}, {"create flow", create.l, create.err}} {
			if f.err != nil {
				return fmt.Errorf("%s: %w", f.name, f.err)
			}
			rows = append(rows, []string{fmt.Sprintf("%d flows", n), f.name, ms(f.l.pct(50)), "**" + ms(f.l.pct(99)) + "**"})
			if n == c.flows[len(c.flows)-1] {
				r.target(fmt.Sprintf("(e) %s p99 at %d flows", f.name, n), "< 5 ms", ms(f.l.pct(99)), f.l.pct(99) < 5*time.Millisecond)
			}
		}
	}

	// Runs: in one flow, the worst case for a flow's run list, and the
	// project-wide run search over the same runs.
	t := time.Now()
	seeded, base, err := seedRuns(ctx, dir, tmplID, c.runs, c.seedTime)
	if err != nil {
		return err
	}
	log.Printf("flowbench: seeded %d runs in %v", seeded, time.Since(t).Round(time.Millisecond))
	// The search window: a minute of runs in the middle of those seeded
	// (one a millisecond), or all of them when there are fewer.
	mid := base.Add(time.Duration(seeded/2) * time.Millisecond).Truncate(time.Second)
	window := "&since=" + url.QueryEscape(mid.Format(time.RFC3339)) + "&until=" + url.QueryEscape(mid.Add(time.Minute).Format(time.RFC3339))
	// With -baseline, the baseline binary is measured first on the same
	// data, its rows marked, for a before/after comparison.
	bins := []struct{ label, path string }{{"", c.flowd}}
	if c.baseline != "" {
		bins = append([]struct{ label, path string }{{" (baseline)", c.baseline}}, bins...)
	}
	var prof string
	for _, bin := range bins {
		bc := c
		bc.flowd = bin.path
		runRows, top, err := benchRunLists(ctx, bc, dir, key, tmplID, window, seeded, bin.label, r)
		if err != nil {
			return err
		}
		rows = append(rows, runRows...)
		if bin.label == "" {
			prof = top
		}
	}
	r.table([]string{"data", "call", "p50", "p99"}, rows)
	if seeded < c.runs {
		r.para("Seeding stopped at %d runs of the %d asked for, at the -seed-time bound of %v.", seeded, c.runs, c.seedTime)
	}
	r.para("Where a run list's time goes: flowd's CPU profile while one client reads the first page of the run search over and over for %v (top entries):", listProfile)
	r.code(prof)
	return nil
}

// listProfile is how long flowd is profiled reading run lists.
const listProfile = 8 * time.Second

// benchRunLists starts c.flowd on the seeded data and times the run lists
// and searches; label marks a baseline's rows, whose figures are not
// judged against the targets.
//
// It returns the rows and, for the binary under test, the top of flowd's
// CPU profile while one client reads the first page of the run search.
func benchRunLists(ctx context.Context, c config, dir, key, tmplID, window string, seeded int, label string, r *report) ([][]string, string, error) {
	p, err := startFlowd(ctx, c, dir)
	if err != nil {
		return nil, "", err
	}
	p.key = key
	defer p.stop()
	var rows [][]string
	flowRuns := "/api/v1/flows/" + tmplID + "/runs?limit=100"
	var newest struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := p.api("GET", flowRuns, "", 200, &newest); err != nil {
		return nil, "", err
	}
	if len(newest.Data) == 0 {
		return nil, "", fmt.Errorf("no runs listed")
	}
	for _, l := range []struct{ name, path string }{
		{"get run (with its trigger body and step outputs)", "/api/v1/flows/" + tmplID + "/runs/" + newest.Data[0].ID},
		{"list runs of the flow, first page (limit 100)", flowRuns},
		{"list runs of the flow, 11th page", flowRuns + "&deep"},
		{"list runs of the flow, status=FAILED (every 10th run)", flowRuns + "&status=FAILED"},
		{"run search GET /api/v1/runs, first page (limit 100)", "/api/v1/runs?limit=100"},
		{"run search, 11th page", "/api/v1/runs?limit=100&deep"},
		{"run search, status=FAILED", "/api/v1/runs?limit=100&status=FAILED"},
		{"run search, a minute's window (since, until) mid-history", "/api/v1/runs?limit=100" + window},
		{"run search, that window, 11th page", "/api/v1/runs?limit=100" + window + "&deep"},
	} {
		path, deep := strings.CutSuffix(l.path, "&deep")
		if deep {
			if path, err = deepPage(p, path); err != nil {
				return nil, "", err
			}
		}
		f := timeCalls(func() error { return p.api("GET", path, "", 200, nil) })
		if f.err != nil {
			return nil, "", fmt.Errorf("%s%s: %w", l.name, label, f.err)
		}
		name := l.name
		if len(f.l) < 200 {
			name += fmt.Sprintf(" (%d calls in the %v bound)", len(f.l), callBound)
		}
		rows = append(rows, []string{fmt.Sprintf("%d runs%s", seeded, label), name, ms(f.l.pct(50)), "**" + ms(f.l.pct(99)) + "**"})
		if label == "" {
			r.target(fmt.Sprintf("(e) %s p99 at %d runs", l.name, seeded), "< 5 ms", ms(f.l.pct(99)), f.l.pct(99) < 5*time.Millisecond)
		}
	}
	if label != "" {
		return rows, "", nil
	}
	prof := p.profileFor(ctx, listProfile)
	for end := time.Now().Add(listProfile + time.Second); time.Now().Before(end); {
		if err := p.api("GET", "/api/v1/runs?limit=100", "", 200, nil); err != nil {
			return nil, "", err
		}
	}
	return rows, prof.wait(), nil
}

// deepPage follows a list's cursors 10 pages in and returns the path of the
// 11th page, or of the last when there are fewer.
func deepPage(p *flowd, path string) (string, error) {
	deep := path
	for i := 0; i < 10; i++ {
		var page struct {
			Cursor *string `json:"cursor"`
		}
		if err := p.api("GET", deep, "", 200, &page); err != nil {
			return "", err
		}
		if page.Cursor == nil {
			break
		}
		deep = path + "&cursor=" + url.QueryEscape(*page.Cursor)
	}
	return deep, nil
}

// callBound bounds the time of one figure's calls, so that a slow call
// (a baseline binary's) cannot stretch the run.
const callBound = 30 * time.Second

type timed struct {
	l   latencies
	err error
}

// timeCalls times 200 calls of f after 20 of warm-up, or as many as
// callBound allows.
func timeCalls(f func() error) timed {
	var t timed
	start := time.Now()
	for i := 0; i < 220 && (i < 21 || time.Since(start) < callBound); i++ {
		s := time.Now()
		if err := f(); err != nil {
			t.err = err
			return t
		}
		if i >= 20 {
			t.l = append(t.l, time.Since(s))
		}
	}
	return t
}

// seedFlows adds n copies of the template flow to its project.
func seedFlows(ctx context.Context, dir, tmplID string, n int) error {
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, datadir.DBFile))
	if err != nil {
		return err
	}
	defer st.Close()
	tmpl, err := st.FlowByID(ctx, tmplID)
	if err != nil {
		return err
	}
	return parallel(ctx, n, 32, func(i int) error {
		f := tmpl
		f.ID = automation.NewID("flw")
		f.Name = fmt.Sprintf("seeded %d", i)
		f.Created = time.Now().UTC()
		f.Updated = f.Created
		f.Version = 1
		return st.CreateFlow(ctx, f)
	})
}

// seedRuns adds up to n finished runs to a flow, for at most limit: each is
// enqueued already SUCCEEDED (or FAILED, every tenth) with the result of
// the flow's one SET step, and its queue entry acknowledged, as a worker
// would leave it. Run i is created at base + i milliseconds.
func seedRuns(ctx context.Context, dir, flowID string, n int, limit time.Duration) (seeded int, base time.Time, err error) {
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, datadir.DBFile))
	if err != nil {
		return 0, base, err
	}
	defer st.Close()
	f, err := st.FlowByID(ctx, flowID)
	if err != nil {
		return 0, base, err
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var done atomic.Int64
	base = time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	err = parallel(ctx, n, 64, func(i int) error {
		at := base.Add(time.Duration(i) * time.Millisecond)
		fin := at.Add(3 * time.Millisecond)
		d := int64(3)
		status := automation.RunSucceeded
		if i%10 == 0 {
			status = automation.RunFailed
		}
		run := automation.Run{
			ID: automation.NewID("run"), Project: f.Project, FlowID: f.ID, Status: status,
			Trigger: automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + f.ID,
				Headers: map[string]string{"content-type": "application/json"}, Body: []byte(webhookBody)},
			Steps: []automation.StepResult{{Name: "s", Type: automation.StepSet, Status: automation.StepSucceeded,
				Output: []byte(`{"ref":"refs/heads/main"}`), StartedAt: &at, FinishedAt: &fin, DurationMs: 1, Attempts: 1}},
			Created: at, Started: &at, Finished: &fin, DurationMs: &d, Attempts: 1,
		}
		if err := st.Enqueue(ctx, run); err != nil {
			return err
		}
		if err := st.Ack(ctx, run.ID); err != nil {
			return err
		}
		done.Add(1)
		return nil
	})
	if ctx.Err() != nil && done.Load() > 0 {
		err = nil // the time bound, not a failure
	}
	return int(done.Load()), base, err
}

// parallel calls f(0..n-1) from workers goroutines and returns the first error.
func parallel(ctx context.Context, n, workers int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
