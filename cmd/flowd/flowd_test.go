package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/pgstore/pgtest"
)

// The binaries the process tests start, built once.
var flowdBin, flowctlBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "flowd-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	flowdBin, flowctlBin = filepath.Join(dir, "flowd"), filepath.Join(dir, "flowctl")
	for bin, pkg := range map[string]string{flowdBin: ".", flowctlBin: "../flowctl"} {
		// The flowdtest tag adds the hooks of hooks_flowdtest.go, which
		// change nothing unless their FLOWD_TEST_ settings are given.
		build := exec.Command("go", "build", "-tags", "flowdtest", "-o", bin, pkg)
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", pkg, err)
			os.Exit(1)
		}
	}
	code := m.Run()
	// The PostgreSQL cluster of the tests of nodes on it, if one started.
	if err := pgtest.StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a flowd process started by a test.
type proc struct {
	cmd    *exec.Cmd
	base   string // http://127.0.0.1:port
	dir    string // FLOWD_DATA_DIR
	stdout *syncBuffer
	stderr *syncBuffer
	exited <-chan struct{} // closed once the process has exited and been waited for
}

// startFlowd starts flowd on a free loopback port with data in dataDir and
// waits until it answers; cleanup stops it by PID.
func startFlowd(t testing.TB, dataDir string, env ...string) *proc {
	t.Helper()
	return startFlowdCmd(t, exec.Command(flowdBin), dataDir, env...)
}

// startFlowdCmd is startFlowd with the command that starts flowd given
// (a shell that sets a limit, then execs flowdBin).
func startFlowdCmd(t testing.TB, cmd *exec.Cmd, dataDir string, env ...string) *proc {
	t.Helper()
	addr := freeAddr(t)
	p := &proc{base: "http://" + addr, dir: dataDir, stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	p.cmd = cmd
	p.cmd.Env = append(os.Environ(), "FLOWD_ADDR="+addr, "FLOWD_DATA_DIR="+dataDir)
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start flowd: %v", err)
	}
	exited := make(chan struct{})
	go func() { p.cmd.Wait(); close(exited) }()
	p.exited = exited
	t.Cleanup(func() { p.stop(t) })
	testwait.For(t, testwait.Hang, "flowd to answer on "+addr, func() bool {
		resp, err := http.Get(p.base + "/api/v1/openapi.json")
		if err == nil {
			resp.Body.Close()
			return true
		}
		select {
		case <-exited:
			t.Fatalf("flowd exited at start: %v\nstderr:\n%s", p.cmd.ProcessState, p.stderr)
		default:
		}
		return false
	})
	return p
}

// syncBuffer is a bytes.Buffer that a test may read while the process
// writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// stopWithin is how long stop waits after SIGTERM: flowd's shutdown grace
// (20 s by default) and a minute of margin, since on a loaded machine the
// exit after the grace takes seconds (before: 25 s, which a loaded 2-core
// machine missed). Only a hang fails it.
const stopWithin = 20*time.Second + time.Minute

