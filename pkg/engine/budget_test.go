package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// allocated runs f and returns the bytes it allocated (all goroutines), so
// that a test can tell a bounded evaluation from one that built gigabytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// memoryCeiling is far above what a bounded step allocates (MaxEvalBytes and
// a few copies) and far below what the repros built before the budget.
const memoryCeiling = 512 << 20

// doubling is the repro: repeat("x", 999999) doubled ten times, about
// 1 GiB of text in one template.
func doubling() string {
	var b strings.Builder
	b.WriteString(`{{ let s0 = repeat("x", 999999); `)
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "let s%d = s%d + s%d; ", i, i-1, i-1)
	}
	b.WriteString("len(s10) }}")
	return b.String()
}

// nested6 is the other repro: six nested all over a 100-item array.
func nested6(arr string) string {
	src := "true"
	for i := 0; i < 6; i++ {
		src = fmt.Sprintf("all(%s, %s)", arr, src)
	}
	return src
}

func hundred() string {
	items := make([]string, 100)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	return `{"items":[` + strings.Join(items, ",") + `]}`
}

// mustFailForGood runs f's steps and checks that the run failed, not
// retryably, at step 0 with an error containing want, within the memory
// ceiling.
func mustFailForGood(t *testing.T, f automation.Flow, body, want string) automation.Run {
	t.Helper()
	e := newEngine(t, nil, false)
	var res Result
	n := allocated(func() { res = e.Execute(context.Background(), f, runOf(body)) })
	r := res.Run
	if r.Status != automation.RunFailed || res.Retryable {
		t.Fatalf("run %s (retryable %v), want FAILED for good; error %q", r.Status, res.Retryable, r.Error)
	}
	if r.Steps[0].Status != automation.StepFailed || !strings.Contains(r.Steps[0].Error, want) {
		t.Fatalf("step error %q, want it to contain %q", r.Steps[0].Error, want)
	}
	if n > memoryCeiling {
		t.Fatalf("the run allocated %d MiB, want under %d MiB", n>>20, memoryCeiling>>20)
	}
	return r
}

func TestReproDoublingRepeatFailsTheStep(t *testing.T) {
	f := flowOf(automation.Step{Name: "grow", Type: automation.StepSet, Values: raw(`{"v": ` + quoteJSON(doubling()) + `}`)})
	r := mustFailForGood(t, f, `{}`, "evaluation limit exceeded")
	if !strings.Contains(r.Error, "step grow:") || !strings.Contains(r.Error, "MiB") {
		t.Errorf("run error %q should name the step and the limit", r.Error)
	}
	if len(r.Error) > 1000 {
		t.Errorf("run error is %d bytes; it should quote the expression briefly", len(r.Error))
	}
}

// The same growth spread over steps: each step has its own budget, so the
// step that would build more than MaxEvalBytes fails.
func TestDoublingAcrossStepsFailsTheStep(t *testing.T) {
	steps := []automation.Step{{Name: "s0", Type: automation.StepSet, Values: raw(`{"v": "{{ repeat(\"x\", 999999) }}"}`)}}
	for i := 1; i <= 10; i++ {
		steps = append(steps, automation.Step{Name: fmt.Sprint("s", i), Type: automation.StepSet,
			Values: raw(fmt.Sprintf(`{"v": "{{ steps.s%d.v + steps.s%d.v }}"}`, i-1, i-1))})
	}
	e := newEngine(t, nil, false)
	var res Result
	n := allocated(func() { res = e.Execute(context.Background(), flowOf(steps...), runOf(`{}`)) })
	if res.Run.Status != automation.RunFailed || res.Retryable || !strings.Contains(res.Run.Error, "evaluation limit exceeded") {
		t.Fatalf("run %s (retryable %v): %q", res.Run.Status, res.Retryable, res.Run.Error)
	}
	// 2^5 MB fits in 32 MiB... of 1e6-byte units: s5 is 32e6 bytes, s6 would be 64e6.
	if !strings.HasPrefix(res.Run.Error, "step s6:") {
		t.Errorf("failed at %q, want step s6", res.Run.Error)
	}
	if n > memoryCeiling {
		t.Fatalf("the run allocated %d MiB", n>>20)
	}
}

