package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what wrk reports for one load.
type wrkResult struct {
	reqs     float64 // requests per second
	p50, p99 time.Duration
	non2xx   int64
	errors   int64
	cmd      string
}

// runWrk runs wrk with conns connections for c.dur, POSTing body as JSON
// to url, with its latency distribution.
func runWrk(ctx context.Context, c config, url, body string, conns int) (wrkResult, error) {
	dir, err := os.MkdirTemp("", "flowbench-wrk")
	if err != nil {
		return wrkResult{}, err
	}
	defer os.RemoveAll(dir)
	script := filepath.Join(dir, "post.lua")
	lua := fmt.Sprintf("wrk.method = \"POST\"\nwrk.body = %q\nwrk.headers[\"Content-Type\"] = \"application/json\"\n", body)
	if err := os.WriteFile(script, []byte(lua), 0o600); err != nil {
		return wrkResult{}, err
	}
	args := []string{"-t2", fmt.Sprintf("-c%d", conns), fmt.Sprintf("-d%ds", int(c.dur.Seconds())), "--latency", "--timeout", "10s", "-s", script, url}
	shown := append([]string(nil), args...)
	shown[len(shown)-2] = "post.lua"
	res := wrkResult{cmd: "wrk " + strings.Join(shown, " ")}
	log.Printf("flowbench: %s", res.cmd)
	cmd := exec.CommandContext(ctx, "wrk", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return res, fmt.Errorf("wrk: %v\n%s", err, out)
	}
	if err := parseWrk(string(out), &res); err != nil {
		return res, fmt.Errorf("wrk output: %v\n%s", err, out)
	}
	return res, nil
}

func parseWrk(out string, res *wrkResult) error {
	sc := bufio.NewScanner(strings.NewReader(out))
	inDist := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 0:
		case f[0] == "Latency" && len(f) > 1 && f[1] == "Distribution":
			inDist = true
		case inDist && len(f) == 2 && strings.HasSuffix(f[0], "%"):
			d, err := parseWrkDuration(f[1])
			if err != nil {
				return err
			}
			switch f[0] {
			case "50%":
				res.p50 = d
			case "99%":
				res.p99 = d
			}
		case f[0] == "Requests/sec:" && len(f) == 2:
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return err
			}
			res.reqs = v
		case f[0] == "Non-2xx":
			n, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
			res.non2xx = n
		case f[0] == "Socket" && len(f) > 2:
			// Socket errors: connect 0, read 0, write 0, timeout 0
			for i := 3; i < len(f); i += 2 {
				n, _ := strconv.ParseInt(strings.TrimSuffix(f[i], ","), 10, 64)
				res.errors += n
			}
		}
	}
	if res.reqs == 0 {
		return fmt.Errorf("no Requests/sec line")
	}
	return nil
}

func parseWrkDuration(s string) (time.Duration, error) {
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, err
			}
			return time.Duration(f * float64(u.unit)), nil
		}
	}
	return 0, fmt.Errorf("bad duration %q", s)
}
