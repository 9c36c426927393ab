// Command flowbench is the benchmark harness behind `make bench`: it starts
// a real flowd on loopback, drives it with a bounded load (wrk for the
// closed-loop ingest figures, a paced Go sender for the end-to-end ones),
// reads what happened from the runs flowd recorded, runs the Go
// benchmarks of the hot paths and times each Lambda bootstrap, and writes
// every figure, with the command that produced it, to docs/benchmarks.md.
//
// Everything it sends goes to 127.0.0.1, and every load has a fixed
// duration or count, so a run ends by itself in a few minutes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"time"
)

type config struct {
	flowd    string        // the flowd binary under test
	out      string        // the Markdown report
	dur      time.Duration // each wrk load
	e2eDur   time.Duration // the paced end-to-end load
	e2eRate  float64       // when set, the paced rate of the end-to-end load
	flows    []int         // flow counts for the management figures
	runs     int           // runs seeded for run search
	seedTime time.Duration // upper bound on seeding runs
	only     string        // comma-separated sections to run; empty: all
	label    string        // a label for this run in the report (before/after)
	env      []string      // extra FLOWD_* settings for every flowd started
	baseline string        // another flowd binary to measure first, for a before/after table
}

func main() {
	var c config
	var flows, env string
	flag.StringVar(&c.flowd, "flowd", "bin/flowd", "the flowd binary to measure")
	flag.StringVar(&c.out, "out", "docs/benchmarks.md", "where to write the report")
	flag.DurationVar(&c.dur, "d", 10*time.Second, "duration of each wrk load")
	flag.DurationVar(&c.e2eDur, "e2e", 15*time.Second, "duration of the paced end-to-end load")
	flag.Float64Var(&c.e2eRate, "e2e-rate", 0, "pace the end-to-end load at this many webhooks/s instead of 80% of the measured capacity (for A/B comparisons of CPU per run)")
	flag.StringVar(&flows, "flows", "10000,100000", "flow counts for the management API figures")
	flag.IntVar(&c.runs, "runs", 1_000_000, "runs seeded for the run search figure")
	flag.DurationVar(&c.seedTime, "seed-time", 210*time.Second, "stop seeding runs after this long and report the count reached")
	flag.StringVar(&c.only, "only", "", "comma-separated sections to run (ceiling,ingest,e2e,sync,mgmt,go,lambda,backlog,pg,cluster,approval); empty: all")
	flag.StringVar(&c.label, "label", "", "a note on what was measured (such as a commit)")
	flag.StringVar(&c.baseline, "baseline", "", "a flowd binary to measure first under the same (b) and (c) loads, and on the same runs in (e), for a before/after table")
	flag.StringVar(&env, "env", "", "extra environment for every flowd started, as K=V,K=V (such as FLOWD_WORKERS=32)")
	flag.Parse()
	if env != "" {
		c.env = strings.Split(env, ",")
	}
	for _, f := range strings.Split(flows, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n < 1 {
			log.Fatalf("flowbench: -flows %q: want positive integers separated by commas", flows)
		}
		c.flows = append(c.flows, n)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, c); err != nil {
		log.Fatalf("flowbench: %v", err)
	}
}

func (c config) want(section string) bool {
	if c.only == "" {
		return true
	}
	for _, s := range strings.Split(c.only, ",") {
		if strings.TrimSpace(s) == section {
			return true
		}
	}
	return false
}

func run(ctx context.Context, c config) error {
	start := time.Now()
	r := &report{}
	// A section that fails is reported in the document and the others
	// still run; the command then exits non-zero.
	var failed []error
	r.header(c, runtime.NumCPU(), loadAvg())

	var ceil wrkResult
	if c.want("ceiling") || c.want("ingest") {
		var err error
		if ceil, err = benchCeiling(ctx, c, r); err != nil {
			failed = append(failed, r.failure("ceiling", err))
		}
	}
	if c.baseline != "" && (c.want("ingest") || c.want("e2e")) {
		base := c
		base.flowd = c.baseline
		var before, after figures
		if err := benchIngest(ctx, base, &report{}, ceil, &before); err != nil {
			failed = append(failed, r.failure("baseline ingest", err))
		}
		if err := benchEndToEnd(ctx, base, &report{}, &before); err != nil {
			failed = append(failed, r.failure("baseline end to end", err))
		}
		if err := benchIngest(ctx, c, &report{}, ceil, &after); err != nil {
			failed = append(failed, r.failure("ingest", err))
		}
		if err := benchEndToEnd(ctx, c, &report{}, &after); err != nil {
			failed = append(failed, r.failure("end to end", err))
		}
		r.compare(c, before, after)
	}
	var fig figures
	if c.want("ingest") {
		if err := benchIngest(ctx, c, r, ceil, &fig); err != nil {
			failed = append(failed, r.failure("ingest", err))
		}
	}
	if c.want("e2e") {
		if err := benchEndToEnd(ctx, c, r, &fig); err != nil {
			failed = append(failed, r.failure("end to end", err))
		}
	}
	if c.want("sync") {
		if err := benchSync(ctx, c, r); err != nil {
			failed = append(failed, r.failure("on completion", err))
		}
	}
	if c.want("mgmt") {
		if err := benchManagement(ctx, c, r); err != nil {
			failed = append(failed, r.failure("management", err))
		}
	}
	if c.want("go") {
		if err := benchGo(ctx, c, r); err != nil {
			failed = append(failed, r.failure("go benchmarks", err))
		}
	}
	if c.want("lambda") {
		if err := benchLambdas(ctx, c, r); err != nil {
			failed = append(failed, r.failure("lambdas", err))
		}
	}
	if c.want("backlog") {
		if err := benchBacklog(ctx, c, r); err != nil { // backlog.go
			failed = append(failed, r.failure("backlog", err))
		}
	}
	if c.want("pg") {
		if err := benchPostgres(ctx, c, r); err != nil { // pgbench.go
			failed = append(failed, r.failure("postgres", err))
		}
	}
	if c.want("cluster") {
		if err := benchCluster(ctx, c, r); err != nil { // cluster.go
			failed = append(failed, r.failure("cluster", err))
		}
	}
	if c.want("approval") {
		if err := benchApproval(ctx, c, r); err != nil { // approval.go
			failed = append(failed, r.failure("approval", err))
		}
	}
	r.footer(time.Since(start))
	if err := os.WriteFile(c.out, []byte(r.String()), 0o644); err != nil {
		return err
	}
	log.Printf("flowbench: wrote %s in %v", c.out, time.Since(start).Round(time.Second))
	return errors.Join(failed...)
}

// loadAvg is the 1-minute load average, printed so that a reader can tell a
// quiet machine's figures from a busy one's.
func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
