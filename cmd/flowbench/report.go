package main

import (
	"fmt"
	"log"
	"runtime"
	"sort"
	"strings"
	"time"
)

// report is the Markdown document flowbench writes.
type report struct {
	strings.Builder
	targets [][]string // issue 10's targets: figure, target, measured, met
}

// target records a measured figure against its target, for the summary.
func (r *report) target(figure, target, measured string, met bool) {
	verdict := "met"
	if !met {
		verdict = "**missed**"
	}
	r.targets = append(r.targets, []string{figure, target, measured, verdict})
}

func (r *report) header(c config, cpus int, load string) {
	fmt.Fprintf(r, "# Benchmarks\n\n")
	fmt.Fprintf(r, "Written by `make bench` (cmd/flowbench) on %s: %d CPUs, %s, load average before the run %s.",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), cpus, runtime.Version(), load)
	if len(c.env) > 0 {
		fmt.Fprintf(r, " flowd ran with `%s`.", strings.Join(c.env, " "))
	}
	if c.label != "" {
		fmt.Fprintf(r, " Label: %s.", c.label)
	}
	fmt.Fprintf(r, "\nThe load generator runs on the same cores as the server, as it would for a sender on the same host.\n")
	fmt.Fprintf(r, "Every load goes to 127.0.0.1 and is bounded in time or count. Reproduce all with `make bench`;\n")
	fmt.Fprintf(r, "one section with `go run ./cmd/flowbench -only SECTION` (ceiling, ingest, e2e, sync, mgmt, go, lambda, backlog, pg, cluster, approval).\n\n")
}

func (r *report) section(title string) { fmt.Fprintf(r, "## %s\n\n", title) }

func (r *report) para(format string, a ...any) { fmt.Fprintf(r, format+"\n\n", a...) }

func (r *report) code(cmd string) { fmt.Fprintf(r, "```sh\n%s\n```\n\n", cmd) }

func (r *report) table(head []string, rows [][]string) {
	fmt.Fprintf(r, "| %s |\n|", strings.Join(head, " | "))
	for range head {
		r.WriteString("---|")
	}
	r.WriteString("\n")
	for _, row := range rows {
		fmt.Fprintf(r, "| %s |\n", strings.Join(row, " | "))
	}
	r.WriteString("\n")
}

func (r *report) footer(took time.Duration) {
	if len(r.targets) > 0 {
		r.section("Targets")
		r.para("The targets of issue 10 against this run's figures. The machine's load average (in the first line) matters: " +
			"on a busy machine every figure is worse, so judge targets on a quiet one.")
		r.table([]string{"figure", "target", "this run", ""}, r.targets)
		r.WriteString(limits)
	}
	fmt.Fprintf(r, "---\n\nThe whole run took %v.\n", took.Round(time.Second))
}

// latencies collects durations and reports percentiles.
type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := append(latencies(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p / 100 * float64(len(s)-1))
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func mb(bytes int64) string { return fmt.Sprintf("%.1f MB", float64(bytes)/1e6) }

// compare writes the before/after table of -baseline: both binaries under
// the same loads, one right after the other.
func (r *report) compare(c config, before, after figures) {
	r.section("Before and after")
	r.para("`%s` (before) and `%s` (after), measured one right after the other under the loads of (b) and (c) below.", c.baseline, c.flowd)
	row := func(name string, f func(figures) string) []string { return []string{name, f(before), f(after)} }
	rows := [][]string{}
	for _, conns := range []int{16, 64} {
		rows = append(rows,
			row(fmt.Sprintf("(b) ingest, %d connections: requests/s", conns), func(f figures) string { return fmt.Sprintf("%.0f", f.ingest[conns].reqs) }),
			row(fmt.Sprintf("(b) ingest, %d connections: p50 / p99", conns), func(f figures) string {
				return ms(f.ingest[conns].p50) + " / " + ms(f.ingest[conns].p99)
			}))
	}
	rows = append(rows,
		row("(c) capacity, runs/s", func(f figures) string { return fmt.Sprintf("%.0f", f.capacity) }),
		row("(c) sustained, runs/s", func(f figures) string { return fmt.Sprintf("%.0f", f.sustained) }),
		row("(c) accept→finished p50 / p99", func(f figures) string { return ms(f.e2eP50) + " / " + ms(f.e2eP99) }),
		row("(g) peak RSS during (b) / (c)", func(f figures) string { return mb(f.ingestRSS) + " / " + mb(f.e2eRSS) }),
	)
	r.table([]string{"figure", "before", "after"}, rows)
}

// failure records a section that could not be measured, and returns the
// error for the exit status.
func (r *report) failure(section string, err error) error {
	r.section("FAILED: " + section)
	r.code(err.Error())
	log.Printf("flowbench: %s: %v", section, err)
	return fmt.Errorf("%s: %w", section, err)
}
