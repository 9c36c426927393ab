// Package sandbox runs the JavaScript of CODE steps (goja) in child
// processes, so that a script can take neither the memory nor the CPU of
// the server that runs it. A Pool re-executes its own binary with
// FLOW_SANDBOX=1 (main calls MaybeServe first), puts hard rlimits on the
// child (address space, CPU time, no file writes), and talks to it in
// length-prefixed JSON frames over its stdin and stdout. A child serves
// scripts one after another, each in a fresh JavaScript runtime, until a
// script misbehaves (time or memory limit, crash): then it is killed and
// replaced. A few children are kept warm, so a warm step costs one round
// trip over a pipe.
//
// The guarantees are outside the child: the parent kills it at the
// script's wall-clock limit (a script stuck inside one built-in, such as
// JSON.stringify of a huge object, never sees goja's interrupt), and the
// kernel stops it at its address-space and CPU limits. Inside, goja's
// interrupt at the timeout and a heap check give scripts a clean error in
// the common case.
//
// Scripts see the language and five helpers, nothing else: no require, no
// timers, no file, network, process or environment access. Date is the
// only clock (millisecond resolution); there is no high-resolution timer.
package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/fairshare"
)

// Config sets up a Pool. Zero fields take the defaults.
type Config struct {
	// Executable is the binary to re-execute; default os.Executable(). It
	// must call MaybeServe first in main.
	Executable string
	// Idle is how many children are kept warm (default 2).
	Idle int
	// Max bounds the scripts running at once (default 8); more wait.
	Max int
	// PerProject bounds the scripts one project runs at once (default
	// Max - Max/4: 6 of 8), so another project always finds a child.
	PerProject int
	// Memory is a script's heap limit (default automation.CodeMemoryBytes).
	Memory int64
	// Grace is how long past its timeout a script's child may take to
	// answer before it is killed (default 100ms).
	Grace time.Duration
	Log   *slog.Logger
}

// Defaults and fixed limits of a Pool.
const (
	defaultIdle  = 2
	defaultMax   = 8
	defaultGrace = 100 * time.Millisecond
	// startTimeout bounds a child's start-up, to its first frame.
	startTimeout = 10 * time.Second
	// childCPU is a child's CPU time over its whole life (RLIMIT_CPU); it is
	// retired at half of it, so a script always has its full timeout.
	childCPU = 120 * time.Second
	// maxUses retires a child after this many scripts, so that nothing a
	// runtime leaves behind accumulates.
	maxUses = 5000
	// addressSlack is address space beyond the idle size and twice the
	// heap: goroutine stacks, a new heap arena, goja's compiled code.
	addressSlack = 96 << 20
	// maxResponseBytes bounds a child's answer: the output cap and logs.
	maxResponseBytes = automation.MaxCodeOutputBytes + 512<<10
)

// Pool runs scripts in warm child processes. It is safe for concurrent use.
type Pool struct {
	exe    string
	memory int64
	grace  time.Duration
	log    *slog.Logger

	idle  chan *child
	slots *fairshare.Slots // one per running script, shared fairly by project
	wake  chan struct{}    // a child was discarded: top the idle ones up

	mu     sync.Mutex
	live   int // children started and not yet discarded
	closed bool
	done   chan struct{}
	wg     sync.WaitGroup
}

var _ automation.CodeRunner = (*Pool)(nil)

// New starts a Pool and its first child, so a binary that cannot serve
// (MaybeServe missing from main) fails here rather than on the first step.
func New(cfg Config) (*Pool, error) {
	if cfg.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("sandbox: find own executable: %w", err)
		}
		cfg.Executable = exe
	}
	if cfg.Idle <= 0 {
		cfg.Idle = defaultIdle
	}
	if cfg.Max <= 0 {
		cfg.Max = defaultMax
	}
	if cfg.Memory <= 0 {
		cfg.Memory = automation.CodeMemoryBytes
	}
	if cfg.Grace <= 0 {
		cfg.Grace = defaultGrace
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	p := &Pool{
		exe: cfg.Executable, memory: cfg.Memory, grace: cfg.Grace, log: cfg.Log,
		idle: make(chan *child, cfg.Idle), slots: fairshare.New(cfg.Max, cfg.PerProject),
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
	c, err := p.spawn()
	if err != nil {
		return nil, err
	}
	p.idle <- c
	p.wg.Add(1)
	go p.refill()
	p.signal()
	return p, nil
}

// Close kills every child. Scripts running now fail.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	p.mu.Unlock()
	p.wg.Wait()
	for {
		select {
		case c := <-p.idle:
			p.discard(c)
		default:
			return nil
		}
	}
}

