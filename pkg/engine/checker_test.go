package engine

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCheckerExpression(t *testing.T) {
	tests := []struct {
		src     string
		wantErr string // "" for valid
	}{
		{"trigger.body.event == 'push'", ""},
		{"steps.notify.status >= 200 && steps['set 1'].x > 1", ""},
		{"flow.id + run.id", ""},
		{"trigger.body?.data?.ref ?? 'none'", ""},
		{"len(trigger.headers) > 0 and trigger.method in ['POST', 'PUT']", ""},
		{"trigger.body.event ==", "unexpected token EOF at line 1, column 21"},
		{"foo(", "line 1, column"},
		{"foo", "unknown name foo at line 1, column 1"},
		{"trigger = 1", "line 1, column 9"},
		{"", "empty"},
	}
	c := Checker{}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			err := c.Expression(tt.src)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Expression(%q) = %v, want nil", tt.src, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Expression(%q) = %v, want an error containing %q", tt.src, err, tt.wantErr)
			}
			if tt.src != "" && !strings.Contains(err.Error(), tt.src) {
				t.Errorf("error %q does not quote the expression", err)
			}
		})
	}
}

func TestCheckerTemplate(t *testing.T) {
	tests := []struct {
		s       string
		wantErr string
	}{
		{"plain text", ""},
		{"", ""},
		{"https://api.example.com/{{ trigger.body.id }}", ""},
		{"{{ trigger.body.a }} and {{ steps.x.y }}", ""},
		{`{{ {"a": {"b": 1}} }}`, ""},
		{`{{ "}}" + trigger.body.x }}`, ""},
		{"{{ trigger.body.a ", `"{{" at position 1 is not closed`},
		{"x }} y", `"}}" at position 3 has no opening`},
		{"a {{ }} b", "empty"},
		{"{{ trigger.body.a == }}", "unexpected token EOF"},
		{"hi {{ nope }}", "unknown name nope"},
		{"{{ 'unterminated }}", "not closed"},
	}
	c := Checker{}
	for _, tt := range tests {
		t.Run(tt.s, func(t *testing.T) {
			err := c.Template(tt.s)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Template(%q) = %v, want nil", tt.s, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Template(%q) = %v, want an error containing %q", tt.s, err, tt.wantErr)
			}
		})
	}
}

func TestEvalString(t *testing.T) {
	env := map[string]any{
		"trigger": map[string]any{"body": map[string]any{
			"n": 2.0, "name": "Ada", "tags": []any{"a", "b"}, "data": map[string]any{"ref": "main"},
		}},
		"steps": map[string]any{"set1": map[string]any{"x": 4.0}},
		"flow":  map[string]any{"id": "flw_1"},
		"run":   map[string]any{"id": "run_1"},
	}
	tests := []struct {
		s    string
		want any
	}{
		{"{{ trigger.body.n * 2 }}", 4.0},
		{"{{trigger.body.data}}", map[string]any{"ref": "main"}},
		{"{{ trigger.body.name == 'Ada' }}", true},
		{"n={{ trigger.body.n }}", "n=2"},
		{"{{ trigger.body.name }}/{{ run.id }}", "Ada/run_1"},
		{"tags: {{ trigger.body.tags }}", `tags: ["a","b"]`},
		{"data {{ trigger.body.data }}", `data {"ref":"main"}`},
		{"[{{ trigger.body.missing }}]", "[]"},
		{"{{ steps.set1.x + 0.5 }} left", "4.5 left"},
		{"no expressions", "no expressions"},
	}
	c := Checker{}
	for _, tt := range tests {
		t.Run(tt.s, func(t *testing.T) {
			got, err := c.evalString(tt.s, env)
			if err != nil {
				t.Fatalf("evalString(%q): %v", tt.s, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("evalString(%q) = %#v, want %#v", tt.s, got, tt.want)
			}
		})
	}

	_, err := c.evalString("{{ steps.absent.x }}", env)
	if err == nil || !strings.Contains(err.Error(), "use ?. for optional fields") {
		t.Errorf("missing step: err = %v, want a hint about ?.", err)
	}
	ok, err := c.evalBool("trigger.body.n > 1", env)
	if err != nil || !ok {
		t.Errorf("evalBool = %v, %v; want true", ok, err)
	}
	if _, err := c.evalBool("trigger.body.name", env); err == nil || !strings.Contains(err.Error(), "must be true or false, got string Ada") {
		t.Errorf("evalBool of a string: err = %v", err)
	}
}

func TestEvalValue(t *testing.T) {
	env := map[string]any{"trigger": map[string]any{"body": map[string]any{"n": 3.0}},
		"steps": map[string]any{}, "flow": map[string]any{}, "run": map[string]any{}}
	var in any
	if err := json.Unmarshal([]byte(`{"a": "{{ trigger.body.n }}", "b": ["x{{ trigger.body.n }}", 1, true, null], "c": {"d": "plain"}}`), &in); err != nil {
		t.Fatal(err)
	}
	got, err := Checker{}.evalValue(in, env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": 3.0, "b": []any{"x3", 1.0, true, nil}, "c": map[string]any{"d": "plain"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("evalValue = %#v, want %#v", got, want)
	}
	var bad any
	_ = json.Unmarshal([]byte(`{"outer": {"inner": "{{ trigger.body.n.x.y }}"}}`), &bad)
	if _, err := (Checker{}).evalValue(bad, env); err == nil || !strings.Contains(err.Error(), "outer: inner: expression") {
		t.Fatalf("evalValue error = %v, want it to name outer: inner", err)
	}
}

func TestCheckerCron(t *testing.T) {
	tests := []struct {
		spec, tz string
		wantErr  string
	}{
		{"*/5 * * * *", "", ""},
		{"0 9 * * MON-FRI", "Europe/Paris", ""},
		{"@hourly", "UTC", ""},
		{"@daily", "America/New_York", ""},
		{"* * * * * *", "", "five fields"},
		{"* * * *", "", "five fields"},
		{"61 * * * *", "", "five fields"},
		{"", "", "cron is required"},
		{"@every 5m", "", "@every is not supported"},
		{"CRON_TZ=UTC * * * * *", "", "timezone field"},
		{"* * * * *", "Mars/Olympus", `timezone "Mars/Olympus" is not an IANA`},
		{"* * * * *", "Local", "not an IANA"},
	}
	c := Checker{}
	for _, tt := range tests {
		t.Run(tt.spec+"/"+tt.tz, func(t *testing.T) {
			err := c.Cron(tt.spec, tt.tz)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Cron(%q, %q) = %v", tt.spec, tt.tz, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Cron(%q, %q) = %v, want an error containing %q", tt.spec, tt.tz, err, tt.wantErr)
			}
		})
	}
}

func TestCacheBounded(t *testing.T) {
	c := newCache[int](3)
	for i, k := range []string{"a", "b", "c", "d", "e"} {
		c.put(k, i)
	}
	if n := c.len(); n != 3 {
		t.Fatalf("cache holds %d entries, want 3", n)
	}
	if v, ok := c.get("e"); !ok || v != 4 {
		t.Fatalf("latest entry: %v %v", v, ok)
	}
	// Compiling one new expression twice adds one program.
	before := programs.len()
	src := "trigger.body.a == " + strconv.FormatInt(time.Now().UnixNano(), 10)
	for range 2 {
		if err := (Checker{}).Expression(src); err != nil {
			t.Fatal(err)
		}
	}
	if n := programs.len(); n != before+1 {
		t.Fatalf("program cache went from %d to %d entries after compiling one expression twice, want +1", before, n)
	}
}
