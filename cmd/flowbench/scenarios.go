package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// webhookBody is the small JSON webhook every ingest load sends.
const webhookBody = `{"event":"push","ref":"refs/heads/main","data":{"id":12345,"user":"octo"}}`

func benchCeiling(ctx context.Context, c config, r *report) (wrkResult, error) {
	srv, base, err := okServer()
	if err != nil {
		return wrkResult{}, err
	}
	defer srv.Close()
	res, err := runWrk(ctx, c, base+"/", webhookBody, 64)
	if err != nil {
		return res, err
	}
	r.section("(a) Ceiling: a minimal net/http handler")
	r.para("The handler in cmd/flowbench/flowd.go (`ceiling`) reads the body and answers `{\"ok\":true}`; the same wrk load as (b). "+
		"post.lua sets `wrk.method = \"POST\"`, `Content-Type: application/json` and the body `%s` (%d bytes).", webhookBody, len(webhookBody))
	r.code(res.cmd)
	r.table([]string{"connections", "requests/s", "p50", "p99", "non-2xx", "socket errors"},
		[][]string{{"64", fmt.Sprintf("%.0f", res.reqs), ms(res.p50), ms(res.p99), fmt.Sprint(res.non2xx), fmt.Sprint(res.errors)}})
	return res, nil
}

// figures are the headline numbers of one flowd binary, for the
// before/after table (-baseline).
type figures struct {
	ingest         map[int]wrkResult // by connections
	ingestRSS      int64
	capacity       float64
	sustained      float64
	e2eP50, e2eP99 time.Duration
	e2eRSS         int64
}

func benchIngest(ctx context.Context, c config, r *report, ceil wrkResult, fig *figures) error {
	p, stop, err := startFreshFlowd(ctx, c, "ingest")
	if err != nil {
		return err
	}
	defer stop()
	id, err := p.createFlow(`{"name":"ingest","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"ref":"{{ trigger.body.ref }}"}}]}`)
	if err != nil {
		return err
	}
	url := p.base + "/api/v1/webhooks/" + id
	var rows [][]string
	var cmds []string
	var prof *profiler
	for _, conns := range []int{16, 64} {
		if conns == 64 {
			prof = p.profileFor(ctx, c.dur-2*time.Second)
		}
		res, err := runWrk(ctx, c, url, webhookBody, conns)
		if err != nil {
			return err
		}
		cmds = append(cmds, res.cmd)
		if fig.ingest == nil {
			fig.ingest = map[int]wrkResult{}
		}
		fig.ingest[conns] = res
		ratio := "n/a"
		if ceil.reqs > 0 {
			ratio = fmt.Sprintf("%.1f%%", 100*res.reqs/ceil.reqs)
		}
		rows = append(rows, []string{fmt.Sprint(conns), fmt.Sprintf("%.0f", res.reqs), ms(res.p50), ms(res.p99), ratio, fmt.Sprint(res.non2xx), fmt.Sprint(res.errors)})
	}
	depth, _ := p.metric("flowd_queue_depth")
	rss := p.peakRSS()
	fig.ingestRSS = rss
	r.section("(b) Durable ingest: flow builder webhook")
	r.para("A fresh flowd (embedded SQLite, `synchronous=FULL`), one enabled flow builder flow with one SET step; " +
		"each 200 means the run and its queue entry are committed. The workers execute the runs at the same time on the same cores.")
	r.code(fmt.Sprintf("FLOWD_RATE_LIMIT=0 bin/flowd &\n%s\n%s", cmds[0], cmds[1]))
	r.table([]string{"connections", "requests/s", "p50", "p99", "of (a)", "non-2xx", "socket errors"}, rows)
	r.para("Queue depth when the load stopped: %.0f runs. (g) Peak resident memory of flowd during (b): **%s**.", depth, mb(rss))
	if res, ok := fig.ingest[64]; ok && ceil.reqs > 0 {
		r.target("(b) ingest, 64 connections, of (a)", "≥ 30%", fmt.Sprintf("%.1f%%", 100*res.reqs/ceil.reqs), res.reqs >= 0.3*ceil.reqs)
		r.target("(b) ingest, 64 connections, p99", "< 15 ms", ms(res.p99), res.p99 < 15*time.Millisecond)
	}
	r.target("(g) peak RSS during (b)", "< 150 MB", mb(rss), rss < 150e6)
	r.para("CPU profile of flowd during the 64-connection load (`FLOWD_PPROF_ADDR`, `go tool pprof -top`), top entries:")
	r.code(prof.wait())
	return nil
}

