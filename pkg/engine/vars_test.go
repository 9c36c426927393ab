package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// memVars is a project's variables in memory; loads counts the reads.
type memVars struct {
	values  map[string]string
	secrets []string
	loads   int
}

func (m *memVars) LoadRunVariables(context.Context, string) (automation.RunVariables, error) {
	m.loads++
	return automation.RunVariables{Values: m.values, Secrets: m.secrets}, nil
}

// varsEcho is a CodeRunner that logs and returns vars.TOKEN from its scope.
type varsEcho struct{}

func (varsEcho) RunCode(_ context.Context, req automation.CodeRequest) (automation.CodeResult, error) {
	var scope struct {
		Vars map[string]string `json:"vars"`
	}
	if err := json.Unmarshal(req.Scope, &scope); err != nil {
		return automation.CodeResult{}, err
	}
	out, _ := json.Marshal(map[string]string{"token": scope.Vars["TOKEN"], "with\"quote": scope.Vars["QUOTED"]})
	return automation.CodeResult{Output: out, Logs: []string{"token is " + scope.Vars["TOKEN"]}}, nil
}

// Secret values are masked in outputs (JSON-escaped ones too), logs,
// errors and the RESPOND answer, while steps compute with the values;
// variables are read once per attempt, and only by flows that use them.
func TestSecretVariablesMasked(t *testing.T) {
	const secret, quoted = "s3cr3t-tok", `a"b\c-long`
	vars := &memVars{values: map[string]string{"TOKEN": secret, "QUOTED": quoted, "PLAIN": "visible"}, secrets: []string{secret, quoted}}
	e := New(Config{Env: automation.ExecEnv{Variables: vars}, Code: varsEcho{}})
	f := flowOf(
		automation.Step{Name: "js", Type: automation.StepCode, Code: "return vars.TOKEN"},
		automation.Step{Name: "set", Type: automation.StepSet, Values: raw(`{"t": "{{ vars.TOKEN }}", "q": "{{ vars.QUOTED }}", "p": "{{ vars.PLAIN }}", "len": "{{ len(vars.TOKEN) }}"}`)},
		automation.Step{Name: "answer", Type: automation.StepRespond, StatusCode: 200,
			Headers: map[string]string{"X-T": "{{ vars.TOKEN }}"}, Body: raw(`{"t": "{{ vars.TOKEN }}"}`)},
	)
	r := e.Execute(context.Background(), f, runOf(`{}`)).Run
	if vars.loads != 1 || r.Status != automation.RunSucceeded {
		t.Errorf("run %s %q; variables read %d times, want once per attempt", r.Status, r.Error, vars.loads)
	}
	if r.Response == nil || string(r.Response.Body) != `{"t":"`+automation.SecretMask+`"}` || r.Response.Headers["X-T"] != automation.SecretMask {
		t.Errorf("RESPOND answer %+v: want the secret masked", r.Response)
	}
	// An error that quotes the value (a URL the request refuses) masks it.
	bad := e.Execute(context.Background(), flowOf(automation.Step{Name: "call", Type: automation.StepHTTP, Method: "GET",
		URL: "http://{{ vars.TOKEN }}:99999/"}), runOf(`{}`)).Run
	if bad.Status != automation.RunFailed || !strings.Contains(bad.Error, automation.SecretMask) || strings.Contains(bad.Error, secret) || strings.Contains(bad.Steps[0].Error, secret) {
		t.Errorf("failed run %s: error %q, step error %q", bad.Status, bad.Error, bad.Steps[0].Error)
	}
	vars.loads = 1
	b, _ := json.Marshal(r)
	for _, leak := range []string{secret, `a\"b\\c-long`, quoted} {
		if strings.Contains(string(b), leak) {
			t.Errorf("the run record holds %q: %s", leak, b)
		}
	}
	if s := string(r.Steps[1].Output); !strings.Contains(s, `"p":"visible"`) || !strings.Contains(s, `"len":10`) || !strings.Contains(s, `"t":"`+automation.SecretMask+`"`) {
		t.Errorf("SET output %s: want the plain value, the secret's length computed, the secret masked", s)
	}
	if logs := r.Steps[0].Logs; len(logs) != 1 || logs[0] != "token is "+automation.SecretMask {
		t.Errorf("CODE logs %q", logs)
	}
	if !json.Valid(r.Steps[0].Output) {
		t.Errorf("masked CODE output is not JSON: %s", r.Steps[0].Output)
	}

	// A flow that never mentions vars reads none.
	e.Execute(context.Background(), flowOf(automation.Step{Name: "s", Type: automation.StepSet, Values: raw(`{"a": "1"}`)}), runOf(`{}`))
	if vars.loads != 1 {
		t.Errorf("a flow without vars read them (%d loads)", vars.loads)
	}
}