// stop sends SIGTERM and waits for a graceful exit.
func (p *proc) stop(t testing.TB) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if !p.cmd.ProcessState.Success() {
			t.Errorf("flowd exited with %v\nstderr:\n%s", p.cmd.ProcessState, p.stderr)
		}
	case <-time.After(stopWithin):
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("flowd did not stop within %s of SIGTERM", stopWithin)
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestFirstStartCreatesProjectAndKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir)
	keyFile := filepath.Join(dir, "initial-api-key")
	st, err := os.Stat(keyFile)
	if err != nil {
		t.Fatalf("initial key file: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("initial key file mode = %v, want 0600", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(keyFile)
	key := strings.TrimSpace(string(raw))
	if !strings.Contains(p.stdout.String(), key) {
		t.Errorf("stdout does not show the key once:\n%s", p.stdout)
	}
	if strings.Contains(p.stderr.String(), key) {
		t.Errorf("the key appears in the logs:\n%s", p.stderr)
	}
	req, _ := http.NewRequest("GET", p.base+"/api/v1/flows", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("GET /api/v1/flows with the initial key = %d (request id %q)", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}

	// A restart keeps the project and prints no new key.
	p.stop(t)
	p2 := startFlowd(t, dir)
	if strings.Contains(p2.stdout.String(), "fsk_") {
		t.Errorf("second start printed a key:\n%s", p2.stdout)
	}
	req2, _ := http.NewRequest("GET", p2.base+"/api/v1/flows", nil)
	req2.Header.Set("Authorization", "Bearer "+key)
	resp, err = http.DefaultClient.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after a restart the initial key gets %d, want 200", resp.StatusCode)
	}
}

// flowctl runs the flowctl binary on a data directory and returns stdout.
func flowctl(t *testing.T, dataDir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(flowctlBin, append([]string{"--data-dir", dataDir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("flowctl %v: %w: %s", args, err, stderr.String())
	}
	return string(out), nil
}

func status(t testing.TB, base, key string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/v1/flows", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestFlowctlWhileFlowdRuns administers projects and keys on the data
// directory of a running flowd, as an operator would.
func TestFlowctlWhileFlowdRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir)

	out, err := flowctl(t, dir, "projects", "create", "acme", "--plan", "TEAM")
	if err != nil || !strings.Contains(out, "acme") || !strings.Contains(out, "TEAM") {
		t.Fatalf("projects create = %q, %v", out, err)
	}
	if _, err := flowctl(t, dir, "projects", "create", "acme", "--plan", "TEAM"); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("creating acme twice: err = %v, want a conflict", err)
	}
	if _, err := flowctl(t, dir, "projects", "create", "other", "--plan", "GOLD"); err == nil || !strings.Contains(err.Error(), "ENTERPRISE") {
		t.Errorf("plan GOLD: err = %v, want the allowed plans named", err)
	}
	out, err = flowctl(t, dir, "projects", "list")
	if err != nil || !strings.Contains(out, "default") || !strings.Contains(out, "acme") {
		t.Fatalf("projects list = %q, %v", out, err)
	}

	key, err := flowctl(t, dir, "keys", "create", "--project", "acme")
	if err != nil {
		t.Fatal(err)
	}
	key = strings.TrimSuffix(key, "\n")
	if strings.ContainsAny(key, " \n\t") || !strings.HasPrefix(key, "fsk_") {
		t.Fatalf("keys create printed %q, want the key alone", key)
	}
	if got := status(t, p.base, key); got != 200 {
		t.Fatalf("new key against the running flowd: %d, want 200", got)
	}

	out, err = flowctl(t, dir, "-o", "json", "keys", "list", "--project", "acme")
	if err != nil || strings.Contains(out, key) {
		t.Fatalf("keys list = %q, %v (must not show the key)", out, err)
	}
	var keys []struct{ ID string }
	if err := json.Unmarshal([]byte(out), &keys); err != nil || len(keys) != 1 {
		t.Fatalf("keys list -o json = %q: %v", out, err)
	}
	if _, err := flowctl(t, dir, "keys", "revoke", keys[0].ID); err != nil {
		t.Fatal(err)
	}
	if got := status(t, p.base, key); got != 401 {
		t.Fatalf("revoked key: %d, want 401", got)
	}
	out, err = flowctl(t, dir, "-o", "json", "keys", "create", "--project", "acme")
	var created struct{ Key, ID, Project, Created string }
	if err != nil || json.Unmarshal([]byte(out), &created) != nil || !strings.HasPrefix(created.Key, "fsk_") ||
		created.ID == "" || !strings.HasSuffix(created.Created, "Z") || created.Created[len(created.Created)-5] != '.' {
		t.Errorf("keys create -o json = %q, %v; want the key with the record, created with milliseconds", out, err)
	}
	if _, err := flowctl(t, dir, "keys", "create", "--project", "nope"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("keys for an unknown project: err = %v", err)
	}
}

// TestSecondFlowdOnOneDirectoryRefused: two flowd on one data directory
// would execute the same runs; the second stops with a clear error.
func TestSecondFlowdOnOneDirectoryRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	startFlowd(t, dir)
	cmd := exec.Command(flowdBin)
	cmd.Env = append(os.Environ(), "FLOWD_ADDR="+freeAddr(t), "FLOWD_DATA_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use by another flowd") {
		t.Fatalf("second flowd: err = %v, output %q", err, out)
	}
}
