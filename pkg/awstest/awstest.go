// Package awstest runs the AWS adapters' tests against moto_server, the local
// AWS API emulator, so that they exercise the real SDK and wire protocol
// without any traffic leaving the machine.
//
// A package whose tests use it shares one moto_server per test binary:
//
//	func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		cfg := awstest.Start(t)                 // static fake credentials, loopback endpoint
//		table := awstest.UniqueName(t, "flows") // tests share the server, not tables
//		...
//	}
//
// Without Main, Start gives each test its own server and stops it when the
// test ends, which is correct but slow.
package awstest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Region is the region of every Config Start returns.
const Region = "us-east-1"

// Fake credentials: moto accepts any, and static ones keep the SDK from
// looking for real ones (environment, files, IMDS).
const (
	accessKeyID     = "AKIAIOSFODNN7EXAMPLE"
	secretAccessKey = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

// InstallHint says how to get moto_server; tests fail with it rather than
// skip, so that CI never passes without running them.
const InstallHint = "moto_server not found in PATH: install it with `pip install 'moto[server]'` (the AWS adapter tests need it and are never skipped)"

// startTimeout bounds how long a fresh moto_server may take to answer.
const startTimeout = 60 * time.Second

var shared struct {
	mu      sync.Mutex
	inMain  bool
	server  *Server
	failure error // a failed start is not retried within one binary
}

// Main runs the tests of a package and then stops the shared moto_server, if
// a test started one. Use it from TestMain: os.Exit(awstest.Main(m)).
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server != nil {
		if err := shared.server.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "awstest:", err)
		}
		shared.server = nil
	}
	return code
}

// Start returns an aws.Config for a running moto_server: static fake
// credentials, region us-east-1 and BaseEndpoint set to the server, so no
// request can reach AWS. Under Main the server is shared by the whole test
// binary; otherwise each test gets its own, stopped at its end. A missing
// moto_server fails the test with InstallHint.
func Start(t testing.TB) aws.Config {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		s, err := StartServer()
		if err != nil {
			t.Fatalf("awstest: %v", err)
		}
		t.Cleanup(func() {
			if err := s.Stop(); err != nil {
				t.Errorf("awstest: %v", err)
			}
		})
		return s.Config()
	}
	if shared.server == nil && shared.failure == nil {
		shared.server, shared.failure = StartServer()
	}
	if shared.failure != nil {
		t.Fatalf("awstest: %v", shared.failure)
	}
	return shared.server.Config()
}

// Server is one moto_server process on 127.0.0.1.
type Server struct {
	// URL is the server's endpoint, such as http://127.0.0.1:41234.
	URL   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when the process has been waited for
	err   error         // the process's exit, valid once done is closed
	log   *limitedWriter
}

// StartServer starts moto_server on a free loopback port and waits until it
// answers. The caller must Stop it.
func StartServer() (*Server, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return nil, errors.New(InstallHint)
	}
	// Another process may take the port between picking and binding it;
	// moto_server then exits at once, and a new port is tried.
	var last error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := startOn(bin, port)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

// startOn runs moto_server under a shell that kills it when its stdin
// closes: if the test binary dies without cleaning up (a timeout panic, a
// kill), the pipe closes with it and the server goes too.
func startOn(bin string, port int) (*Server, error) {
	script := `"$0" -H 127.0.0.1 -p "$1" & pid=$!; cat >/dev/null; kill $pid 2>/dev/null; wait $pid`
	cmd := exec.Command("/bin/sh", "-c", script, bin, strconv.Itoa(port))
	cmd.Env = append(os.Environ(),
		"AWS_ACCESS_KEY_ID="+accessKeyID,
		"AWS_SECRET_ACCESS_KEY="+secretAccessKey,
		"AWS_DEFAULT_REGION="+Region,
		"AWS_EC2_METADATA_DISABLED=true",
	)
	// Its own process group, so that Stop reaches moto_server and its shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	log := &limitedWriter{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = log, log
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("moto_server: stdin: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	s := &Server{
		URL: "http://127.0.0.1:" + strconv.Itoa(port), cmd: cmd, stdin: stdin,
		done: make(chan struct{}), log: log,
	}
	go func() { s.err = cmd.Wait(); close(s.done) }()
	if err := s.waitReady(startTimeout); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls the server until it answers HTTP.
func (s *Server) waitReady(timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.done:
			return fmt.Errorf("moto_server on %s exited before answering: %v; output:\n%s", s.URL, s.err, s.output())
		default:
		}
		resp, err := client.Get(s.URL + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("moto_server on %s did not answer within %s: %v; output:\n%s", s.URL, timeout, err, s.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) output() string { return s.log.String() }

// Config returns an aws.Config for the server (see Start).
func (s *Server) Config() aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider(accessKeyID, secretAccessKey, ""),
		BaseEndpoint: aws.String(s.URL),
		// moto answers at once or not at all: a short retry budget keeps a
		// broken test from hanging.
		RetryMaxAttempts: 3,
	}
}

// Stop kills the server's process group and waits for it to exit.
func (s *Server) Stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	_ = s.stdin.Close()
	pid := s.cmd.Process.Pid
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop moto_server (pid %d): %w", pid, err)
	}
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-s.done
	}
	return nil
}

// UniqueName returns a name no other test in this binary (or an earlier run
// against the same server) uses, for tables, secrets and the like:
// letters, digits and dashes, at most 64 characters.
func UniqueName(t testing.TB, prefix string) string {
	n := nameSeq.Add(1)
	base := nonName.ReplaceAllString(strings.ToLower(t.Name()), "-")
	base = strings.Trim(base, "-")
	if len(base) > 24 {
		base = base[:24]
	}
	name := fmt.Sprintf("%s-%s-%d-%d", prefix, base, os.Getpid(), n)
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	return strings.Trim(name, "-")
}

var (
	nameSeq atomic.Int64
	nonName = regexp.MustCompile(`[^a-z0-9]+`)
)

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pick a port for moto_server: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// limitedWriter keeps the first max bytes of the server's output for error
// messages and drops the rest, so a chatty server cannot grow memory.
type limitedWriter struct {
	mu  sync.Mutex
	b   strings.Builder
	max int
}

func (w *limitedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *limitedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if room := w.max - w.b.Len(); room > 0 {
		if len(p) > room {
			w.b.Write(p[:room])
		} else {
			w.b.Write(p)
		}
	}
	return len(p), nil
}