// RunCode runs one script in a child. See automation.CodeRunner.
func (p *Pool) RunCode(ctx context.Context, req automation.CodeRequest) (automation.CodeResult, error) {
	if len(req.Code) > automation.MaxCodeBytes {
		return automation.CodeResult{Error: fmt.Sprintf("the code is %d bytes; at most %d are allowed", len(req.Code), automation.MaxCodeBytes)}, nil
	}
	if limit := maxRequestBytes - automation.MaxCodeBytes - 1<<10; len(req.Scope) > limit {
		return automation.CodeResult{Error: fmt.Sprintf("the run's data for this step is %d bytes; a script takes at most %d", len(req.Scope), limit)}, nil
	}
	// One project's backlog must not hold every child: the slots are shared
	// fairly, and no project holds them all (docs/reliability.md).
	if err := p.slots.Acquire(ctx, req.Project); err != nil {
		return automation.CodeResult{}, fmt.Errorf("sandbox: wait for a free child: %w", err)
	}
	defer p.slots.Release(req.Project)
	c, err := p.get()
	if err != nil {
		return automation.CodeResult{}, err
	}
	timeout := req.Timeout()
	res, keep, err := p.run(ctx, c, request{
		Code: req.Code, Scope: req.Scope, TimeoutMs: timeout.Milliseconds(),
		MemoryBytes: p.memory, OutputBytes: automation.MaxCodeOutputBytes,
	}, timeout)
	p.put(c, keep)
	if err != nil {
		return automation.CodeResult{}, err
	}
	return automation.CodeResult{Output: res.Output, Logs: res.Logs, Error: res.Error}, nil
}

// Load is how many scripts run now and how many wait for a child.
func (p *Pool) Load() (running, waiting int) {
	return p.slots.Used(), p.slots.Waiting()
}

// run sends one request to c and reads the answer by the deadline. keep
// says whether c may serve again. A script that breaks the child is a
// result with Error, not an error: only a cancelled ctx is one.
func (p *Pool) run(ctx context.Context, c *child, req request, timeout time.Duration) (res response, keep bool, err error) {
	deadline := time.Now().Add(timeout + p.grace)
	ctxFirst := false // the run's deadline comes before the script's
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, ctxFirst = d, true
	}
	_ = c.in.SetWriteDeadline(deadline)
	_ = c.out.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, c.kill)
	defer stop()

	ioErr := writeFrame(c.in, req)
	if ioErr == nil {
		ioErr = readFrame(c.r, maxResponseBytes, &res)
	}
	if ioErr == nil {
		c.uses++
		keep = res.Limit == "" && c.uses < maxUses && time.Duration(res.CPUMs)*time.Millisecond < childCPU/2
		return res, keep, nil
	}
	c.kill()
	if ctx.Err() != nil {
		return res, false, fmt.Errorf("sandbox: script stopped: %w", ctx.Err())
	}
	if errors.Is(ioErr, os.ErrDeadlineExceeded) && ctxFirst {
		// The pipe's deadline can pass a moment before ctx's own timer.
		return res, false, fmt.Errorf("sandbox: script stopped: %w", context.DeadlineExceeded)
	}
	if errors.Is(ioErr, os.ErrDeadlineExceeded) {
		return response{Error: fmt.Sprintf("the script ran longer than its %s timeout and was stopped", timeout)}, false, nil
	}
	return response{Error: p.death(c, timeout)}, false, nil
}

// death says why a child stopped while running a script.
func (p *Pool) death(c *child, timeout time.Duration) string {
	code := -1
	select {
	case <-c.exited:
		code = c.cmd.ProcessState.ExitCode() // set before exited closes
	case <-time.After(time.Second):
	}
	out := c.stderr.String()
	switch {
	case strings.Contains(out, "out of memory") || strings.Contains(out, "cannot allocate memory"):
		return fmt.Sprintf("the script used more than its %d MiB of memory and was stopped", p.memory>>20)
	case strings.Contains(out, "stack exceeds"):
		return "the script nested values too deeply and was stopped"
	case code == exitCPU:
		return fmt.Sprintf("the script used more CPU time than its %s timeout and was stopped", timeout)
	}
	p.log.Warn("sandbox child stopped while running a script", "exitCode", code, "stderr", firstLine(out))
	return fmt.Sprintf("the sandbox stopped while running the script (exit code %d)", code)
}

