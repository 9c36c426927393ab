package sandbox

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"syscall"
	"time"

	"github.com/dop251/goja"

	"flowservice/pkg/jscode"
)

// envMarker, set to "1" in a child's environment, makes MaybeServe serve.
const envMarker = "FLOW_SANDBOX"

// Exit codes of a child, read by the parent to say why a child died.
const (
	exitProtocol = 2 // the parent sent something unreadable
	exitCPU      = 3 // the script used its CPU time (SIGXCPU)
)

// Limits inside the child, beside the rlimits the parent sets.
const (
	maxRequestBytes = 64 << 20 // a scope carries the trigger body and step outputs
	maxCallDepth    = 10_000   // JavaScript recursion
	maxGoStack      = 64 << 20 // Go recursion inside built-ins (deep JSON)
	maxLogLines     = 100
	maxLogLineBytes = 2 << 10
	programCache    = 256
)

// MaybeServe turns the process into a sandbox child when its parent
// started it as one (FLOW_SANDBOX=1) and never returns then; otherwise it
// returns at once. Call it first in main of every binary that creates a
// Pool: the Pool re-executes its own binary to get a child.
func MaybeServe() {
	if os.Getenv(envMarker) != "1" {
		return
	}
	os.Exit(serve(os.Stdin, os.Stdout))
}

// serve answers requests on in until it closes.
func serve(in io.Reader, out io.Writer) int {
	debug.SetMaxStack(maxGoStack)
	// The collector runs when the heap is half again its live data, so
	// garbage alone never takes the heap to 1.5 times a script's memory
	// limit, where the watch stops the script. No soft memory limit: near
	// one, the collector would slow a growing script for seconds before the
	// watch sees it. The parent's address-space limit is the hard one.
	debug.SetGCPercent(50)
	// Go ignores SIGXCPU unless asked: exit when the soft CPU limit
	// (set before each script) passes, before the hard limit kills.
	xcpu := make(chan os.Signal, 1)
	signal.Notify(xcpu, syscall.SIGXCPU)
	go func() {
		<-xcpu
		os.Exit(exitCPU)
	}()

	r := bufio.NewReaderSize(in, 64<<10)
	w := bufio.NewWriterSize(out, 64<<10)
	programs := map[string]*goja.Program{}
	// Warm up before the hello, after which the parent measures the
	// child's address space as its idle size: the runtime's threads, the
	// collector's workers and the JavaScript engine's tables exist by then.
	runScript(programs, request{Code: "return JSON.stringify({a: [1]})", TimeoutMs: 1000, MemoryBytes: 64 << 20, OutputBytes: 1 << 10})
	runtime.GC()
	if writeFrame(w, hello{Sandbox: protocol}) != nil || w.Flush() != nil {
		return exitProtocol
	}
	for {
		var req request
		if err := readFrame(r, maxRequestBytes, &req); err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			return exitProtocol
		}
		limitCPU(time.Duration(req.TimeoutMs) * time.Millisecond)
		res := runScript(programs, req)
		res.CPUMs = cpuTime().Milliseconds()
		// A large script leaves its dead runtime behind: collect it now,
		// between scripts, rather than during the next one.
		if heapObjects() > uint64(req.MemoryBytes)/4 {
			runtime.GC()
		}
		if writeFrame(w, res) != nil || w.Flush() != nil {
			return exitProtocol
		}
	}
}

// errLimit is a limit a script hit, given to goja's Interrupt.
type errLimit struct{ kind, msg string }

