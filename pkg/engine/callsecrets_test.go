package engine

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// recordingCalls is a Calls that keeps the calls it is asked for.
type recordingCalls struct{ calls []automation.Call }

func (c *recordingCalls) CheckCall(context.Context, string, string) error { return nil }
func (c *recordingCalls) StartCall(_ context.Context, call automation.Call) error {
	c.calls = append(c.calls, call)
	return nil
}
func (c *recordingCalls) CalledRun(context.Context, string, string, string) (automation.Run, error) {
	return automation.Run{}, automation.NotFound("run", "")
}

// TestCallFlowCarriesSecrets: a CALL_FLOW step gives its child the secret
// values its input holds (and only those), and a child run masks what its
// caller gave it in every output, without reading variables itself.
func TestCallFlowCarriesSecrets(t *testing.T) {
	const secret, other = "s3cr3t-for-the-child", "another-secret-value"
	vars := &memVars{values: map[string]string{"TOKEN": secret, "OTHER": other}, secrets: []string{secret, other}}
	calls := &recordingCalls{}
	no := false
	e := New(Config{Env: automation.ExecEnv{Variables: vars, Calls: calls}})
	f := flowOf(automation.Step{Name: "call", Type: automation.StepCallFlow, FlowID: "flw_child", Wait: &no,
		Input: raw(`{"token": "{{ vars.TOKEN }}", "n": "{{ len(vars.OTHER) }}"}`)})
	if r := e.Execute(context.Background(), f, runOf(`{}`)).Run; r.Status != automation.RunSucceeded {
		t.Fatalf("parent run %s %q", r.Status, r.Error)
	}
	if len(calls.calls) != 1 || !slices.Equal(calls.calls[0].Caller.Secrets, []string{secret}) {
		t.Fatalf("calls %+v: want one whose caller carries the secret in its input, only", calls.calls)
	}
	if !strings.Contains(string(calls.calls[0].Body), secret) {
		t.Fatalf("the child's input %s lacks the value it computes with", calls.calls[0].Body)
	}

	// The child: no vars of its own, masks what its caller gave it.
	child := runOf(string(calls.calls[0].Body))
	child.Trigger.Caller = &calls.calls[0].Caller
	e2 := New(Config{})
	cf := flowOf(automation.Step{Name: "use", Type: automation.StepSet, Values: raw(`{"t": "{{ trigger.body.token }}", "len": "{{ len(trigger.body.token) }}"}`)},
		automation.Step{Name: "answer", Type: automation.StepRespond, StatusCode: 200, Body: raw(`{"t": "{{ trigger.body.token }}"}`)})
	r := e2.Execute(context.Background(), cf, child).Run
	if r.Status != automation.RunSucceeded {
		t.Fatalf("child run %s %q", r.Status, r.Error)
	}
	var out map[string]any
	json.Unmarshal(r.Steps[0].Output, &out)
	if out["t"] != automation.SecretMask || out["len"] != float64(len(secret)) {
		t.Errorf("child's SET output %s: want the value masked and its length computed", r.Steps[0].Output)
	}
	if r.Response == nil || string(r.Response.Body) != `{"t":"********"}` {
		t.Errorf("child's answer %+v: want the value masked", r.Response)
	}
}
