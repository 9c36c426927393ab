package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os/exec"
	"strings"
)

// goBenchPattern picks the hot-path benchmarks: auth and routing,
// expression evaluation, signature verification, the store's enqueue,
// claim and finish (one at a time and batched), the ON_COMPLETION run's
// commits (two, or one for a flow without side effects), one whole engine
// execution, and a page of the run list written by the API.
const goBenchPattern = `^Benchmark(AuthenticateAndRoute|HashAPIKey|ExpressionCondition|ExpressionTemplate|Execute|VerifySignature|Enqueue|EnqueueParallel|ClaimFinish|ClaimBatchFinish|InlineRun|InsertFinishedRun|RunListPage)$`

var goBenchPackages = []string{"./pkg/automation", "./pkg/engine", "./pkg/sqlitestore", "./pkg/httpapi"}

func benchGo(ctx context.Context, c config, r *report) error {
	args := append([]string{"test", "-run", "^$", "-bench", goBenchPattern, "-benchmem", "-benchtime", "1s", "-count", "1"}, goBenchPackages...)
	cmdline := "go " + strings.Join(args, " ")
	cmdline = strings.Replace(cmdline, goBenchPattern, "'"+goBenchPattern+"'", 1)
	cmdline = strings.Replace(cmdline, "^$", "'^$'", 1)
	log.Printf("flowbench: %s", cmdline)
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	var rows [][]string
	pkg := ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "pkg:" {
			pkg = strings.TrimPrefix(f[1], "flowservice/")
		}
		if len(f) < 8 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		// name N  x ns/op  y B/op  z allocs/op [extra metrics]
		row := []string{pkg, "`" + f[0] + "`", f[2] + " ns", f[4] + " B", f[6]}
		rows = append(rows, row)
	}
	r.section("(f) Go benchmarks of the hot paths")
	r.para("Per operation, with allocations; `-2` is GOMAXPROCS. The store benchmarks write to a real SQLite file in a temporary directory " +
		"(`synchronous=FULL`); the parallel ones (`…Parallel`) show what group commit gives many writers.")
	r.code(cmdline)
	r.table([]string{"package", "benchmark", "time/op", "bytes/op", "allocs/op"}, rows)
	return nil
}
