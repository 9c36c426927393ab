package main

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"time"
)

// report is the Markdown document flowbench writes.
type report struct{ strings.Builder }

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
	fmt.Fprintf(r, "one section with `go run ./cmd/flowbench -only SECTION` (ceiling, ingest, e2e, sync, mgmt, go, lambda).\n\n")
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
