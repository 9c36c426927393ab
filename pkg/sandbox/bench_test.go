package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// BenchmarkCodeStepWarm is the cost of one small CODE step on a warm pool:
// the round trip to a child, a fresh runtime, the scope in and the output
// back. It also reports the children's memory (childRSS, childVSZ in MiB).
func BenchmarkCodeStepWarm(b *testing.B) {
	p := newPool(b)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		req  automation.CodeRequest
		want string
	}{
		// A webhook check: scope in, HMAC, output back.
		{"verify", automation.CodeRequest{
			Code:  `return {ok: timingSafeEqual(hmacSHA256Hex("k", trigger.body.id), trigger.body.sig), n: steps.prev.n + 1}`,
			Scope: []byte(`{"trigger": {"body": {"id": "evt_1", "sig": "x"}}, "steps": {"prev": {"n": 1}}, "flow": {"id": "flw_1"}, "run": {"id": "run_1"}}`),
		}, `{"ok":false,"n":2}`},
		// The floor: the round trip and a fresh runtime.
		{"trivial", automation.CodeRequest{Code: `return 1`}, `1`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if res, err := p.RunCode(ctx, bc.req); err != nil || string(res.Output) != bc.want {
				b.Fatalf("warm-up: %s %q %v", res.Output, res.Error, err)
			}
			for b.Loop() {
				if _, err := p.RunCode(ctx, bc.req); err != nil {
					b.Fatal(err)
				}
			}
			if rss, vsz, n := childMemory(b); n > 0 {
				b.ReportMetric(float64(rss)/float64(n)/(1<<20), "childRSS-MiB")
				b.ReportMetric(float64(vsz)/float64(n)/(1<<20), "childVSZ-MiB")
			}
		})
	}
}

// childMemory sums VmRSS and VmSize over this process's children.
func childMemory(b *testing.B) (rss, vsz int64, n int) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := strconv.Itoa(os.Getpid())
	for _, st := range stats {
		raw, err := os.ReadFile(st)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := strings.LastIndexByte(string(raw), ')')
		f := strings.Fields(string(raw[i+1:]))
		if len(f) < 2 || f[1] != me {
			continue
		}
		status, err := os.ReadFile(filepath.Join(filepath.Dir(st), "status"))
		if err != nil {
			continue
		}
		rss += kb(status, "VmRSS:")
		vsz += kb(status, "VmSize:")
		n++
	}
	return rss, vsz, n
}

func kb(status []byte, field string) int64 {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			var v int64
			fmt.Sscan(strings.TrimSpace(rest), &v)
			return v << 10
		}
	}
	return 0
}