// get returns an idle child, or starts one.
func (p *Pool) get() (*child, error) {
	for {
		select {
		case c := <-p.idle:
			if c.alive() {
				return c, nil
			}
			p.discard(c)
		default:
			return p.spawn()
		}
	}
}

// put keeps c warm if it may serve again and there is room, else kills it.
func (p *Pool) put(c *child, keep bool) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if keep && !closed && c.alive() {
		select {
		case p.idle <- c:
			return
		default:
		}
	}
	p.discard(c)
}

// discard kills c and asks for a replacement.
func (p *Pool) discard(c *child) {
	c.kill()
	p.mu.Lock()
	p.live--
	p.mu.Unlock()
	p.signal()
}

func (p *Pool) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// refill keeps cap(idle) children alive, starting them in the background
// so that no script waits for a start after a child was discarded.
func (p *Pool) refill() {
	defer p.wg.Done()
	for {
		select {
		case <-p.done:
			return
		case <-p.wake:
		}
		for {
			p.mu.Lock()
			need := !p.closed && p.live < cap(p.idle) && len(p.idle) < cap(p.idle)
			p.mu.Unlock()
			if !need {
				break
			}
			c, err := p.spawn()
			if err != nil {
				p.log.Error("sandbox: start a warm child", "err", err)
				break
			}
			select {
			case p.idle <- c:
			default:
				p.discard(c)
			}
		}
	}
}

// child is one sandbox process and the parent's ends of its pipes.
type child struct {
	cmd    *exec.Cmd
	in     *os.File // its stdin
	out    *os.File // its stdout
	r      *bufio.Reader
	stderr *head
	exited chan struct{}
	uses   int
	once   sync.Once
}

// spawn starts a child, waits for its hello, then limits it.
func (p *Pool) spawn() (*child, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	c := &child{in: inW, out: outR, r: bufio.NewReaderSize(outR, 64<<10), stderr: &head{}, exited: make(chan struct{})}
	cmd := exec.Command(p.exe)
	// Nothing of the parent's environment (credentials, keys) reaches a
	// script's process.
	// MALLOC_ARENA_MAX matters only to a cgo build (glibc): it keeps each
	// new thread from reserving a 64 MiB malloc arena against RLIMIT_AS.
	cmd.Env = []string{envMarker + "=1", "GOMAXPROCS=1", "GOTRACEBACK=none", "MALLOC_ARENA_MAX=1"}
	cmd.Dir = "/"
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, c.stderr
	cmd.SysProcAttr = childAttr()
	c.cmd = cmd
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, fmt.Errorf("sandbox: start %s: %w", p.exe, err)
	}
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	p.mu.Lock()
	p.live++
	p.mu.Unlock()

	fail := func(err error) (*child, error) {
		p.discard(c)
		return nil, err
	}
	_ = outR.SetReadDeadline(time.Now().Add(startTimeout))
	var h hello
	if err := readFrame(c.r, 1<<10, &h); err != nil || h.Sandbox != protocol {
		return fail(fmt.Errorf("sandbox: %s did not start as a sandbox child (does its main call sandbox.MaybeServe first?): %v %s",
			p.exe, err, c.stderr.String()))
	}
	idle, err := addressSpace(cmd.Process.Pid)
	if err != nil {
		return fail(fmt.Errorf("sandbox: measure child: %w", err))
	}
	if err := setLimits(cmd.Process.Pid, idle+uint64(2*p.memory)+addressSlack, childCPU); err != nil {
		return fail(err)
	}
	return c, nil
}

func (c *child) alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// kill ends the process and closes the parent's pipe ends.
func (c *child) kill() {
	c.once.Do(func() {
		_ = c.cmd.Process.Kill()
		c.in.Close()
		c.out.Close()
	})
}

// head keeps the first few KiB a child wrote to stderr (a fatal error's
// message comes first, then every goroutine's stack), to tell an
// out-of-memory death from a crash.
type head struct {
	mu  sync.Mutex
	buf []byte
}

const headBytes = 4 << 10

func (t *head) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := headBytes - len(t.buf); room > 0 {
		t.buf = append(t.buf, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

func (t *head) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