// runScript runs one request in a fresh runtime: scripts of different flows
// share nothing but compiled programs, which are immutable.
func runScript(programs map[string]*goja.Program, req request) (res response) {
	prog, err := compile(programs, req.Code)
	if err != nil {
		return response{Error: err.Error()}
	}
	vm := goja.New()
	vm.SetMaxCallStackSize(maxCallDepth)
	logs := &logBook{}
	jsonObj := vm.Get("JSON").ToObject(vm)
	parse, _ := goja.AssertFunction(jsonObj.Get("parse"))
	stringify, _ := goja.AssertFunction(jsonObj.Get("stringify"))
	installHelpers(vm, logs, stringify)

	timeout := time.Duration(req.TimeoutMs) * time.Millisecond
	stop := watch(vm, timeout, req.MemoryBytes)
	defer stop()
	defer func() {
		res.Logs = logs.lines()
		if p := recover(); p != nil {
			res = response{Error: fmt.Sprintf("the script failed inside the sandbox: %v", p), Limit: "crash", Logs: logs.lines()}
		}
		res.Error = clipError(res.Error)
	}()

	scope := vm.NewObject()
	if len(req.Scope) > 0 {
		v, err := parse(goja.Undefined(), vm.ToValue(string(req.Scope)))
		if err != nil {
			return failure(err, timeout)
		}
		if o, ok := v.(*goja.Object); ok {
			scope = o
		}
	}
	fnv, err := vm.RunProgram(prog)
	if err != nil {
		return failure(err, timeout)
	}
	fn, ok := goja.AssertFunction(fnv)
	if !ok { // the code closed the wrapper's function itself
		return response{Error: "SyntaxError: the code must be the body of a function (unbalanced braces?)"}
	}
	args := make([]goja.Value, len(scopeNames))
	for i, n := range scopeNames {
		args[i] = scope.Get(n)
		if args[i] == nil {
			args[i] = goja.Undefined()
		}
	}
	v, err := fn(goja.Undefined(), args...)
	if err != nil {
		return failure(err, timeout)
	}
	if p, ok := v.Export().(*goja.Promise); ok {
		switch p.State() {
		case goja.PromiseStateFulfilled:
			v = p.Result()
		case goja.PromiseStateRejected:
			return response{Error: message(p.Result())}
		default:
			return response{Error: "the script returned a promise that never settled: there are no timers or network calls to wait for"}
		}
	}
	if v == nil || goja.IsUndefined(v) {
		return response{Output: []byte("null")}
	}
	s, err := stringify(goja.Undefined(), v)
	if err != nil {
		return failure(err, timeout)
	}
	if s == nil || goja.IsUndefined(s) {
		return response{Output: []byte("null")} // a function or symbol
	}
	out := s.String()
	if len(out) > req.OutputBytes {
		return response{Error: fmt.Sprintf("the return value is %d bytes of JSON; at most %d are allowed", len(out), req.OutputBytes)}
	}
	return response{Output: []byte(out)}
}

// scopeNames are the parameters of the function a script is the body of.
var scopeNames = jscode.ScopeNames

// compile wraps code as a function body (jscode.Wrap) and caches the
// program.
func compile(cache map[string]*goja.Program, code string) (*goja.Program, error) {
	if p, ok := cache[code]; ok {
		return p, nil
	}
	p, err := jscode.Compile(code)
	if err != nil {
		return nil, err
	}
	if len(cache) >= programCache {
		clear(cache)
	}
	cache[code] = p
	return p, nil
}

// failure turns a goja error into the step's error.
func failure(err error, timeout time.Duration) response {
	var ie *goja.InterruptedError
	if errors.As(err, &ie) {
		if l, ok := ie.Value().(errLimit); ok {
			return response{Error: l.msg, Limit: l.kind}
		}
		return response{Error: "the script was stopped", Limit: "time"}
	}
	var ex *goja.Exception
	if errors.As(err, &ex) {
		msg := message(ex.Value())
		if strings.HasPrefix(msg, "RangeError: Maximum call stack size exceeded") {
			return response{Error: "RangeError: the script recursed too deeply (more than 10000 calls)"}
		}
		return response{Error: msg}
	}
	var se *goja.StackOverflowError
	if errors.As(err, &se) {
		return response{Error: "RangeError: the script recursed too deeply (more than 10000 calls)"}
	}
	return response{Error: err.Error()}
}

// message is what a thrown value says: an Error's message (with its name
// unless it is a plain Error), or the value as a string.
func message(v goja.Value) string {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return "the script threw " + fmt.Sprint(v)
	}
	if o, ok := v.(*goja.Object); ok {
		if m := o.Get("message"); m != nil && !goja.IsUndefined(m) {
			name := ""
			if n := o.Get("name"); n != nil && !goja.IsUndefined(n) {
				name = n.String()
			}
			if name == "" || name == "Error" {
				return m.String()
			}
			return name + ": " + m.String()
		}
	}
	return v.String()
}

