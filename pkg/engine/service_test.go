package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/engine"
	"flowservice/pkg/flowtest"
)

// newService is a Service on a SQLite store in t.TempDir() (pkg/flowtest),
// checking definitions with engine.Checker as flowd and the Lambdas do.
func newService(t *testing.T) (*automation.Service, automation.Project) {
	return newServiceTB(t, automation.PlanFree)
}

func newServiceTB(t testing.TB, plan automation.Plan) (*automation.Service, automation.Project) {
	t.Helper()
	env := flowtest.New(t, flowtest.Options{})
	p, _ := env.Project(t, "test", plan)
	return env.Svc, p
}

// Definitions past the save-time limits are client errors naming the field.
func TestSaveRefusesUnboundedDefinitions(t *testing.T) {
	svc, p := newService(t)
	nested := "true"
	for i := 0; i < 6; i++ {
		nested = fmt.Sprintf("all(trigger.body.items, %s)", nested)
	}
	tests := []struct {
		name  string
		step  automation.Step
		field string
		want  string
	}{
		{"six nested all", automation.Step{Name: "f", Type: automation.StepFilter, Condition: nested},
			"steps[0].condition", "nest 6 deep"},
		{"huge expression", automation.Step{Name: "s", Type: automation.StepSet,
			Values: []byte(`{"v": "{{ 1` + strings.Repeat(" + 1", engine.MaxExprNodes) + ` }}"}`)},
			"steps[0].values.v", "at most 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, eng, steps := "bounded", automation.FlowBuilder, []automation.Step{tt.step}
			_, err := svc.CreateFlow(context.Background(), p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps})
			var ae *automation.Error
			if !errors.Is(err, automation.ErrInvalid) || !errors.As(err, &ae) {
				t.Fatalf("CreateFlow = %v, want an automation.Error of kind ErrInvalid", err)
			}
			if !strings.HasPrefix(ae.Message, tt.field) || !strings.Contains(ae.Message, tt.want) {
				t.Fatalf("message %q, want it to start with %s and contain %q", ae.Message, tt.field, tt.want)
			}
		})
	}
}

// CR, LF and other control characters in header values and in a
// connection's key or prefix are refused when saved, naming the field.
func TestSaveRefusesControlCharactersInHeaders(t *testing.T) {
	svc, p := newService(t)
	ctx := context.Background()
	for _, v := range []string{"a\r\nX-Injected: 1", "a\nb", "{{ trigger.body.x }}\r", "a\x00b", "a\x7fb"} {
		name, eng := "headers", automation.FlowBuilder
		steps := []automation.Step{{Name: "h", Type: automation.StepHTTP, URL: "https://api.example.com/x",
			Headers: map[string]string{"X-Ref": v}}}
		_, err := svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps})
		if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), "steps[0].headers.X-Ref contains a control character") {
			t.Errorf("header value %q: CreateFlow = %v, want ErrInvalid naming steps[0].headers.X-Ref", v, err)
		}
	}
	name, eng := "tab", automation.FlowBuilder
	steps := []automation.Step{{Name: "h", Type: automation.StepHTTP, URL: "https://api.example.com/x",
		Headers: map[string]string{"X-Ref": "a\tb {{ trigger.body.x }}"}}}
	if _, err := svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps}); err != nil {
		t.Errorf("a tab is allowed in a header value: %v", err)
	}

	tests := []struct{ value, field string }{
		{`{"apiKey": "k", "prefix": "Bearer\r\nX-Injected: 1 "}`, "value.prefix"},
		{`{"apiKey": "k", "prefix": "Token\n"}`, "value.prefix"},
		{`{"apiKey": "secret-key\r\n"}`, "value.apiKey"},
	}
	for _, tt := range tests {
		_, err := svc.CreateConnection(ctx, p, automation.ConnectionInput{Name: "c", App: "x", Type: automation.ConnectionAPIKey, Value: []byte(tt.value)})
		if !errors.Is(err, automation.ErrInvalid) || !strings.HasPrefix(err.Error(), tt.field+" contains a control character") {
			t.Errorf("CreateConnection(%s) = %v, want ErrInvalid naming %s", tt.value, err, tt.field)
		}
		if err != nil && strings.Contains(err.Error(), "secret-key") {
			t.Errorf("error %q reveals the key", err)
		}
	}
	if _, err := svc.CreateConnection(ctx, p, automation.ConnectionInput{Name: "c", App: "x", Type: automation.ConnectionAPIKey,
		Value: []byte(`{"apiKey": "k", "prefix": "Token "}`)}); err != nil {
		t.Errorf("a plain prefix: %v", err)
	}
}

