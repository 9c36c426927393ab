package sandbox_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/sandbox"
)

// The test binary is the sandbox binary: the Pool re-executes it, and
// MaybeServe makes that copy serve instead of running the tests.
func TestMain(m *testing.M) {
	sandbox.MaybeServe()
	os.Exit(m.Run())
}

func newPool(t testing.TB) *sandbox.Pool {
	t.Helper()
	p, err := sandbox.New(sandbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func run(t testing.TB, p *sandbox.Pool, code string, scope any, timeout time.Duration) automation.CodeResult {
	t.Helper()
	raw, err := json.Marshal(scope)
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.RunCode(context.Background(), automation.CodeRequest{Code: code, Scope: raw, TimeoutMs: timeout.Milliseconds()})
	if err != nil {
		t.Fatalf("RunCode(%q): %v", code, err)
	}
	return res
}

func TestRunsScripts(t *testing.T) {
	p := newPool(t)
	scope := map[string]any{
		"trigger": map[string]any{"body": map[string]any{"items": []int{1, 2, 3}, "name": "ada"}},
		"steps":   map[string]any{"prev": map[string]any{"n": 4}},
		"flow":    map[string]any{"id": "flw_1", "name": "F"},
		"run":     map[string]any{"id": "run_1"},
	}
	tests := []struct {
		name, code, wantOut, wantErr string
	}{
		{"return object", `return {sum: trigger.body.items.reduce((a, b) => a + b, 0) + steps.prev.n, who: trigger.body.name.toUpperCase()}`, `{"sum":10,"who":"ADA"}`, ""},
		{"flow and run", `return flow.id + "/" + run.id`, `"flw_1/run_1"`, ""},
		{"undefined is null", `let x = 1`, `null`, ""},
		{"state absent outside STORE", `return typeof state + "," + typeof item`, `"undefined,undefined"`, ""},
		{"thrown Error", `throw new Error("bad signature")`, "", "bad signature"},
		{"thrown TypeError", `return null.x`, "", "TypeError: Cannot read property 'x'"},
		{"thrown string", `throw "plain"`, "", "plain"},
		{"syntax error", `return {`, "", "SyntaxError"},
		// Code that closes the wrapper is still only JavaScript in the same
		// sandbox; when what it leaves is not a function, it is refused.
		{"code closing the wrapper", `return 1 }); (function () { return 2`, "2", ""},
		{"code leaving no function", `}); !(function () {`, "", "SyntaxError: the code must be the body of a function"},
		{"rejected promise", `return Promise.reject(new Error("no"))`, "", "no"},
		{"resolved promise", `return Promise.resolve(42)`, `42`, ""},
		{"async body", `return (async () => { const v = await Promise.resolve(7); return v * 6 })()`, `42`, ""},
		{"deep recursion", `function f(n) { return f(n + 1) } return f(0)`, "", "recursed too deeply"},
		{"no require", `return typeof require + typeof process + typeof fetch + typeof setTimeout`, `"undefinedundefinedundefinedundefined"`, ""},
		{"output cap", `return "x".repeat(2 * 1024 * 1024)`, "", "at most 1048576 are allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := run(t, p, tt.code, scope, 10*time.Second) // none of these should take long
			if string(res.Output) != tt.wantOut || !strings.Contains(res.Error, tt.wantErr) || (tt.wantErr == "" && res.Error != "") {
				t.Errorf("%s: output %s error %q, want output %s error containing %q", tt.code, res.Output, res.Error, tt.wantOut, tt.wantErr)
			}
		})
	}
}

func TestHelpers(t *testing.T) {
	p := newPool(t)
	// RFC 4231 test case 2.
	res := run(t, p, `return {
		mac: hmacSHA256Hex("Jefe", "what do ya want for nothing?"),
		same: timingSafeEqual("abc", "abc"), differ: timingSafeEqual("abc", "abd"), short: timingSafeEqual("abc", "ab"),
		b64: base64Encode("héllo"), back: base64Decode(base64Encode("héllo")), url: base64Decode("aGk_"),
	}`, nil, time.Second)
	want := `{"mac":"5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843","same":true,"differ":false,"short":false,"b64":"aMOpbGxv","back":"héllo","url":"hi?"}`
	if string(res.Output) != want || res.Error != "" {
		t.Errorf("helpers = %s %q, want %s", res.Output, res.Error, want)
	}
	res = run(t, p, `return base64Decode("%%%")`, nil, time.Second)
	if !strings.Contains(res.Error, "not base64") {
		t.Errorf("base64Decode of junk: error %q", res.Error)
	}
}

func TestConsoleLogCapped(t *testing.T) {
	p := newPool(t)
	res := run(t, p, `console.log("hello", 1, {a: [1, 2]}, true); for (let i = 0; i < 500; i++) console.log("line", i); console.error("x".repeat(10000)); return 1`, nil, time.Second)
	if res.Error != "" || string(res.Output) != "1" {
		t.Fatalf("result %s %q", res.Output, res.Error)
	}
	if len(res.Logs) != 101 || res.Logs[0] != `hello 1 {"a":[1,2]} true` || !strings.Contains(res.Logs[100], "402 more lines not kept") {
		t.Errorf("logs: %d lines, first %q, last %q", len(res.Logs), res.Logs[0], res.Logs[len(res.Logs)-1])
	}
	res = run(t, p, `console.log("x".repeat(10000)); return 1`, nil, time.Second)
	if len(res.Logs) != 1 || len(res.Logs[0]) > 3<<10 || !strings.HasSuffix(res.Logs[0], "(line cut)") {
		t.Errorf("long line kept as %d bytes", len(res.Logs[0]))
	}
}

func TestOversizedRequests(t *testing.T) {
	p := newPool(t)
	res, err := p.RunCode(context.Background(), automation.CodeRequest{Code: strings.Repeat(" ", automation.MaxCodeBytes+1) + "return 1"})
	if err != nil || !strings.Contains(res.Error, "at most 65536") {
		t.Errorf("code over the cap: %q %v", res.Error, err)
	}
	huge := []byte(`{"trigger": {"body": "` + strings.Repeat("x", 64<<20) + `"}}`)
	res, err = p.RunCode(context.Background(), automation.CodeRequest{Code: "return 1", Scope: huge})
	if err != nil || !strings.Contains(res.Error, "the run's data for this step is") {
		t.Errorf("scope over the cap: %q %v", res.Error, err)
	}
}
