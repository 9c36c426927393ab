package lambdalocal

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ColdStartEvents is the events/ file each function's cold starts send:
// one whose answer every fresh start can give again (a list, a new run,
// an inline workflow, a code call; the runner gets a newly queued run
// each time, see ColdStarts).
var ColdStartEvents = map[string]string{
	"api": "api-list-flows.json", "webhook": "webhook-post.json", "workflowhook": "workflowhook-post.json",
	"runner": "runner-batch.json", "code": "code-invoke.json",
}

// ColdStart is one fresh start of a bootstrap under the emulator and its
// first invocation, timed at the Runtime API (a proxy between the
// bootstrap and the emulator's Runtime API sees its calls).
type ColdStart struct {
	// Init runs from the invoke request sent to the emulator (which
	// starts the bootstrap process on it, as Lambda does on a cold
	// invocation) to the bootstrap's first GET /runtime/invocation/next:
	// fork and exec, the Go runtime and package init, the function's
	// configuration, AWS SDK clients, any secret read at start. The
	// emulator's own hand-off (microseconds to a millisecond) is in it.
	Init time.Duration
	// Handler runs from the emulator's answer to that first next (the
	// event handed over) to the bootstrap's POST of its response: the
	// first invocation alone, with cold caches and connections and the
	// first calls to moto.
	Handler time.Duration
	// Wall is what the caller waited for the first answer: the POST to the
	// emulator until its answer (Init + Handler + the emulator's hops).
	Wall time.Duration
	// InitCPU is the CPU time (user and system) the bootstrap process had
	// used when its first next arrived: its init's work, less sensitive
	// than Init to other processes on the machine; in clock ticks of
	// 10 ms, so coarse. Zero when /proc could not tell.
	InitCPU time.Duration
	// ReportInit and ReportDuration are the emulator's REPORT line's
	// "Init Duration" and "Duration". This emulator's Init returns as
	// soon as it has started the process, so its Init Duration is about
	// 0 and its Duration holds the init as well: kept to show that, not
	// as the figure.
	ReportInit, ReportDuration time.Duration
}

var reportLine = regexp.MustCompile(`REPORT RequestId: \S+\s+Init Duration: ([0-9.]+) ms\s+Duration: ([0-9.]+) ms`)

// ParseReport reads the Init Duration and Duration of the first REPORT
// line the emulator printed (it prints Init Duration only for the
// invocation that started the bootstrap).
func ParseReport(logs string) (init, dur time.Duration, err error) {
	m := reportLine.FindStringSubmatch(logs)
	if m == nil {
		return 0, 0, fmt.Errorf("lambdalocal: no REPORT line with an Init Duration in the emulator's output")
	}
	ms := func(s string) (time.Duration, error) {
		f, err := strconv.ParseFloat(s, 64)
		return time.Duration(f * float64(time.Millisecond)), err
	}
	if init, err = ms(m[1]); err != nil {
		return 0, 0, err
	}
	if dur, err = ms(m[2]); err != nil {
		return 0, 0, err
	}
	return init, dur, nil
}

// ColdStarts starts function fn's bootstrap fresh n times under the
// emulator at rie with the stage's environment, sends each start its
// ColdStartEvents file once, checks the answer, and returns what each
// start took. The runner's event names a run queued just before each
// start, so every first invocation runs a flow as a real first message
// would, rather than dropping a finished run.
func (s *Stage) ColdStarts(ctx context.Context, rie, bootstrap, fn, eventsDir string, n int) ([]ColdStart, error) {
	env, err := s.Env(Functions[fn])
	if err != nil {
		return nil, err
	}
	ev := eventsDir + "/" + ColdStartEvents[fn]
	var out []ColdStart
	for i := range n {
		if fn == "runner" {
			run, err := s.QueuedRun(ctx, s.Placeholders["__FLOW_ID__"], json.RawMessage(`{"event": "form.submitted", "data": {"email": "ada@example.com"}}`))
			if err != nil {
				return nil, err
			}
			s.Placeholders["__RUN_ID__"] = run.ID
		}
		raw, err := s.Event(ev)
		if err != nil {
			return nil, err
		}
		cs, err := coldStart(ctx, rie, bootstrap, env, raw, func(payload []byte) error { return s.Check(ctx, ev, payload) })
		if err != nil {
			return nil, fmt.Errorf("lambdalocal: %s cold start %d: %w", fn, i+1, err)
		}
		out = append(out, cs)
	}
	return out, nil
}

