package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os/exec"
	"strings"
)

// pgBenchPattern picks pgstore's benchmarks of the cluster-wide write lock:
// durable enqueues and the worker pool's claim-and-finish, with one and two
// stores (nodes) on one database, and one claim over a backlog.
const pgBenchPattern = `^BenchmarkPg(Enqueue|ClaimFinish|ClaimBacklog)$`

// benchPostgres runs them on pgtest's throwaway cluster (Debian's
// postgresql package; the section fails, saying so, without it).
func benchPostgres(ctx context.Context, c config, r *report) error {
	args := []string{"test", "-run", "^$", "-bench", pgBenchPattern, "-benchtime", "3000x", "-count", "1", "./pkg/pgstore"}
	cmdline := "go test -run '^$' -bench '" + pgBenchPattern + "' -benchtime 3000x -count 1 ./pkg/pgstore"
	log.Printf("flowbench: %s", cmdline)
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	var rows [][]string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// name N  x ns/op  [y runs/s]
		if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkPg") || f[3] != "ns/op" {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(f[0], "BenchmarkPg"), "-")
		name, stores, ok := strings.Cut(name, "/stores=")
		if !ok {
			stores = "1"
		}
		figure := f[2] + " ns/op"
		if len(f) >= 6 && f[5] == "runs/s" {
			figure = f[4] + " runs/s"
		}
		rows = append(rows, []string{name, stores, figure})
	}
	if len(rows) == 0 {
		return fmt.Errorf("no figures in the output:\n%s", out)
	}
	r.section("(j) PostgreSQL store: the cluster-wide write lock")
	r.para("pgstore's benchmarks on a throwaway cluster (pkg/pgstore/pgtest: `fsync=off`, `synchronous_commit=off`, on the same cores) " +
		"with one and two stores on one schema, as one and two flowd nodes: `Enqueue` is 16 callers per store writing runs and their " +
		"queue entries; `ClaimFinish` is each store claiming batches of up to 16 due runs and finishing each from its own goroutine; " +
		"`ClaimBacklog` is one claim of 16 from a queue of 5,000 due runs (statistics up to date), the time it holds the lock. " +
		"Every write of every store takes one advisory lock, so a second store adds callers, not write throughput.")
	r.code(cmdline)
	r.table([]string{"benchmark", "stores", "figure"}, rows)
	return nil
}
