// Command lambdalocal runs a function's real bootstrap as `sam local
// invoke` does, without Docker or sam (deploy/lambdalocal): it builds the
// function for this machine, installs the Lambda Runtime Interface
// Emulator into -bin when missing, starts moto_server on a free loopback
// port, provisions and seeds a stage there, runs the bootstrap under the
// emulator with the template's environment, posts the event and prints the
// answer. Everything it started is stopped by PID before it exits.
//
//	lambdalocal -function api -event events/api-list-flows.json   # make invoke-api
//	lambdalocal -all                                              # make invoke-all
//	lambdalocal -coldstart 5 [-function api]                      # cold starts, a benchmark
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"flowservice/deploy/lambdalocal"
	"flowservice/pkg/awstest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lambdalocal:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	fn := flag.String("function", "", "the function to invoke: "+strings.Join(names(), ", "))
	eventPath := flag.String("event", "", "the event file to send it")
	all := flag.Bool("all", false, "invoke every events/ file through its function and check each answer")
	binDir := flag.String("bin", "bin", "where the emulator is installed and the bootstraps built")
	tplPath := flag.String("template", "template.yaml", "the SAM template whose environment the functions get")
	eventsDir := flag.String("events", "events", "the events directory (-all)")
	stageName := flag.String("stage", "local", "the stage's name: resources are flow-<stage>-...")
	verbose := flag.Bool("v", false, "print each function's logs")
	coldstarts := flag.Int("coldstart", 0, "start each function's bootstrap (or -function's) fresh N times, send one event each, and print the emulator's Init Duration and the first invocation's Duration (a benchmark: not part of make test)")
	flag.Parse()

	var jobs []job
	switch {
	case *coldstarts > 0:
		fns := names()
		if *fn != "" {
			fns = []string{*fn}
		}
		for _, f := range fns {
			jobs = append(jobs, job{fn: f, event: filepath.Join(*eventsDir, lambdalocal.ColdStartEvents[f])})
		}
	case *all:
		files, err := filepath.Glob(filepath.Join(*eventsDir, "*.json"))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("no events in %s (%v)", *eventsDir, err)
		}
		for _, f := range files {
			jobs = append(jobs, job{fn: lambdalocal.FunctionOf(f), event: f})
		}
	case *fn != "" && *eventPath != "":
		jobs = []job{{fn: *fn, event: *eventPath}}
	default:
		return fmt.Errorf("give -function NAME -event FILE, -all, or -coldstart N [-function NAME]")
	}
	for _, j := range jobs {
		if lambdalocal.Functions[j.fn] == "" {
			return fmt.Errorf("%s: no function %q (one of: %s)", j.event, j.fn, strings.Join(names(), ", "))
		}
	}
	src, err := os.ReadFile(*tplPath)
	if err != nil {
		return err
	}
	rie, err := lambdalocal.EnsureEmulator(ctx, filepath.Join(*binDir, "tools"))
	if err != nil {
		return err
	}
	// One build per function, all before moto starts.
	bootstraps := map[string]string{}
	for _, j := range jobs {
		if bootstraps[j.fn] == "" {
			fmt.Fprintf(os.Stderr, "lambdalocal: build %s\n", j.fn)
			if bootstraps[j.fn], err = lambdalocal.Build(ctx, ".", filepath.Join(*binDir, "lambda-local"), j.fn); err != nil {
				return err
			}
		}
	}
	moto, err := awstest.StartServer()
	if err != nil {
		return err
	}
	defer func() {
		if err := moto.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "lambdalocal:", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "lambdalocal: moto_server on %s\n", moto.URL)
	stage, err := lambdalocal.NewStage(ctx, moto.Config(), src, *stageName)
	if err != nil {
		return err
	}

	if *coldstarts > 0 {
		return coldStarts(ctx, stage, rie, bootstraps, jobs, *eventsDir, *coldstarts)
	}

	// Functions in a fixed order (the webhook's run before the runner's
	// batch is not needed: the stage holds a queued run), one emulator each.
	byFn := map[string][]string{}
	for _, j := range jobs {
		byFn[j.fn] = append(byFn[j.fn], j.event)
	}
	var failed []string
	for _, name := range names() {
		evs := byFn[name]
		if len(evs) == 0 {
			continue
		}
		if err := invokeAll(ctx, stage, rie, bootstraps[name], name, evs, *all, *verbose, &failed); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d answers wrong: %s", len(failed), len(jobs), strings.Join(failed, ", "))
	}
	if *all {
		fmt.Fprintf(os.Stderr, "lambdalocal: all %d events answered as expected\n", len(jobs))
	}
	return nil
}

