package main

import (
	"context"
	"fmt"
	"log"
	"net/url"
	"os"
	"path/filepath"
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
	r.para("Flows and runs are seeded into one project directly through the store (sqlitestore, concurrent writers) while flowd is stopped; " +
		"then flowd is started on that data and one client calls the API in sequence (200 calls per figure after 20 of warm-up). " +
		"There is no GET /api/v1/runs in this version: run search is GET /api/v1/flows/{id}/runs?limit=100, first page and a page deep in the list.")
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

	// Runs: in one flow, the worst case for a flow's run list.
	t := time.Now()
	seeded, err := seedRuns(ctx, dir, tmplID, c.runs, c.seedTime)
	if err != nil {
		return err
	}
	log.Printf("flowbench: seeded %d runs in %v", seeded, time.Since(t).Round(time.Millisecond))
	p, err = startFlowd(ctx, c, dir)
	if err != nil {
		return err
	}
	p.key = key
	defer p.stop()
	var first struct {
		Cursor *string `json:"cursor"`
	}
	if err := p.api("GET", "/api/v1/flows/"+tmplID+"/runs?limit=100", "", 200, &first); err != nil {
		return err
	}
	deep := ""
	cur := first.Cursor
	for i := 0; i < 10 && cur != nil; i++ {
		deep = *cur
		var next struct {
			Cursor *string `json:"cursor"`
		}
		if err := p.api("GET", "/api/v1/flows/"+tmplID+"/runs?limit=100&cursor="+url.QueryEscape(deep), "", 200, &next); err != nil {
			return err
		}
		cur = next.Cursor
	}
	runs := timeCalls(func() error { return p.api("GET", "/api/v1/flows/"+tmplID+"/runs?limit=100", "", 200, nil) })
	runsDeep := timeCalls(func() error {
		return p.api("GET", "/api/v1/flows/"+tmplID+"/runs?limit=100&cursor="+url.QueryEscape(deep), "", 200, nil)
	})
	runsFailed := timeCalls(func() error {
		return p.api("GET", "/api/v1/flows/"+tmplID+"/runs?limit=100&status=FAILED", "", 200, nil)
	})
	for _, f := range []struct {
		name string
		l    latencies
		err  error
	}{{"list runs of the flow, first page (limit 100)", runs.l, runs.err}, {"list runs, 11th page", runsDeep.l, runsDeep.err},
		{"list runs, status=FAILED (every 10th run)", runsFailed.l, runsFailed.err}} {
		if f.err != nil {
			return fmt.Errorf("%s: %w", f.name, f.err)
		}
		rows = append(rows, []string{fmt.Sprintf("%d runs", seeded), f.name, ms(f.l.pct(50)), "**" + ms(f.l.pct(99)) + "**"})
		r.target(fmt.Sprintf("(e) %s p99 at %d runs", f.name, seeded), "< 5 ms", ms(f.l.pct(99)), f.l.pct(99) < 5*time.Millisecond)
	}
	r.table([]string{"data", "call", "p50", "p99"}, rows)
	if seeded < c.runs {
		r.para("Seeding stopped at %d runs of the %d asked for, at the -seed-time bound of %v.", seeded, c.runs, c.seedTime)
	}
	return nil
}

type timed struct {
	l   latencies
	err error
}

// timeCalls times 200 calls of f after 20 of warm-up.
func timeCalls(f func() error) timed {
	var t timed
	for i := 0; i < 220; i++ {
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
// enqueued already SUCCEEDED (or FAILED, every tenth) and its queue entry
// acknowledged, as a worker would leave it.
func seedRuns(ctx context.Context, dir, flowID string, n int, limit time.Duration) (int, error) {
	st, err := sqlitestore.Open(ctx, filepath.Join(dir, datadir.DBFile))
	if err != nil {
		return 0, err
	}
	defer st.Close()
	f, err := st.FlowByID(ctx, flowID)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var done atomic.Int64
	base := time.Now().Add(-time.Hour).UTC()
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
	return int(done.Load()), err
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