// Nested steps are validated where they stand: the message points at the
// bad field by its path and names the step.
func TestSavePointsAtBadNestedSteps(t *testing.T) {
	svc, p := newService(t)
	ok := automation.Step{Name: "ok", Type: automation.StepSet, Values: json.RawMessage(`{}`)}
	bad := automation.Step{Name: "notify", Type: automation.StepHTTP, Method: "POST"}
	sw := func(cases ...automation.Case) automation.Step {
		return automation.Step{Name: "route", Type: automation.StepSwitch, Cases: cases}
	}
	many := "[" + strings.TrimSuffix(strings.Repeat("1,", automation.MaxForEachItems+1), ",") + "]"
	tests := []struct {
		name  string
		steps []automation.Step
		want  string
	}{
		{"bad step in a case", []automation.Step{sw(
			automation.Case{When: "true", Steps: []automation.Step{ok}},
			automation.Case{When: "trigger.body.x == 1", Steps: []automation.Step{bad}})},
			`steps[0].cases[1].steps[0].url is required for HTTP (step "notify")`},
		{"bad case condition", []automation.Step{sw(automation.Case{When: "trigger.body.x ==", Steps: []automation.Step{ok}})},
			`steps[0].cases[0].when: `},
		{"switch without cases", []automation.Step{sw()}, `steps[0].cases is required for SWITCH`},
		{"duplicate name across nesting", []automation.Step{ok, sw(automation.Case{When: "true", Steps: []automation.Step{ok}})},
			`steps[1].cases[0].steps[0].name "ok": step names must be unique in the whole flow`},
		{"bad step in a loop", []automation.Step{{Name: "each", Type: automation.StepForEach, Items: json.RawMessage(`"trigger.body.items"`),
			Steps: []automation.Step{ok, {Name: "s", Type: automation.StepSet, Values: json.RawMessage(`{"v": "{{ item. }}"}`)}}}},
			`steps[0].steps[1].values.v: `},
		{"literal items over the cap", []automation.Step{{Name: "each", Type: automation.StepForEach, Items: json.RawMessage(many), Steps: []automation.Step{ok}}},
			`steps[0].items: 1001 items; FOR_EACH runs over at most 1000`},
		{"concurrency over the cap", []automation.Step{{Name: "each", Type: automation.StepForEach, Items: json.RawMessage(`[1]`), Concurrency: 11, Steps: []automation.Step{ok}}},
			`steps[0].concurrency 11: use 1 to 10`},
		{"loop without steps", []automation.Step{{Name: "each", Type: automation.StepForEach, Items: json.RawMessage(`[1]`)}},
			`steps[0].steps is required for FOR_EACH`},
		{"bad when", []automation.Step{{Name: "s", Type: automation.StepSet, Values: json.RawMessage(`{}`), When: "nope("}},
			`steps[0].when: `},
		{"unknown name in when", []automation.Step{{Name: "s", Type: automation.StepSet, Values: json.RawMessage(`{}`), When: "secrets.x"}},
			`steps[0].when: `},
		{"nested field of another type", []automation.Step{{Name: "s", Type: automation.StepSet, Values: json.RawMessage(`{}`), Cases: []automation.Case{}}},
			`steps[0].cases does not apply to SET steps`},
		{"store without set or delete", []automation.Step{{Name: "st", Type: automation.StepStore}},
			`steps[0]: STORE needs set`},
		{"store set not an object", []automation.Step{{Name: "st", Type: automation.StepStore, Set: json.RawMessage(`[1]`)}},
			`steps[0].set must be an object`},
		{"wait over 30 days", []automation.Step{{Name: "w", Type: automation.StepWait, Duration: "721h"}},
			`steps[0].duration "721h": at most 720h0m0s`},
		{"wait without duration", []automation.Step{{Name: "w", Type: automation.StepWait}},
			`steps[0].duration "": use a positive Go duration`},
		{"wait in a loop", []automation.Step{{Name: "each", Type: automation.StepForEach, Items: json.RawMessage(`[1]`),
			Steps: []automation.Step{{Name: "w", Type: automation.StepWait, Duration: "1m"}}}},
			`steps[0].steps[0]: WAIT cannot run inside FOR_EACH`},
		{"bad onError step", nil, `onError[0].url is required for HTTP (step "notify")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, eng := "f", automation.FlowBuilder
			in := automation.FlowInput{Name: &name, Engine: &eng, Steps: &tt.steps}
			if tt.steps == nil {
				in.Steps = &[]automation.Step{ok}
				in.OnError = &[]automation.Step{bad}
			}
			_, err := svc.CreateFlow(context.Background(), p, in)
			if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CreateFlow = %v, want a 400 containing %q", err, tt.want)
			}
		})
	}
	// A valid nested flow saves, and reads back the same.
	steps := []automation.Step{sw(automation.Case{When: "trigger.body.x == 1", Steps: []automation.Step{
		{Name: "each", Type: automation.StepForEach, Items: json.RawMessage(`"trigger.body.items"`), Concurrency: 2,
			Steps: []automation.Step{{Name: "v", Type: automation.StepSet, Values: json.RawMessage(`{"i": "{{ item }}", "n": "{{ index }}"}`), When: "index < 5"}}},
	}})}
	name, eng := "nested", automation.FlowBuilder
	f, err := svc.CreateFlow(context.Background(), p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps, OnError: &[]automation.Step{ok}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := svc.Flow(context.Background(), p, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got.Steps)
	b, _ := json.Marshal(f.Steps)
	if string(a) != string(b) || len(got.OnError) != 1 || got.Steps[0].Cases[0].Steps[0].Concurrency != 2 {
		t.Errorf("read back %s\nwant %s (onError %d)", a, b, len(got.OnError))
	}
}

// STORE keeps a flow's state between runs: a poll acts only when what it
// reads changed; the state is capped, and goes with the flow.
func TestStoreStateAcrossRuns(t *testing.T) {
	svc, p := newService(t)
	ctx := context.Background()
	var (
		mu       sync.Mutex
		current  = "a"
		notified []string
	)
	ext := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path == "/notify" {
			b, _ := io.ReadAll(r.Body)
			notified = append(notified, string(b))
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"sha":%q}`, current)
	}))
	defer ext.Close()
	steps := []automation.Step{
		{Name: "poll", Type: automation.StepHTTP, Method: "GET", URL: ext.URL + "/head"},
		{Name: "notify", Type: automation.StepHTTP, Method: "POST", URL: ext.URL + "/notify",
			When: "steps.poll.body.sha != state.lastSha", Body: json.RawMessage(`{"from":"{{ state.lastSha ?? 'none' }}","to":"{{ steps.poll.body.sha }}"}`)},
		{Name: "remember", Type: automation.StepStore, Set: json.RawMessage(`{"lastSha": "{{ steps.poll.body.sha }}", "runs": "{{ (state.runs ?? 0) + 1 }}"}`), Delete: []string{"old"}},
	}
	name, eng := "poll", automation.FlowBuilder
	f, err := svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps})
	if err != nil {
		t.Fatal(err)
	}
	f.Project = p.ID
	e := engine.New(engine.Config{Env: automation.ExecEnv{State: svc}, AllowPrivateNetworks: true})
	run := func(sha string) automation.Run {
		mu.Lock()
		current = sha
		mu.Unlock()
		r := e.Execute(ctx, f, automation.Run{ID: "run_" + sha, FlowID: f.ID, Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}}).Run
		if r.Status != automation.RunSucceeded {
			b, _ := json.Marshal(r.Steps)
			t.Fatalf("run %s: %s %s\n%s", sha, r.Status, r.Error, b)
		}
		return r
	}
	run("a")
	r := run("a")
	if r.Steps[1].Status != automation.StepSkipped {
		t.Errorf("unchanged sha: notify %s", r.Steps[1].Status)
	}
	run("b")
	mu.Lock()
	got := strings.Join(notified, " ")
	mu.Unlock()
	if got != `{"from":"none","to":"a"} {"from":"a","to":"b"}` {
		t.Errorf("notified %s", got)
	}
	st, err := svc.FlowState(ctx, p.ID, f.ID)
	if err != nil || st["lastSha"] != "b" || fmt.Sprint(st["runs"]) != "3" {
		t.Errorf("state %v %v", st, err)
	}

	// Past 64 KiB the step fails and the state stays.
	big := []automation.Step{{Name: "big", Type: automation.StepStore, Set: json.RawMessage(`{"blob": "{{ repeat('x', 70000) }}"}`)}}
	name2 := "big"
	g, err := svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name2, Engine: &eng, Steps: &big})
	if err != nil {
		t.Fatal(err)
	}
	g.Project = p.ID
	r = e.Execute(ctx, g, automation.Run{ID: "run_big", FlowID: g.ID, Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}}).Run
	if r.Status != automation.RunFailed || !strings.Contains(r.Error, "it holds at most 65536") {
		t.Errorf("oversized state: %s %q", r.Status, r.Error)
	}

	// Deleting the flow deletes its state.
	if err := svc.DeleteFlow(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	if st, err := svc.FlowState(ctx, p.ID, f.ID); err != nil || len(st) != 0 {
		t.Errorf("state after delete: %v %v", st, err)
	}
}
