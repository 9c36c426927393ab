package engine

import "testing"

func benchEnv() map[string]any {
	return map[string]any{
		"trigger": map[string]any{"body": map[string]any{"n": 2.0, "ref": "refs/heads/main", "user": map[string]any{"login": "octo"}}},
		"steps":   map[string]any{"set": map[string]any{"a": 1.0}},
		"flow":    map[string]any{},
		"run":     map[string]any{"id": "run_x"},
	}
}

// BenchmarkExpressionCondition evaluates a FILTER condition (compiled once,
// then served from the cache, as on every run after the first).
func BenchmarkExpressionCondition(b *testing.B) {
	env := benchEnv()
	c := Checker{}
	b.ReportAllocs()
	for b.Loop() {
		ok, err := c.evalBool(`trigger.body.n > 1 && trigger.body.ref == "refs/heads/main"`, env)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkExpressionTemplate renders a string with one {{ }} part.
func BenchmarkExpressionTemplate(b *testing.B) {
	env := benchEnv()
	c := Checker{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.evalText(`user {{ trigger.body.user.login }} on {{ trigger.body.ref }}`, env); err != nil {
			b.Fatal(err)
		}
	}
}