func TestReproNestedLoopsRefusedAtSaveAndAtRun(t *testing.T) {
	src := nested6("trigger.body.items")
	err := Checker{}.Expression(src)
	if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), "nest 6 deep") {
		t.Fatalf("Expression(six nested all) = %v, want ErrInvalid naming the nesting", err)
	}
	// A definition saved before the limit still cannot hang the runner.
	f := flowOf(automation.Step{Name: "loops", Type: automation.StepFilter, Condition: src})
	mustFailForGood(t, f, hundred(), "nest 6 deep")
}

func TestLoopIterationsAreBudgeted(t *testing.T) {
	// A million iterations take seconds under -race on a loaded machine:
	// the time backstop must not decide which bound this test sees.
	defer func(old time.Duration) { evalTime = old }(evalTime)
	evalTime = time.Hour
	items := make([]string, 200)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	body := `{"items":[` + strings.Join(items, ",") + `]}`
	// Allowed nesting, but 200^3 = 8e6 iterations.
	src := "all(trigger.body.items, all(trigger.body.items, all(trigger.body.items, true)))"
	if err := (Checker{}).Expression(src); err != nil {
		t.Fatalf("three levels are allowed: %v", err)
	}
	f := flowOf(automation.Step{Name: "loops", Type: automation.StepFilter, Condition: src})
	mustFailForGood(t, f, body, "more than 1000000 loop iterations")

	// 90^3 + 90^2 + 90 fits.
	f = flowOf(automation.Step{Name: "loops", Type: automation.StepFilter, Condition: nested3("trigger.body.items[:90]")})
	res := newEngine(t, nil, false).Execute(context.Background(), f, runOf(hundred()))
	if res.Run.Status != automation.RunSucceeded {
		t.Fatalf("1e6 iterations: run %s %q, want SUCCEEDED", res.Run.Status, res.Run.Error)
	}
}

func nested3(arr string) string {
	return fmt.Sprintf("all(%s, all(%s, all(%s, # >= 0)))", arr, arr, arr)
}

