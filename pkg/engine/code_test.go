package engine

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// codeRunner is a CodeRunner whose answer the test sets; it records what
// the engine sent. The real sandbox is tested in pkg/sandbox and through
// flowd.
type codeRunner struct {
	got []automation.CodeRequest
	run func(req automation.CodeRequest) (automation.CodeResult, error)
}

func (c *codeRunner) RunCode(_ context.Context, req automation.CodeRequest) (automation.CodeResult, error) {
	c.got = append(c.got, req)
	return c.run(req)
}

func TestCodeStep(t *testing.T) {
	cr := &codeRunner{run: func(req automation.CodeRequest) (automation.CodeResult, error) {
		return automation.CodeResult{Output: raw(`{"total": 3}`), Logs: []string{"counted 3"}}, nil
	}}
	e := New(Config{Code: cr})
	f := flowOf(
		automation.Step{Name: "prev", Type: automation.StepSet, Values: raw(`{"n": 1}`)},
		automation.Step{Name: "count", Type: automation.StepCode, Code: "return {total: trigger.body.items.length}", Timeout: "250ms"},
		automation.Step{Name: "after", Type: automation.StepSet, Values: raw(`{"t": "{{ steps.count.total }}"}`)},
	)
	r := e.Execute(context.Background(), f, runOf(`{"items": [1, 2, 3]}`)).Run
	if r.Status != automation.RunSucceeded || statuses(r) != "SUCCEEDED,SUCCEEDED,SUCCEEDED" {
		t.Fatalf("run %s %q steps %s", r.Status, r.Error, statuses(r))
	}
	if got := output(t, r, 2)["t"]; got != 3.0 {
		t.Errorf("a later step read steps.count.total as %v, want 3", got)
	}
	if len(r.Steps[1].Logs) != 1 || r.Steps[1].Logs[0] != "counted 3" || r.Steps[0].Logs != nil {
		t.Errorf("logs %q / %q, want only the CODE step's", r.Steps[1].Logs, r.Steps[0].Logs)
	}
	req := cr.got[0]
	if req.Code != f.Steps[1].Code || req.TimeoutMs != 250 {
		t.Errorf("request code %q timeout %d", req.Code, req.TimeoutMs)
	}
	var scope map[string]any
	if err := json.Unmarshal(req.Scope, &scope); err != nil {
		t.Fatal(err)
	}
	body, _ := scope["trigger"].(map[string]any)["body"].(map[string]any)
	prev, _ := scope["steps"].(map[string]any)["prev"].(map[string]any)
	if len(body["items"].([]any)) != 3 || prev["n"] != 1.0 || scope["flow"].(map[string]any)["id"] != "flw_1" || scope["run"].(map[string]any)["id"] != "run_1" {
		t.Errorf("scope %s lacks the run's data", req.Scope)
	}
}

func TestCodeStepFailures(t *testing.T) {
	tests := []struct {
		name      string
		runner    automation.CodeRunner
		want      string
		retryable bool
	}{
		{"no runner", nil, "step js: CODE steps are not available in this deployment", false},
		{"script error", &codeRunner{run: func(automation.CodeRequest) (automation.CodeResult, error) {
			return automation.CodeResult{Error: "bad signature", Logs: []string{"checked"}}, nil
		}}, "step js: bad signature", false},
		{"sandbox down", &codeRunner{run: func(automation.CodeRequest) (automation.CodeResult, error) {
			return automation.CodeResult{}, errors.New("fork: resource temporarily unavailable")
		}}, "step js: the code sandbox is unavailable", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{}
			if tt.runner != nil {
				cfg.Code = tt.runner
			}
			res := New(cfg).Execute(context.Background(), flowOf(automation.Step{Name: "js", Type: automation.StepCode, Code: "return 1"}), runOf(`{}`))
			if res.Run.Status != automation.RunFailed || !strings.HasPrefix(res.Run.Error, tt.want) || res.Retryable != tt.retryable {
				t.Errorf("run %s %q retryable=%v, want FAILED %q retryable=%v", res.Run.Status, res.Run.Error, res.Retryable, tt.want, tt.retryable)
			}
			if strings.Contains(res.Run.Error, "fork") {
				t.Errorf("internal sandbox error reached the run: %q", res.Run.Error)
			}
		})
	}
}