// pace sends POSTs of body to url at rate per second for dur from workers
// goroutines, each on its own schedule, and returns the latencies measured
// from each request's scheduled time (so a stalled server is not hidden).
func pace(ctx context.Context, url, body string, rate float64, dur time.Duration, workers int) (sent, failed int64, lat latencies) {
	interval := time.Duration(float64(time.Second) * float64(workers) / rate)
	start := time.Now()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var nSent, nFailed atomic.Int64
	for w := range workers {
		wg.Go(func() {
			var mine latencies
			next := start.Add(time.Duration(w) * interval / time.Duration(workers))
			end := start.Add(dur)
			for next.Before(end) && time.Now().Before(end) && ctx.Err() == nil {
				if d := time.Until(next); d > 0 {
					time.Sleep(d)
				}
				resp, err := client.Post(url, "application/json", bytes.NewReader([]byte(body)))
				nSent.Add(1)
				if err != nil {
					nFailed.Add(1)
				} else {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						nFailed.Add(1)
					}
				}
				mine = append(mine, time.Since(next))
				next = next.Add(interval)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return nSent.Load(), nFailed.Load(), lat
}

// waitDrained waits until the queue is empty, at most limit.
func waitDrained(ctx context.Context, p *flowd, limit time.Duration) (time.Time, error) {
	deadline := time.Now().Add(limit)
	for {
		d, err := p.metric("flowd_queue_depth")
		if err != nil {
			return time.Time{}, err
		}
		if d == 0 {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Now(), fmt.Errorf("queue still holds %.0f runs after %v", d, limit)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func benchEndToEnd(ctx context.Context, c config, r *report, fig *figures) error {
	sink, sinkURL, err := okServer()
	if err != nil {
		return err
	}
	defer sink.Close()
	p, stop, err := startFreshFlowd(ctx, c, "e2e", "FLOWD_ALLOW_PRIVATE_NETWORKS=true")
	if err != nil {
		return err
	}
	defer stop()
	flow := fmt.Sprintf(`{"name":"e2e","engine":"FLOW_BUILDER","steps":[`+
		`{"name":"s","type":"SET","values":{"ref":"{{ trigger.body.ref }}"}},`+
		`{"name":"call","type":"HTTP","method":"POST","url":%q,"body":{"run":"{{ run.id }}","ref":"{{ steps.s.ref }}"}}]}`, sinkURL+"/sink")
	id, err := p.createFlow(flow)
	if err != nil {
		return err
	}
	url := p.base + "/api/v1/webhooks/" + id

	// Capacity: a burst as fast as 32 senders go for a third of the time,
	// then the time until the last run finished.
	burst := c.e2eDur / 3
	log.Printf("flowbench: end to end: burst for %v", burst)
	t0 := time.Now()
	sent, failed, _ := pace(ctx, url, webhookBody, 1e9, burst, 32)
	end, err := waitDrained(ctx, p, 2*time.Minute)
	if err != nil {
		return err
	}
	capacity := float64(sent-failed) / end.Sub(t0).Seconds()

	// Sustained: paced at 80% of that for c.e2eDur, sampling the queue.
	rate := 0.8 * capacity
	if c.e2eRate > 0 {
		rate = c.e2eRate
	}
	log.Printf("flowbench: end to end: capacity %.0f runs/s; paced at %.0f/s for %v", capacity, rate, c.e2eDur)
	finished0, _ := p.metric("flowd_runs_finished_total")
	var depths []float64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				d, _ := p.metric("flowd_queue_depth")
				depths = append(depths, d)
			}
		}
	}()
	p0 := time.Now()
	cpu0 := p.cpuTime()
	prof := p.profileFor(ctx, c.e2eDur-2*time.Second)
	psent, pfailed, acceptLat := pace(ctx, url, webhookBody, rate, c.e2eDur, 64)
	pdur := time.Since(p0)
	finished1, _ := p.metric("flowd_runs_finished_total")
	cpuPerRun := time.Duration(0)
	if n := finished1 - finished0; n > 0 {
		cpuPerRun = time.Duration(float64(p.cpuTime()-cpu0) / n)
	}
	close(stopSampling)
	<-sampled
	if _, err := waitDrained(ctx, p, 2*time.Minute); err != nil {
		return err
	}
	all, err := p.runs(id)
	if err != nil {
		return err
	}
	var e2e latencies
	succeeded := 0
	for _, run := range all {
		if run.Created.Before(p0) || run.Finished == nil {
			continue
		}
		e2e = append(e2e, run.Finished.Sub(run.Created))
		if run.Status == "SUCCEEDED" {
			succeeded++
		}
	}
	rss := p.peakRSS()
	fig.capacity, fig.sustained = capacity, (finished1-finished0)/pdur.Seconds()
	fig.e2eP50, fig.e2eP99, fig.e2eRSS = e2e.pct(50), e2e.pct(99), rss
	r.section("(c) End to end: SET + HTTP step to a loopback sink")
	r.para("A fresh flowd with `FLOWD_ALLOW_PRIVATE_NETWORKS=true`; the flow has a SET step and an HTTP POST to a sink in the harness. "+
		"First a burst from 32 senders for %v, timed until the queue is empty, gives the capacity; then webhooks are paced at 80%% of it "+
		"from 64 senders for %v while the queue depth is sampled every second. Accept→finished is `finished − created` of each run of the paced phase, "+
		"read back from the runs API (run times have millisecond resolution).", burst, c.e2eDur)
	r.code(fmt.Sprintf("go run ./cmd/flowbench -only e2e -e2e %v", c.e2eDur))
	r.table([]string{"figure", "value"}, [][]string{
		{"capacity (burst of " + fmt.Sprint(sent) + " webhooks, " + fmt.Sprint(failed) + " refused, until drained)", fmt.Sprintf("%.0f runs/s", capacity)},
		{"paced rate offered", fmt.Sprintf("%.0f webhooks/s (%d sent, %d refused)", float64(psent)/pdur.Seconds(), psent, pfailed)},
		{"runs finished per second while paced", fmt.Sprintf("**%.0f runs/s**", (finished1-finished0)/pdur.Seconds())},
		{"accept→finished p50 / p99", fmt.Sprintf("**%s / %s** (%d runs, %d succeeded)", ms(e2e.pct(50)), ms(e2e.pct(99)), len(e2e), succeeded)},
		{"webhook answer p50 / p99 (from scheduled send)", ms(acceptLat.pct(50)) + " / " + ms(acceptLat.pct(99))},
		{"queue depth each second", fmt.Sprint(depths)},
		{"flowd CPU time per finished run while paced (user + system, includes the profiler)", fmt.Sprintf("%d µs", cpuPerRun.Microseconds())},
		{"(g) flowd peak resident memory", "**" + mb(rss) + "**"},
	})
	sustained := (finished1 - finished0) / pdur.Seconds()
	// Flat: the queue at the end holds no more than a quarter second of
	// the paced rate (or 100 runs), so the workers kept up.
	flat := len(depths) > 0 && depths[len(depths)-1] <= max(100, rate/4)
	r.para("Backlog flat (the last sample within a quarter second of the paced rate): **%v**. "+
		"When it is not, the sustained rate is lower than the pace and the latencies include queueing.", flat)
	r.target("(c) sustained runs/s, backlog flat", "≥ 5,000", fmt.Sprintf("%.0f (flat: %v)", sustained, flat), sustained >= 5000 && flat)
	r.target("(c) accept→finished p99", "< 250 ms", ms(e2e.pct(99)), e2e.pct(99) < 250*time.Millisecond)
	r.target("(g) peak RSS during (c)", "< 150 MB", mb(rss), rss < 150e6)
	r.para("CPU profile of flowd during the paced phase, top entries:")
	r.code(prof.wait())
	return nil
}

func benchSync(ctx context.Context, c config, r *report) error {
	sink, sinkURL, err := okServer()
	if err != nil {
		return err
	}
	defer sink.Close()
	p, stop, err := startFreshFlowd(ctx, c, "sync", "FLOWD_ALLOW_PRIVATE_NETWORKS=true")
	if err != nil {
		return err
	}
	defer stop()
	// The three-step flow has no side effects, so flowd runs it in memory
	// and commits it once, finished; the same flow with an HTTP call
	// in the middle takes the path of every side-effecting flow: the run
	// stored claimed by its receiver, then finished (two commits).
	pure, err := syncRoundTrips(ctx, c, p, "pure", `{"name":"b","type":"SET","values":{"n":"{{ trigger.body.data.id }}"}}`)
	if err != nil {
		return err
	}
	call, err := syncRoundTrips(ctx, c, p, "call", fmt.Sprintf(`{"name":"b","type":"HTTP","method":"POST","url":%q,"body":{"n":"{{ trigger.body.data.id }}"}}`, sinkURL+"/sink"))
	if err != nil {
		return err
	}
	// The same client against the ceiling handler: what loopback HTTP alone costs.
	var bare latencies
	for i := 0; i < 1000; i++ {
		t := time.Now()
		resp, err := client.Post(sinkURL+"/", "application/json", bytes.NewReader([]byte(webhookBody)))
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		bare = append(bare, time.Since(t))
	}
	r.section("(d) ON_COMPLETION round trip: three-step workflow")
	r.para("A workflow builder flow (SET, SET, RESPOND) on an ON_COMPLETION webhook, called by one sender in sequence (%d calls after 50 of warm-up). "+
		"It has no side effects, so flowd executes it in memory and commits the finished run once before answering. "+
		"The same flow with its second step an HTTP POST to a loopback sink (%d calls) takes the path of every flow with side effects: "+
		"the run is stored claimed by the receiver, executed inline, then finished (two commits). "+
		"Steps = `finished − started` of the run; overhead = round trip − steps: the receiver, the commits and the answer. "+
		"Run times have millisecond resolution, so steps under 1 ms read as 0.", len(pure.rtt), len(call.rtt))
	r.code("go run ./cmd/flowbench -only sync")
	r.target("(d) ON_COMPLETION overhead p50", "< 1 ms", ms(pure.over.pct(50)), pure.over.pct(50) < time.Millisecond)
	r.table([]string{"figure", "p50", "p99"}, [][]string{
		{"round trip", ms(pure.rtt.pct(50)), ms(pure.rtt.pct(99))},
		{"steps (run started→finished)", ms(pure.steps.pct(50)), ms(pure.steps.pct(99))},
		{"**overhead** (round trip − steps)", "**" + ms(pure.over.pct(50)) + "**", ms(pure.over.pct(99))},
		{"with an HTTP step: round trip", ms(call.rtt.pct(50)), ms(call.rtt.pct(99))},
		{"with an HTTP step: steps", ms(call.steps.pct(50)), ms(call.steps.pct(99))},
		{"with an HTTP step: overhead", ms(call.over.pct(50)), ms(call.over.pct(99))},
		{"bare loopback HTTP round trip (ceiling handler)", ms(bare.pct(50)), ms(bare.pct(99))},
	})
	return nil
}

// syncTimes are one ON_COMPLETION flow's round trips, its runs' step
// times and the difference.
type syncTimes struct{ rtt, steps, over latencies }

// syncRoundTrips creates an ON_COMPLETION flow SET, middle, RESPOND at
// /webhook/bench/<name> and calls it from one sender in sequence (up to
// 2,000 calls or c.e2eDur, the first 50 not counted).
func syncRoundTrips(ctx context.Context, c config, p *flowd, name, middle string) (syncTimes, error) {
	var st syncTimes
	id, err := p.createFlow(`{"name":"` + name + `","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST","path":"bench/` + name + `","responseMode":"ON_COMPLETION"}},"steps":[` +
		`{"name":"a","type":"SET","values":{"ref":"{{ trigger.body.ref }}"}},` + middle + `,` +
		`{"name":"r","type":"RESPOND","statusCode":200,"body":{"run":"{{ run.id }}","ref":"{{ steps.a.ref }}"}}]}`)
	if err != nil {
		return st, err
	}
	url := p.base + "/webhook/bench/" + name
	type sample struct {
		run string
		rtt time.Duration
	}
	var samples []sample
	deadline := time.Now().Add(c.e2eDur)
	for i := 0; i < 2000 && time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		t := time.Now()
		resp, err := client.Post(url, "application/json", bytes.NewReader([]byte(webhookBody)))
		if err != nil {
			return st, err
		}
		var body struct{ Run string }
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		rtt := time.Since(t)
		if err != nil || resp.StatusCode != 200 {
			return st, fmt.Errorf("sync webhook %s = %d (%v)", name, resp.StatusCode, err)
		}
		if i >= 50 { // warm-up
			samples = append(samples, sample{body.Run, rtt})
		}
	}
	all, err := p.runs(id)
	if err != nil {
		return st, err
	}
	exec := map[string]time.Duration{}
	for _, run := range all {
		if run.Started != nil && run.Finished != nil {
			exec[run.ID] = run.Finished.Sub(*run.Started)
		}
	}
	for _, s := range samples {
		e, ok := exec[s.run]
		if !ok {
			continue
		}
		st.rtt = append(st.rtt, s.rtt)
		st.steps = append(st.steps, e)
		st.over = append(st.over, s.rtt-e)
	}
	return st, nil
}