type job struct{ fn, event string }

// coldStarts prints, per function, the emulator's Init Duration and the
// first invocation's Duration over n fresh starts, as a Markdown table,
// with the load average before and after (the figures mean little on a
// busy machine without it).
func coldStarts(ctx context.Context, stage *lambdalocal.Stage, rie string, bootstraps map[string]string, jobs []job, eventsDir string, n int) error {
	load0 := loadAvg()
	type row struct {
		fn   string
		size int64
		cs   []lambdalocal.ColdStart
	}
	var rows []row
	for _, j := range jobs {
		fmt.Fprintf(os.Stderr, "lambdalocal: %s: %d cold starts\n", j.fn, n)
		cs, err := stage.ColdStarts(ctx, rie, bootstraps[j.fn], j.fn, eventsDir, n)
		if err != nil {
			return err
		}
		st, err := os.Stat(bootstraps[j.fn])
		if err != nil {
			return err
		}
		rows = append(rows, row{j.fn, st.Size(), cs})
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
	fmt.Printf("%d fresh starts per function under the emulator (%s/%s, %d CPUs), load average before %s, after %s\n\n",
		n, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), load0, loadAvg())
	fmt.Println("Init: invoke sent → the bootstrap's first GET /runtime/invocation/next; first invocation: the event handed over → its response posted;")
	fmt.Println("init CPU: the bootstrap's user+system CPU at its first next (10 ms ticks); caller's wait: invoke sent → answer; REPORT: the emulator's own Init Duration / Duration, medians (its Init returns once the process is started).")
	fmt.Println()
	fmt.Println("| function | bootstrap (this machine) | event | init p50 | init max | init CPU p50 | first invocation p50 | max | caller's wait p50 | max | REPORT Init / Duration p50 |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		var init, cpu, handler, wall, rInit, rDur []time.Duration
		for _, c := range r.cs {
			init, cpu, handler, wall = append(init, c.Init), append(cpu, c.InitCPU), append(handler, c.Handler), append(wall, c.Wall)
			rInit, rDur = append(rInit, c.ReportInit), append(rDur, c.ReportDuration)
		}
		p50 := func(ds []time.Duration) string { return ms(lambdalocal.Percentile(ds, 50)) }
		fmt.Printf("| %s | %.1f MB | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s |\n", r.fn, float64(r.size)/1e6, lambdalocal.ColdStartEvents[r.fn],
			p50(init), ms(slices.Max(init)), p50(cpu), p50(handler), ms(slices.Max(handler)), p50(wall), ms(slices.Max(wall)), p50(rInit), p50(rDur))
	}
	return nil
}

// loadAvg is the machine's 1, 5 and 15 minute load averages, or "?".
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// invokeAll runs one function's bootstrap under the emulator and sends it
// each event: with check, each answer is judged and a line printed;
// without, the answer is printed as is.
func invokeAll(ctx context.Context, stage *lambdalocal.Stage, rie, bootstrap, fn string, evs []string, check, verbose bool, failed *[]string) error {
	env, err := stage.Env(lambdalocal.Functions[fn])
	if err != nil {
		return err
	}
	em, err := lambdalocal.Start(rie, bootstrap, env)
	if err != nil {
		return err
	}
	defer func() {
		if err := em.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "lambdalocal:", err)
		}
		if verbose || !check {
			fmt.Fprint(os.Stderr, em.Logs())
		}
	}()
	for _, ev := range evs {
		raw, err := stage.Event(ev)
		if err != nil {
			return err
		}
		payload, err := em.Invoke(ctx, raw)
		if !check {
			if err != nil {
				return err
			}
			return printAnswer(payload)
		}
		if err == nil {
			err = stage.Check(ctx, ev, payload)
		}
		if err != nil {
			*failed = append(*failed, filepath.Base(ev))
			fmt.Printf("FAIL %-28s %v\n", filepath.Base(ev), err)
			continue
		}
		fmt.Printf("ok   %-28s %d bytes\n", filepath.Base(ev), len(payload))
	}
	return nil
}

// printAnswer prints the answer indented, and a proxy response's JSON body
// decoded, as sam shows it.
func printAnswer(payload []byte) error {
	var v map[string]any
	if err := json.Unmarshal(payload, &v); err != nil {
		_, err = os.Stdout.Write(append(payload, '\n'))
		return err
	}
	if body, ok := v["body"].(string); ok {
		var b any
		if json.Unmarshal([]byte(body), &b) == nil {
			v["body"] = b
		}
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(out, '\n'))
	return err
}

func names() []string {
	var out []string
	for n := range lambdalocal.Functions {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