// Builtins and operators that can grow without bound fail the step, each
// within the memory ceiling.
func TestGrowthIsBounded(t *testing.T) {
	tests := []struct{ name, tmpl string }{
		{"builtin called as ::repeat", `{{ let s = ::repeat("x", 999999); ::repeat(s, 999999) }}`},
		{"repeat of a long string", `{{ let s = repeat("x", 999999); repeat(s, 100) }}`},
		{"join of many references", `{{ let s = repeat("x", 999999); join(map(1..100, s), ",") }}`},
		{"replace that multiplies", `{{ let s = repeat("x", 999999); replace(repeat("ab", 1000), "a", s) }}`},
		{"toBase64 chain", `{{ let s = repeat("x", 999999); toBase64(toBase64(toBase64(toBase64(toBase64(toBase64(toBase64(toBase64(toBase64(toBase64(toBase64(toBase64(toBase64(s)))))))))))))  }}`},
		{"toJSON of references", `{{ let s = repeat("x", 999999); toJSON(map(1..100, s)) }}`},
		{"string of references", `{{ let s = repeat("x", 999999); string(map(1..100, s)) }}`},
		{"reduce that doubles", `{{ reduce(1..30, #acc + #acc, "xx") }}`},
		{"template text of references", `x{{ map(1..100, repeat("x", 999999)) }}`},
		{"long pattern", `{{ "x" matches repeat("(a*)*", 300) }}`},
		{"long text times pattern", `{{ repeat("a", 999999) matches repeat("a", 200) }}`},
		{"split into characters", `{{ let s = repeat("xxxxxxxxxx", 999999); len(split(s, "")) }}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := (Checker{}).Template(tt.tmpl); err != nil {
				t.Fatalf("Template: %v", err)
			}
			f := flowOf(automation.Step{Name: "grow", Type: automation.StepSet, Values: raw(`{"v": ` + quoteJSON(tt.tmpl) + `}`)})
			mustFailForGood(t, f, `{}`, "evaluation limit exceeded")
		})
	}
}

// An output made of references to one large value is tiny in memory but
// huge as JSON: it is recorded as a bounded preview, never built whole.
func TestLargeOutputIsRecordedAsPreview(t *testing.T) {
	body := `{"big":"` + strings.Repeat("y", 200_000) + `"}`
	f := flowOf(automation.Step{Name: "refs", Type: automation.StepSet, Values: raw(`{"v": "{{ map(1..5000, trigger.body) }}"}`)})
	e := newEngine(t, nil, false) // outputs up to 64 KiB + 64 KiB
	var res Result
	n := allocated(func() { res = e.Execute(context.Background(), f, runOf(body)) })
	if res.Run.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %q", res.Run.Status, res.Run.Error)
	}
	out := output(t, res.Run, 0)
	if out["truncated"] != true || len(res.Run.Steps[0].Output) > int(e.maxOutput) {
		t.Fatalf("output of %d bytes, truncated=%v; want a preview under %d bytes", len(res.Run.Steps[0].Output), out["truncated"], e.maxOutput)
	}
	if size, _ := out["size"].(float64); size <= float64(e.maxOutput) {
		t.Errorf("size %v should say the output was larger than %d", out["size"], e.maxOutput)
	}
	if p, _ := out["preview"].(string); !strings.HasPrefix(p, `{"v":[{"big":"yyy`) {
		t.Errorf("preview starts %.40q", p)
	}
	if len(res.Run.Response.Body) > int(e.maxOutput) {
		t.Errorf("response body of %d bytes, want the recorded output", len(res.Run.Response.Body))
	}
	if n > memoryCeiling {
		t.Fatalf("the run allocated %d MiB", n>>20)
	}
}

func TestSaveTimeLimits(t *testing.T) {
	big := "1" + strings.Repeat(" + 1", MaxExprNodes)
	tests := []struct{ name, src, want string }{
		{"too many nodes", big, fmt.Sprintf("at most %d names, operators and values", MaxExprNodes)},
		{"four nested loops", "map(trigger.body.a, map(#, filter(#, any(#, true))))", "nest 4 deep"},
		{"loops in a predicate's collection", "all(filter(trigger.body.a, all(#, any(#, map(#, true)))), true)", "nest 4 deep"},
		{"guarded builtin arity", `repeat("x")`, "repeat"},
		{"invalid constant pattern", `trigger.body.s matches "(["`, "error parsing regexp"},
		{"long constant pattern", `trigger.body.s matches "` + strings.Repeat("a", MaxPatternBytes+1) + `"`, "at most 1024"},
		{"predicate that is not a condition", `all(trigger.body.a, 1)`, "bool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Checker{}.Expression(tt.src)
			if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Expression = %v, want ErrInvalid containing %q", err, tt.want)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("error of %d bytes should quote the expression briefly", len(err.Error()))
			}
		})
	}
	ok := []string{
		"map(trigger.body.a, map(#, filter(#, # > 1)))",
		"all(trigger.body.a, # > 0) && any(trigger.body.b, # > 0) && none(trigger.body.c, any(#, # > 1))",
		`repeat("ab", 3) + join(["a", "b"], "-") + replace("abc", "b", "x") + split("a,b", ",")[0] + toJSON({"a": 1}) + string(1)`,
		"1 + 2 * 3 == 7 && trigger.body.n + 1 > 0",
	}
	for _, src := range ok {
		if err := (Checker{}).Expression(src); err != nil {
			t.Errorf("Expression(%q) = %v, want nil", src, err)
		}
	}
	parts := strings.Repeat("{{ 1 }}", MaxTemplateParts+1)
	if err := (Checker{}).Template(parts); !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), "parts") {
		t.Errorf("Template with %d parts = %v", MaxTemplateParts+1, err)
	}
}

// The guarded builtins and operators still compute what expr's do.
func TestBoundedEvaluationKeepsResults(t *testing.T) {
	env := map[string]any{"trigger": map[string]any{"body": map[string]any{"n": 2.0, "s": "ab", "a": []any{1.0, 2.0, 3.0}}}}
	tests := []struct {
		src  string
		want any
	}{
		{`{{ repeat(trigger.body.s, 3) }}`, "ababab"},
		{`{{ ::repeat("x", 2) }}`, "xx"},
		{`{{ join(map(trigger.body.a, string(#)), "-") }}`, "1-2-3"},
		{`{{ replace("a-b-c", "-", "+") }}`, "a+b+c"},
		{`{{ split("a,b", ",") }}`, []string{"a", "b"}},
		{`{{ toJSON({"a": [1]}) }}`, "{\n  \"a\": [\n    1\n  ]\n}"},
		{`{{ trigger.body.n + 1 }}`, 3.0},
		{`{{ "a" + trigger.body.s }}`, "aab"},
		{`{{ 1 + 2 }}`, 3},
		{`{{ sum(trigger.body.a) }}`, 6.0},
		{`{{ reduce(trigger.body.a, #acc + #, 0) }}`, 6.0},
		{`x{{ trigger.body.a }}y`, "x[1,2,3]y"},
		{`{{ len(filter(trigger.body.a, # > 1)) }}`, 2},
		{`{{ count(trigger.body.a, # > 1) }}`, 2},
		{`{{ trigger.body.s matches "^a" }}`, true},
		{`{{ not (trigger.body.s matches "^b") }}`, true},
		{`{{ filter(["ab", "cd"], # matches trigger.body.s) }}`, []string{"ab"}},
		{`{{ sum(map(trigger.body.a, # * 2)) }}`, 12.0},
		{`{{ all(map(trigger.body.a, # > 0), #) }}`, true},
		{`{{ sortBy(trigger.body.a, -#)[0] }}`, 3.0},
		{`{{ keys(groupBy(trigger.body.a, # > 1 ? "big" : "small")) | sort() }}`, []string{"big", "small"}},
	}
	for _, tt := range tests {
		got, err := Checker{}.evalString(tt.src, env)
		if err != nil {
			t.Errorf("%s: %v", tt.src, err)
			continue
		}
		if g, _ := json.Marshal(got); string(g) != mustJSON(tt.want) {
			t.Errorf("%s = %s, want %s", tt.src, g, mustJSON(tt.want))
		}
	}
}

