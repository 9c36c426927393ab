package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// profiler takes a CPU profile of flowd (FLOWD_PPROF_ADDR) while a load
// runs, and renders its top entries for the report.
type profiler struct {
	done chan struct{}
	top  string
	err  error
}

// profileFor starts a CPU profile of d seconds now.
func (p *flowd) profileFor(ctx context.Context, d time.Duration) *profiler {
	pr := &profiler{done: make(chan struct{})}
	go func() {
		defer close(pr.done)
		if p.pprof == "" {
			pr.err = fmt.Errorf("flowd has no profile address")
			return
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.pprof, int(d.Seconds())), nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			pr.err = err
			return
		}
		defer resp.Body.Close()
		f, err := os.CreateTemp("", "flowbench-*.pprof")
		if err != nil {
			pr.err = err
			return
		}
		if dir := os.Getenv("FLOWBENCH_PROFILE_DIR"); dir != "" {
			// Keep the raw profile for a closer look (go tool pprof).
			defer func() { _ = os.Rename(f.Name(), filepath.Join(dir, filepath.Base(f.Name()))) }()
		} else {
			defer os.Remove(f.Name())
		}
		if _, err := io.Copy(f, resp.Body); err != nil {
			pr.err = err
			return
		}
		f.Close()
		out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-top", "-nodecount=20", f.Name()).CombinedOutput()
		if err != nil {
			pr.err = fmt.Errorf("%v: %s", err, out)
			return
		}
		// Keep the table: from the header line on.
		s := string(out)
		if i := strings.Index(s, "      flat"); i >= 0 {
			s = s[i:]
		}
		pr.top = s
	}()
	return pr
}

// wait returns the rendered profile, or a line saying why there is none.
func (pr *profiler) wait() string {
	<-pr.done
	if pr.err != nil {
		return "(no profile: " + pr.err.Error() + ")"
	}
	return pr.top
}
