package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// flowd is a flowd process under test, with its own data directory.
type flowd struct {
	cmd    *exec.Cmd
	base   string
	dir    string
	key    string
	pprof  string // FLOWD_PPROF_ADDR
	stderr bytes.Buffer
	exited chan struct{}
}

var client = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256},
}

// startFlowd starts flowd on a free loopback port with data in dir (kept
// between starts, so that seeded data survives a restart).
// startFreshFlowd starts flowd on a new data directory for one section;
// stop ends it and removes the directory.
func startFreshFlowd(ctx context.Context, c config, section string, env ...string) (p *flowd, stop func(), err error) {
	dir, err := os.MkdirTemp("", "flowbench-"+section)
	if err != nil {
		return nil, nil, err
	}
	if p, err = startFlowd(ctx, c, dir, env...); err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return p, func() { p.stop(); os.RemoveAll(dir) }, nil
}

func startFlowd(ctx context.Context, c config, dir string, env ...string) (*flowd, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	pprofAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p := &flowd{base: "http://" + addr, dir: dir, pprof: pprofAddr, exited: make(chan struct{})}
	p.cmd = exec.Command(c.flowd)
	p.cmd.Env = append(os.Environ(), "FLOWD_ADDR="+addr, "FLOWD_DATA_DIR="+dir,
		"FLOWD_LOG_LEVEL=warn", "FLOWD_RATE_LIMIT=0", "FLOWD_PPROF_ADDR="+pprofAddr)
	p.cmd.Env = append(p.cmd.Env, c.env...)
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", c.flowd, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.base + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("flowd exited at start: %s", p.stderr.String())
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("flowd did not answer on %s", addr)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "initial-api-key"))
	if err != nil {
		p.stop()
		return nil, err
	}
	p.key = strings.TrimSpace(string(raw))
	return p, nil
}

// stop ends flowd with SIGTERM and waits for it.
func (p *flowd) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// peakRSS is flowd's peak resident memory so far (VmHWM), in bytes.
func (p *flowd) peakRSS() int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// cpuTime is flowd's user plus system CPU time so far, from /proc.
func (p *flowd) cpuTime() time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name (in parentheses): utime and stime
	// are the 14th and 15th fields of the whole line, in clock ticks (100/s).
	s := string(raw)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+1:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// api calls the management API and decodes the answer into out.
func (p *flowd) api(method, path, body string, want int, out any) error {
	req, err := http.NewRequest(method, p.base+path, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+p.key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s = %d %s, want %d", method, path, resp.StatusCode, raw, want)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// createFlow creates and enables a flow, returning its ID.
func (p *flowd) createFlow(def string) (string, error) {
	var f struct{ ID string }
	if err := p.api("POST", "/api/v1/flows", def, 201, &f); err != nil {
		return "", err
	}
	return f.ID, p.api("POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
}

// metric reads one unlabelled sample (or the sum of a labelled family) from
// /metrics.
func (p *flowd) metric(name string) (float64, error) {
	resp, err := client.Get(p.base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	found := false
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no metric %s", name)
	}
	return sum, nil
}

type runRecord struct {
	ID       string     `json:"id"`
	Status   string     `json:"status"`
	Created  time.Time  `json:"created"`
	Started  *time.Time `json:"started"`
	Finished *time.Time `json:"finished"`
}

// runs lists every run of a flow, newest first.
func (p *flowd) runs(flowID string) ([]runRecord, error) {
	var all []runRecord
	cursor := ""
	for {
		var page struct {
			Data   []runRecord `json:"data"`
			Cursor *string     `json:"cursor"`
		}
		path := "/api/v1/flows/" + flowID + "/runs?limit=100"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		if err := p.api("GET", path, "", 200, &page); err != nil {
			return all, err
		}
		all = append(all, page.Data...)
		if page.Cursor == nil || *page.Cursor == "" || len(page.Data) == 0 {
			return all, nil
		}
		cursor = url.QueryEscape(*page.Cursor)
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// okServer is the ceiling handler and the loopback sink: it reads the body
// and answers a small JSON document, nothing else.
func okServer() (*http.Server, string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: http.HandlerFunc(ceiling), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return srv, "http://" + l.Addr().String(), nil
}

var okBody = []byte(`{"ok":true}`)

// ceiling is the least a Go webhook receiver can do: read the body, answer.
func ceiling(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(okBody)
}
