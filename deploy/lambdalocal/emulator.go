// Package lambdalocal runs the functions' real bootstraps the way
// `sam local invoke` does, without Docker or sam: each bootstrap, built for
// this machine, runs under the Lambda Runtime Interface Emulator (the
// program sam's containers run), with the environment template.yaml gives
// the function, against moto_server as AWS. `make invoke-<function>` and
// `make invoke-all` drive it through deploy/cmd/lambdalocal; docs/aws.md
// describes them.
package lambdalocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The emulator, pinned: the version `make invoke-<function>` installs with
// go install when EmulatorPath finds no binary.
const (
	EmulatorModule  = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"
	EmulatorVersion = "v0.0.0-20261030222936-bef5c4ba774d"
	emulatorBinary  = "aws-lambda-rie"
)

// Functions maps each function's directory under functions/ to its
// logical ID in template.yaml.
var Functions = map[string]string{
	"api": "ApiFunction", "webhook": "WebhookFunction", "workflowhook": "WorkflowHookFunction",
	"runner": "RunnerFunction", "code": "CodeFunction",
}

// EnsureEmulator returns the emulator in binDir, installing the pinned
// version there first when it is missing.
func EnsureEmulator(ctx context.Context, binDir string) (string, error) {
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return "", err
	}
	path := filepath.Join(abs, emulatorBinary)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	cmd := exec.CommandContext(ctx, "go", "install", EmulatorModule+"@"+EmulatorVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+abs)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("lambdalocal: install the emulator (go install %s@%s): %w\n%s", EmulatorModule, EmulatorVersion, err, out)
	}
	return path, nil
}

// Build builds functions/<fn> of the module in repo as `sam build` does
// (the Makefile's flags), but for this machine's OS and architecture so
// that it runs here, into outDir/<fn>/bootstrap.
func Build(ctx context.Context, repo, outDir, fn string) (string, error) {
	if Functions[fn] == "" {
		return "", fmt.Errorf("lambdalocal: no function %q", fn)
	}
	out, err := filepath.Abs(filepath.Join(outDir, fn, "bootstrap"))
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags", "-s -w", "-o", out, "./functions/"+fn)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("lambdalocal: build %s: %w\n%s", fn, err, b)
	}
	return out, nil
}

// Emulator is one bootstrap running under the Runtime Interface Emulator
// on two free loopback ports (its invoke endpoint and the Runtime API).
type Emulator struct {
	url  string
	cmd  *exec.Cmd
	logs *tailBuffer
	done chan struct{}
}

// Start runs bootstrap under the emulator at rie with exactly env as the
// function's environment (plus PATH, which the emulator needs to start the
// process, and HOME). The bootstrap starts on the first invocation, as on
// Lambda. The caller must Stop it.
func Start(rie, bootstrap string, env map[string]string) (*Emulator, error) {
	apiPort, err := freePort()
	if err != nil {
		return nil, err
	}
	return start(rie, apiPort, []string{bootstrap}, bootstrap, env)
}

// start runs command (the bootstrap, or a command that execs it) under
// the emulator, whose Runtime API listens on apiPort.
func start(rie string, apiPort int, command []string, bootstrap string, env map[string]string) (*Emulator, error) {
	invokePort, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(invokePort)
	args := append([]string{
		"--runtime-interface-emulator-address", addr,
		"--runtime-api-address", "127.0.0.1:" + strconv.Itoa(apiPort),
		"--log-level", "error"},
		command...)
	cmd := exec.Command(rie, args...)
	cmd.Dir = filepath.Dir(bootstrap)
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	for _, k := range names {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	// Its own process group: Stop ends the emulator and the bootstrap it
	// started together, by the emulator's PID.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs := &tailBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lambdalocal: start the emulator: %w", err)
	}
	e := &Emulator{url: "http://" + addr + "/2015-03-31/functions/function/invocations", cmd: cmd, logs: logs, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(e.done)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return e, nil
		}
		select {
		case <-e.done:
			return nil, fmt.Errorf("lambdalocal: the emulator exited: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = e.Stop()
			return nil, fmt.Errorf("lambdalocal: the emulator did not listen on %s: %s", addr, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Invoke sends one event and returns the function's answer as the Invoke
// API would: the payload, and the function error type when the invocation
// failed (Function.ResponseSizeTooLarge, Runtime.ExitError, an error the
// handler returned, ...).
func (e *Emulator) Invoke(ctx context.Context, event []byte) (payload []byte, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(event))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("lambdalocal: invoke: %w", err)
	}
	defer resp.Body.Close()
	payload, err = io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("lambdalocal: read the answer: %w", err)
	}
	if ft := functionError(resp, payload); ft != "" {
		return payload, &FunctionError{Type: ft, Payload: payload}
	}
	return payload, nil
}

// FunctionError is an invocation the function failed.
type FunctionError struct {
	Type    string
	Payload []byte
}

func (f *FunctionError) Error() string {
	p := f.Payload
	if len(p) > 500 {
		p = p[:500]
	}
	return fmt.Sprintf("function error %s: %s", f.Type, p)
}

// functionError tells a failed invocation from an answer: the emulator
// marks it with X-Amz-Function-Error, or (for limits it enforces itself,
// such as the 6 MB response) answers a body with an errorType.
func functionError(resp *http.Response, payload []byte) string {
	if ft := resp.Header.Get("X-Amz-Function-Error"); ft != "" {
		return ft
	}
	if resp.StatusCode >= 300 {
		return "HTTP " + resp.Status
	}
	var e struct {
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
	}
	if bytes.HasPrefix(payload, []byte(`{"errorType"`)) || bytes.HasPrefix(payload, []byte(`{"errorMessage"`)) {
		if jsonUnmarshal(payload, &e) == nil && e.ErrorType != "" {
			return e.ErrorType
		}
	}
	return ""
}

// Logs is the tail of what the emulator and the bootstrap printed.
func (e *Emulator) Logs() string { return e.logs.String() }

// Stop ends the emulator and the bootstrap by the emulator's process
// group, and waits for it.
func (e *Emulator) Stop() error {
	select {
	case <-e.done:
		return nil
	default:
	}
	if err := syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("lambdalocal: stop the emulator: %w", err)
	}
	<-e.done
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("lambdalocal: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