func coldStart(ctx context.Context, rie, bootstrap string, env map[string]string, event []byte, check func([]byte) error) (ColdStart, error) {
	apiPort, err := freePort()
	if err != nil {
		return ColdStart{}, err
	}
	var riePID atomic.Int64
	var initCPU time.Duration
	probe, err := newRuntimeProbe("127.0.0.1:"+strconv.Itoa(apiPort), func() {
		// The bootstrap waits on its first next while this runs: what it
		// used so far is its init's.
		initCPU = processCPU(int(riePID.Load()), bootstrap)
	})
	if err != nil {
		return ColdStart{}, err
	}
	defer probe.close()
	// The emulator sets AWS_LAMBDA_RUNTIME_API to its own Runtime API and
	// lets no function environment change it; env(1) execs the bootstrap
	// in place with it pointing at the probe instead.
	envCmd, err := exec.LookPath("env")
	if err != nil {
		return ColdStart{}, fmt.Errorf("lambdalocal: env(1) to point the bootstrap at the probe: %w", err)
	}
	em, err := start(rie, apiPort, []string{envCmd, "AWS_LAMBDA_RUNTIME_API=" + probe.addr, bootstrap}, bootstrap, env)
	if err != nil {
		return ColdStart{}, err
	}
	riePID.Store(int64(em.cmd.Process.Pid))
	defer em.Stop()
	t0 := time.Now()
	payload, err := em.Invoke(ctx, event)
	wall := time.Since(t0)
	if err == nil {
		err = check(payload)
	}
	if err != nil {
		return ColdStart{}, fmt.Errorf("%w\n%s", err, em.Logs())
	}
	firstNext, handedOver, responded := probe.times()
	if firstNext.IsZero() || handedOver.IsZero() || responded.IsZero() {
		return ColdStart{}, fmt.Errorf("lambdalocal: the bootstrap answered without going through the probe (next %v, event %v, response %v)", firstNext, handedOver, responded)
	}
	cs := ColdStart{Init: firstNext.Sub(t0), Handler: responded.Sub(handedOver), Wall: wall, InitCPU: probe.cpu(func() time.Duration { return initCPU })}
	// The REPORT line follows the answer on the emulator's stdout: wait
	// for it (bounded), since the answer can reach us first.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if cs.ReportInit, cs.ReportDuration, err = ParseReport(em.Logs()); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		return ColdStart{}, fmt.Errorf("%w:\n%s", err, em.Logs())
	}
	return cs, nil
}

// runtimeProbe forwards the bootstrap's Runtime API calls to the
// emulator's and notes when the first invocation's calls happen.
type runtimeProbe struct {
	addr string
	srv  *http.Server

	mu                               sync.Mutex
	firstNext, handedOver, responded time.Time
}

func newRuntimeProbe(target string, onFirstNext func()) (*runtimeProbe, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lambdalocal: probe: %w", err)
	}
	p := &runtimeProbe{addr: l.Addr().String()}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	// The bootstrap's next poll after the first invocation fails when the
	// emulator is stopped: expected, not worth a line.
	proxy.ErrorLog = log.New(io.Discard, "", 0)
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		next := r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/runtime/invocation/next")
		answer := r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/response") || strings.HasSuffix(r.URL.Path, "/error"))
		p.mu.Lock()
		first := next && p.firstNext.IsZero()
		if first {
			p.firstNext = now
		}
		if answer && p.responded.IsZero() {
			p.responded = now
		}
		if first {
			onFirstNext()
		}
		p.mu.Unlock()
		proxy.ServeHTTP(w, r)
		if first {
			p.mu.Lock()
			p.handedOver = time.Now()
			p.mu.Unlock()
		}
	})}
	go func() { _ = p.srv.Serve(l) }()
	return p, nil
}

func (p *runtimeProbe) times() (firstNext, handedOver, responded time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firstNext, p.handedOver, p.responded
}

// cpu reads a value the first-next hook wrote, under the probe's lock.
func (p *runtimeProbe) cpu(read func() time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return read()
}

// processCPU is the user and system CPU time of the child of process
// parent that runs bootstrap, from /proc (clock ticks of 1/100 s, Linux's
// USER_HZ on amd64 and arm64), or 0 when it cannot be read.
func processCPU(parent int, bootstrap string) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", parent))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, pid := range strings.Fields(string(b)) {
			if exe, err := os.Readlink("/proc/" + pid + "/exe"); err != nil || exe != bootstrap {
				continue
			}
			stat, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				return 0
			}
			// Fields after the command's closing parenthesis: state is
			// the first, utime the 12th, stime the 13th.
			f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			if len(f) < 13 {
				return 0
			}
			u, err1 := strconv.ParseInt(f[11], 10, 64)
			st, err2 := strconv.ParseInt(f[12], 10, 64)
			if err1 != nil || err2 != nil {
				return 0
			}
			return time.Duration(u+st) * 10 * time.Millisecond
		}
	}
	return 0
}

func (p *runtimeProbe) close() { _ = p.srv.Close() }

// Percentile is the p-th percentile (nearest rank) of ds.
func Percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s) + 99) / 100
	return s[max(i-1, 0)]
}