// The time backstop: once a step has evaluated for MaxEvalTime, loops stop
// within 256 iterations and builtins at their next call.
func TestEvalTimeBackstop(t *testing.T) {
	env := map[string]any{"trigger": map[string]any{"body": map[string]any{}}}
	for _, src := range []string{"all(1..1000, # > 0)", `upper("x")`} {
		b := newBudget(context.Background())
		b.deadline = time.Now().Add(-time.Second)
		env[budgetKey] = b
		p, err := Checker{}.compile(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run(part{src: src, prog: p}, env); err == nil || !strings.Contains(err.Error(), "evaluated for more than") {
			t.Errorf("%s past the deadline: %v", src, err)
		}
	}
}

func TestBudgetStopsWhenTheRunEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := newBudget(ctx)
	if err := b.loop(1); err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("loop after cancel = %v, want context.Canceled", err)
	}
}

func quoteJSON(s string) string { return mustJSON(s) }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// storable marshals a run as a store would and reads it back.
func storable(t *testing.T, r automation.Run) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatalf("the run does not marshal: %v", err)
	}
	var back automation.Run
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("the run record (%d bytes) does not read back: %v", len(b), err)
	}
}

// Deeply nested outputs, from an HTTP response or built by an expression,
// are recorded as previews cut at MaxOutputDepth: the run reads back.
func TestDeepOutputsAreRecordedReadably(t *testing.T) {
	deep := strings.Repeat("[", 9990) + strings.Repeat("]", 9990)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, deep)
	}))
	t.Cleanup(srv.Close)
	f := flowOf(
		automation.Step{Name: "call", Type: automation.StepHTTP, URL: srv.URL},
		automation.Step{Name: "build", Type: automation.StepSet, Values: raw(`{"v": "{{ reduce(1..20000, [#acc], []) }}"}`)},
		automation.Step{Name: "copy", Type: automation.StepSet, Values: raw(`{"v": "{{ steps.call.body }}"}`)},
	)
	res := newEngine(t, nil, true).Execute(context.Background(), f, runOf(`{}`))
	if res.Run.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s", res.Run.Status, res.Run.Error)
	}
	for i := range f.Steps {
		out := output(t, res.Run, i)
		if out["truncated"] != true || !strings.Contains(out["preview"].(string), "nested too deep") {
			t.Errorf("step %d output %.200s, want a preview cut at depth", i, res.Run.Steps[i].Output)
		}
	}
	storable(t, res.Run)
}

// A run's outputs together stay within MaxRunOutputBytes (about: each
// later output is at least its small truncation marker).
func TestRunOutputBudget(t *testing.T) {
	var steps []automation.Step
	for i := 0; i < 10; i++ {
		steps = append(steps, automation.Step{Name: fmt.Sprint("s", i), Type: automation.StepSet,
			Values: raw(`{"v": "{{ repeat(\"x\", 100000) }}"}`)})
	}
	e := New(Config{MaxRunOutputBytes: 300_000})
	res := e.Execute(context.Background(), flowOf(steps...), runOf(`{}`))
	if res.Run.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s", res.Run.Status, res.Run.Error)
	}
	total := 0
	for i, s := range res.Run.Steps {
		total += len(s.Output)
		if !json.Valid(s.Output) {
			t.Fatalf("step %d output is not JSON", i)
		}
	}
	if total > 300_000+10*64 {
		t.Fatalf("outputs total %d bytes, want about 300000 at most", total)
	}
	if out := output(t, res.Run, 9); out["truncated"] != true {
		t.Errorf("the last output should be cut: %.100s", res.Run.Steps[9].Output)
	}
	if out := output(t, res.Run, 0); out["truncated"] == true {
		t.Errorf("the first output fits and should be whole")
	}
}

