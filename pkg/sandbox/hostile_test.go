package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// Each hostile script fails its own step with a clear error, and the pool
// goes on serving: the next script in the same pool works.
func TestHostileScripts(t *testing.T) {
	p := newPool(t)
	before := parentRSS(t)
	// The scripts that allocate get a long timeout, so that what stops
	// them is the memory limit even on a busy machine.
	tests := []struct {
		name, code string
		timeout    time.Duration
		wantErr    string
	}{
		{"loops forever", `while (true) {}`, time.Second, "ran longer than its 1s timeout"},
		{"loops forever in a function", `function spin() { for (;;) { Math.sqrt(2) } } spin()`, time.Second, "ran longer than its 1s timeout"},
		{"allocates without end", `const a = []; for (;;) a.push({n: a.length, s: "x" + a.length})`, 10 * time.Second, "MiB of memory"},
		{"allocates strings without end", `let s = "x"; const keep = []; for (;;) { s = s + s; keep.push(s) }`, 10 * time.Second, "MiB of memory"},
		{"huge string repeat", `return "abcdefgh".repeat(1 << 28).length`, 10 * time.Second, "MiB of memory"},
		// Stuck inside one built-in, where goja's interrupt is not seen:
		// the parent's kill (or the memory limit) stops it.
		{"deep JSON.stringify", `let o = {}; for (let i = 0; i < 40; i++) o = {a: o, b: o}; return JSON.stringify(o).length`, time.Second, "stopped"},
		{"catastrophic regexp", `return /^(a+)+\1b$/.test("a".repeat(40))`, time.Second, "ran longer than its 1s timeout"},
		// Its frame would pass the parent's bound on an answer: the error
		// comes back cut, not as a crash of the child.
		{"throws 2 MB", `throw new Error("e".repeat(2 << 20))`, 5 * time.Second, "bytes in all)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res := run(t, p, tt.code, nil, tt.timeout)
			took := time.Since(start)
			if res.Error == "" || !strings.Contains(res.Error, tt.wantErr) {
				t.Errorf("%s: output %.80s error %q, want an error with %q", tt.code, res.Output, res.Error, tt.wantErr)
			}
			t.Logf("%s: %q after %v", tt.name, res.Error, took.Round(time.Millisecond))
			if after := run(t, p, `return 6 * 7`, nil, time.Second); string(after.Output) != "42" {
				t.Errorf("the next script after %s: %s %q", tt.name, after.Output, after.Error)
			}
		})
	}
	// The scripts ran elsewhere: this process did not take their memory
	// (several of them reached hundreds of MiB).
	if after := parentRSS(t); after > before+64<<20 {
		t.Errorf("parent RSS grew from %d MiB to %d MiB", before>>20, after>>20)
	}
}

func TestTimeoutSetting(t *testing.T) {
	p := newPool(t)
	res := run(t, p, `while (true) {}`, nil, 200*time.Millisecond)
	if !strings.Contains(res.Error, "200ms timeout") {
		t.Errorf("error %q, want the 200ms timeout", res.Error)
	}
	res, err := p.RunCode(context.Background(), automation.CodeRequest{Code: `let i = 0; while (Date.now() < 0) i++; return i`, TimeoutMs: 60_000})
	if err != nil || string(res.Output) != "0" {
		t.Errorf("a timeout over the cap still runs: %s %q %v", res.Output, res.Error, err)
	}
}

func TestCancelledContextStopsScript(t *testing.T) {
	p := newPool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := p.RunCode(ctx, automation.CodeRequest{Code: `while (true) {}`, TimeoutMs: 5000})
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("RunCode with a 100ms context = %v, want the context's error", err)
	}
	if res := run(t, p, `return 1`, nil, time.Second); string(res.Output) != "1" {
		t.Errorf("after a cancelled script: %s %q", res.Output, res.Error)
	}
}

func TestConcurrentScripts(t *testing.T) {
	p := newPool(t)
	var wg sync.WaitGroup
	errs := make(chan error, 24)
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := fmt.Sprintf(`let s = 0; for (let j = 0; j < 10000; j++) s += j; return {i: %d, s: s, n: trigger.n}`, i)
			timeout := int64(10_000) // generous: the machine may be busy
			if i%6 == 5 {
				code, timeout = `while (true) {}`, 300 // hostile neighbours do not disturb the others
			}
			res, err := p.RunCode(context.Background(), automation.CodeRequest{
				Code: code, Scope: []byte(fmt.Sprintf(`{"trigger": {"n": %d}}`, i)), TimeoutMs: timeout})
			switch {
			case err != nil:
				errs <- err
			case i%6 == 5 && !strings.Contains(res.Error, "timeout"):
				errs <- fmt.Errorf("script %d: %q, want a timeout", i, res.Error)
			case i%6 != 5 && string(res.Output) != fmt.Sprintf(`{"i":%d,"s":49995000,"n":%d}`, i, i):
				errs <- fmt.Errorf("script %d: %s %q", i, res.Output, res.Error)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// parentRSS is this process's resident memory.
func parentRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc: ", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