// A missing variable fails the step that reads it, in any form of access,
// naming it; a step reading another step's field named vars is not
// mistaken for one.
func TestMissingVariableFailsTheStep(t *testing.T) {
	e := New(Config{Env: automation.ExecEnv{Variables: &memVars{values: map[string]string{"HAVE": "x"}}}, Code: varsEcho{}})
	for _, tt := range []struct {
		name string
		step automation.Step
		want string // "" for success
	}{
		{"dot", automation.Step{Name: "s", Type: automation.StepSet, Values: raw(`{"a": "{{ vars.NOPE }}"}`)}, "variable NOPE is not defined"},
		{"index", automation.Step{Name: "s", Type: automation.StepSet, Values: raw(`{"a": "{{ vars[\"NOPE2\"] }}"}`)}, "variable NOPE2 is not defined"},
		{"code", automation.Step{Name: "s", Type: automation.StepCode, Code: "return vars.NOPE3"}, "variable NOPE3 is not defined"},
		{"when", automation.Step{Name: "s", Type: automation.StepSet, When: "vars.NOPE4 == 'x'", Values: raw(`{}`)}, "variable NOPE4 is not defined"},
		{"present", automation.Step{Name: "s", Type: automation.StepSet, Values: raw(`{"a": "{{ vars.HAVE }}"}`)}, ""},
		{"other field", automation.Step{Name: "s", Type: automation.StepSet, Values: raw(`{"a": "{{ trigger.body?.vars?.NOPE5 ?? 'none' }}"}`)}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := e.Execute(context.Background(), flowOf(tt.step), runOf(`{}`)).Run
			if tt.want == "" {
				if r.Status != automation.RunSucceeded {
					t.Errorf("run %s %q, want SUCCEEDED", r.Status, r.Error)
				}
				return
			}
			if r.Status != automation.RunFailed || !strings.Contains(r.Error, "step s: "+tt.want) || !strings.Contains(r.Steps[0].Error, tt.want) {
				t.Errorf("run %s %q (step %q), want FAILED with %q", r.Status, r.Error, r.Steps[0].Error, tt.want)
			}
		})
	}
}

// failingVars is a variable store that is down.
type failingVars struct{}

func (failingVars) LoadRunVariables(context.Context, string) (automation.RunVariables, error) {
	return automation.RunVariables{}, errors.New("store unavailable")
}

// Variables that cannot be read fail the attempt before any step, worth
// retrying, and say so without the store's error.
func TestVariablesUnreadableRetries(t *testing.T) {
	e := New(Config{Env: automation.ExecEnv{Variables: failingVars{}}})
	res := e.Execute(context.Background(), flowOf(automation.Step{Name: "s", Type: automation.StepSet, Values: raw(`{"a": "{{ vars.X }}"}`)}), runOf(`{}`))
	if res.Run.Status != automation.RunFailed || !res.Retryable || !strings.HasPrefix(res.Run.Error, "step (variables): ") ||
		strings.Contains(res.Run.Error, "store unavailable") || res.Run.Steps[0].StartedAt != nil {
		t.Errorf("run %s %q retryable %v, step %+v", res.Run.Status, res.Run.Error, res.Retryable, res.Run.Steps[0])
	}
}