// Oversized response headers and very long error messages are bounded.
func TestHTTPHeaderAndErrorBounds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/headers" {
			w.Header().Set("X-Big", strings.Repeat("h", MaxResponseHeaderBytes+1))
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)
	e := newEngine(t, nil, true)
	res := e.Execute(context.Background(), flowOf(automation.Step{Name: "h", Type: automation.StepHTTP, URL: srv.URL + "/headers"}), runOf(`{}`))
	if res.Run.Status != automation.RunFailed || !strings.Contains(res.Run.Steps[0].Error, "request failed") {
		t.Fatalf("huge headers: run %s, step error %.300q", res.Run.Status, res.Run.Steps[0].Error)
	}
	long := srv.URL + "/" + strings.Repeat("p", 100_000)
	res = e.Execute(context.Background(), flowOf(automation.Step{Name: "h", Type: automation.StepHTTP, URL: long}), runOf(`{}`))
	if n := len(res.Run.Steps[0].Error); res.Run.Status != automation.RunFailed || n > MaxStepErrorBytes+8 {
		t.Fatalf("long URL: run %s, step error of %d bytes", res.Run.Status, n)
	}
	storable(t, res.Run)
}

func TestRespondBodyIsBounded(t *testing.T) {
	e := newEngine(t, nil, false)
	f := flowOf(automation.Step{Name: "r", Type: automation.StepRespond, Body: raw(`{"m": "{{ repeat(\"x\", 200000) }}"}`)})
	res := e.Execute(context.Background(), f, runOf(`{}`))
	if res.Run.Status != automation.RunFailed || res.Retryable || !strings.Contains(res.Run.Steps[0].Error, "a RESPOND body may have at most") {
		t.Fatalf("run %s (retryable %v): %q", res.Run.Status, res.Retryable, res.Run.Steps[0].Error)
	}
	f = flowOf(automation.Step{Name: "r", Type: automation.StepRespond, Body: raw(`{"m": "{{ repeat(\"x\", 1000) }}"}`)})
	if res := e.Execute(context.Background(), f, runOf(`{}`)); res.Run.Status != automation.RunSucceeded || len(res.Run.Response.Body) < 1000 {
		t.Fatalf("a small answer: run %s: %q", res.Run.Status, res.Run.Error)
	}
}

// Guarded builtins over values whose type is only known at run time (a
// trigger field) compile and give the builtin's own result: a join with and
// without its separator once made expr's compiler panic picking between two
// declared signatures.
func TestGuardedBuiltinsOverTriggerValues(t *testing.T) {
	tests := []struct{ tmpl, want string }{
		{`{{ join(trigger.body.topics, ", ") }}`, `"a, b"`},
		{`{{ join(trigger.body.topics) }}`, `"ab"`},
		{`{{ trigger.body.topics | join("+") }}`, `"a+b"`},
		{`{{ split(trigger.body.csv, ",") }}`, `["x","y","z"]`},
		{`{{ split(trigger.body.csv, ",", 2) }}`, `["x","y,z"]`},
		{`{{ repeat(trigger.body.s, trigger.body.n) }}`, `"abab"`},
		{`{{ replace(trigger.body.s, "a", "c") }}`, `"cb"`},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl, func(t *testing.T) {
			if err := (Checker{}).Template(tt.tmpl); err != nil {
				t.Fatalf("Template: %v", err)
			}
			f := flowOf(automation.Step{Name: "v", Type: automation.StepSet, Values: raw(`{"v": ` + quoteJSON(tt.tmpl) + `}`)})
			res := newEngine(t, nil, false).Execute(context.Background(), f,
				runOf(`{"topics": ["a", "b"], "csv": "x,y,z", "s": "ab", "n": 2}`))
			if res.Run.Status != automation.RunSucceeded {
				t.Fatalf("run %s: %q", res.Run.Status, res.Run.Error)
			}
			if got := string(res.Run.Steps[0].Output); got != `{"v":`+tt.want+`}` {
				t.Errorf("output %s, want {\"v\":%s}", got, tt.want)
			}
		})
	}
}