// watch stops the script at its timeout and when the heap passes its
// limit; the returned func ends the watch. goja checks an interrupt
// between instructions, so a script stuck inside one built-in is stopped
// by the parent's kill and the rlimits instead.
func watch(vm *goja.Runtime, timeout time.Duration, memory int64) (stop func()) {
	done := make(chan struct{})
	go func() {
		deadline := time.NewTimer(timeout)
		defer deadline.Stop()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		// The live heap as of the last collection, or a heap larger than
		// garbage alone makes it (see SetGCPercent in serve).
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-done:
				return
			case <-deadline.C:
				vm.Interrupt(errLimit{"time", fmt.Sprintf("the script ran longer than its %s timeout", timeout)})
				return
			case <-tick.C:
				metrics.Read(sample)
				if int64(sample[0].Value.Uint64()) > memory || int64(sample[1].Value.Uint64()) > memory*3/2 {
					vm.Interrupt(errLimit{"memory", fmt.Sprintf("the script used more than its %d MiB of memory", memory>>20)})
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// installHelpers defines the few functions scripts get beyond the language:
// signatures, encodings and console.log. There is no require, no timer, no
// file, network or process access.
func installHelpers(vm *goja.Runtime, logs *logBook, stringify goja.Callable) {
	str := func(call goja.FunctionCall, i int, fn string) string {
		v := call.Argument(i)
		if goja.IsUndefined(v) || goja.IsNull(v) {
			panic(vm.NewTypeError("%s: argument %d must be a string", fn, i+1))
		}
		return v.String()
	}
	_ = vm.Set("hmacSHA256Hex", func(call goja.FunctionCall) goja.Value {
		m := hmac.New(sha256.New, []byte(str(call, 0, "hmacSHA256Hex")))
		m.Write([]byte(str(call, 1, "hmacSHA256Hex")))
		return vm.ToValue(hex.EncodeToString(m.Sum(nil)))
	})
	_ = vm.Set("timingSafeEqual", func(call goja.FunctionCall) goja.Value {
		a, b := str(call, 0, "timingSafeEqual"), str(call, 1, "timingSafeEqual")
		return vm.ToValue(subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1)
	})
	_ = vm.Set("base64Encode", func(call goja.FunctionCall) goja.Value {
		return vm.ToValue(base64.StdEncoding.EncodeToString([]byte(str(call, 0, "base64Encode"))))
	})
	_ = vm.Set("base64Decode", func(call goja.FunctionCall) goja.Value {
		s := strings.TrimSpace(str(call, 0, "base64Decode"))
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(s); err == nil {
				return vm.ToValue(string(b))
			}
		}
		panic(vm.NewTypeError("base64Decode: the argument is not base64"))
	})
	console := vm.NewObject()
	logFn := func(call goja.FunctionCall) goja.Value {
		parts := make([]string, len(call.Arguments))
		for i, a := range call.Arguments {
			parts[i] = logText(a, stringify)
		}
		logs.add(strings.Join(parts, " "))
		return goja.Undefined()
	}
	for _, name := range []string{"log", "info", "warn", "error", "debug"} {
		_ = console.Set(name, logFn)
	}
	_ = vm.Set("console", console)
}

// logText shows a value as console.log would: strings as they are, other
// values as JSON when they have a JSON form.
func logText(v goja.Value, stringify goja.Callable) string {
	if _, ok := v.(*goja.Object); !ok {
		return v.String()
	}
	if _, isFn := goja.AssertFunction(v); isFn {
		return "[function]"
	}
	s, err := stringify(goja.Undefined(), v)
	if err != nil || s == nil || goja.IsUndefined(s) {
		return v.String()
	}
	return s.String()
}

// logBook keeps a script's console lines, capped.
type logBook struct {
	kept    []string
	dropped int
}

func (l *logBook) add(s string) {
	if len(l.kept) >= maxLogLines {
		l.dropped++
		return
	}
	if len(s) > maxLogLineBytes {
		s = s[:maxLogLineBytes] + "… (line cut)"
	}
	l.kept = append(l.kept, s)
}

func (l *logBook) lines() []string {
	if l.dropped == 0 {
		return l.kept
	}
	return append(l.kept, fmt.Sprintf("… %d more lines not kept (at most %d)", l.dropped, maxLogLines))
}

// heapObjects is the heap in use, garbage included.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// maxErrorBytes bounds the error a child answers with: a script may throw
// a string of megabytes, whose frame would pass the parent's bound on an
// answer (maxResponseBytes), which then kills the child and reports a
// crash instead of the script's error. The engine keeps less still.
const maxErrorBytes = 16 << 10

// clipError cuts msg to maxErrorBytes, on a character boundary, saying so.
func clipError(msg string) string {
	if len(msg) <= maxErrorBytes {
		return msg
	}
	return strings.ToValidUTF8(msg[:maxErrorBytes], "") + fmt.Sprintf("… (%d bytes in all)", len(msg))
}
