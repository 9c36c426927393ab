package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// fuzzEnv is the environment of a run whose trigger body is body, with a
// step budget as the engine gives each step.
func fuzzEnv(body []byte) map[string]any {
	return map[string]any{
		"trigger": triggerEnv(automation.TriggerData{Method: "POST", Path: "/hook", Body: body, Headers: map[string]string{"X-A": "1"}}),
		"steps":   map[string]any{"prev": map[string]any{"items": []any{1.0, "two", nil}}},
		"flow":    map[string]any{"id": "flw_1", "name": "fuzz"},
		"run":     map[string]any{"id": "run_1"},
		budgetKey: newBudget(context.Background()),
	}
}

var fuzzBodies = []string{`{}`, `{"items":[1,2,3],"name":"Ada","n":2}`, `[1,[2,[3]]]`, `"text"`, `null`, `{"s":"` + strings.Repeat("x", 1000) + `"}`}

// checkEvalError holds every evaluation failure to what a step may record:
// an error with a message, never a panic (the VM turns those into errors).
func checkEvalError(t *testing.T, err error) {
	t.Helper()
	if err != nil && err.Error() == "" {
		t.Fatal("an evaluation error without a message")
	}
}

// FuzzExpression: any source either compiles or is a client error
// (automation.ErrInvalid) naming the expression briefly; what compiles
// evaluates on any body without panicking, within the step budget, and
// compiles the same way twice (the cache agrees with the compiler).
func FuzzExpression(f *testing.F) {
	for _, s := range []string{
		"trigger.body.n > 1", "len(trigger.body.items) == 3 && trigger.method == 'POST'",
		`repeat("x", 999999) + repeat("x", 999999)`, "all(trigger.body.items, # > 0)",
		"map(1..10, # * 2)", `toJSON(steps.prev)`, `trigger.body?.a?.b ?? "none"`, `::repeat("ab", 3)`,
		"reduce(1..20, #acc + #acc, 'x')", `split(trigger.body.name, "")`, "1 +", "foo(", "$env",
		`trigger.body.name matches "^A"`, `any(["a", "b"], trigger.body.name matches #)`, `"x" matches repeat("(a*)*", 300)`,
	} {
		for _, b := range fuzzBodies {
			f.Add(s, []byte(b))
		}
	}
	c := Checker{}
	f.Fuzz(func(t *testing.T, src string, body []byte) {
		err := c.Expression(src)
		if err != nil {
			var ae *automation.Error
			if !errors.Is(err, automation.ErrInvalid) || !errors.As(err, &ae) {
				t.Fatalf("Expression(%q) = %v, want an automation.Error of kind ErrInvalid", src, err)
			}
			if len(ae.Message) > 4*maxQuote+1000 {
				t.Fatalf("error of %d bytes: it should quote the source briefly", len(ae.Message))
			}
			if c.Expression(src) == nil {
				t.Fatal("a refused expression compiled on the second try")
			}
			return
		}
		env := fuzzEnv(body)
		p, err := c.compile(src)
		if err != nil {
			t.Fatalf("Expression passed but compile failed: %v", err)
		}
		v, err := run(part{src: src, prog: p}, env)
		checkEvalError(t, err)
		if err != nil {
			return
		}
		if s, err := boundedText(v, budgetOf(env)); err == nil && len(s) > MaxEvalBytes {
			t.Fatalf("text of %d bytes passed a budget of %d", len(s), MaxEvalBytes)
		}
	})
}

// FuzzTemplate: a template is accepted or a client error; text without
// braces is itself; evaluation never panics and its text stays within the
// step budget.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		"plain", "https://api.example.com/{{ trigger.body.id }}?q={{ trigger.body.name }}",
		`{{ {"a": {"b": 1}} }}`, `{{ "}}" + trigger.body.name }}`, "{{ trigger.body.items }} items",
		"x }} y", "{{ unclosed", "{{ }}", `{{ repeat("x", 999999) }}{{ repeat("y", 999999) }}`,
		"{{ trigger.body }}{{ trigger.body }}{{ trigger.body }}",
	} {
		for _, b := range fuzzBodies {
			f.Add(s, []byte(b))
		}
	}
	c := Checker{}
	f.Fuzz(func(t *testing.T, s string, body []byte) {
		err := c.Template(s)
		if err != nil {
			if !errors.Is(err, automation.ErrInvalid) {
				t.Fatalf("Template(%q) = %v, want ErrInvalid", s, err)
			}
			return
		}
		env := fuzzEnv(body)
		v, err := c.evalString(s, env)
		checkEvalError(t, err)
		if err != nil {
			return
		}
		if !strings.Contains(s, "{{") && v != s {
			t.Fatalf("plain text %q evaluated to %#v", s, v)
		}
		if str, ok := v.(string); ok && len(str) > MaxEvalBytes {
			t.Fatalf("template text of %d bytes passed a budget of %d", len(str), MaxEvalBytes)
		}
		// The engine's own record of such a value stays within its cap.
		e := New(Config{MaxOutputBytes: 4096})
		if rec := e.record(v, e.maxOutput); len(rec) > 4096 || !json.Valid(rec) {
			t.Fatalf("recorded output of %d bytes (valid JSON %v)", len(rec), json.Valid(rec))
		}
	})
}
