package automation_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

func text(s string) *string { return &s }

// A secret variable's value lives in Secrets, never in the store's record,
// and leaves Secrets when the variable is deleted or made plain.
func TestVariableSecretKeptInSecrets(t *testing.T) {
	env := flowtest.New(t, flowtest.Options{})
	ctx := t.Context()
	p, err := env.Svc.CreateProject(ctx, "vars", automation.PlanTeam)
	if err != nil {
		t.Fatal(err)
	}
	secretOf := func() ([]byte, error) {
		return env.Dir.Secrets.Secret(ctx, p.ID, automation.VariableSecretName("TOKEN"))
	}
	if _, err := env.Svc.PutVariable(ctx, p, "TOKEN", automation.VariableInput{Value: text("s3cr3t-value"), Secret: true}); err != nil {
		t.Fatal(err)
	}
	if b, err := secretOf(); err != nil || string(b) != "s3cr3t-value" {
		t.Fatalf("stored secret = %q, %v", b, err)
	}
	stored, err := env.Store.Variables(ctx, p.ID)
	if err != nil || stored["TOKEN"].Value != nil || !stored["TOKEN"].Secret {
		t.Fatalf("store record = %+v, %v: want secret, no value", stored["TOKEN"], err)
	}

	if _, err := env.Svc.PutVariable(ctx, p, "TOKEN", automation.VariableInput{Value: text("plain")}); err != nil {
		t.Fatal(err)
	}
	if _, err := secretOf(); !automation.IsNotFound(err) {
		t.Errorf("secret after the variable was made plain: err = %v, want not found", err)
	}

	if _, err := env.Svc.PutVariable(ctx, p, "TOKEN", automation.VariableInput{Value: text("again"), Secret: true}); err != nil {
		t.Fatal(err)
	}
	if err := env.Svc.DeleteVariable(ctx, p, "TOKEN"); err != nil {
		t.Fatal(err)
	}
	if _, err := secretOf(); !automation.IsNotFound(err) {
		t.Errorf("secret after the variable was deleted: err = %v, want not found", err)
	}
}

// A project holds at most MaxVariables variables; replacing one at the
// limit is still allowed.
func TestVariableLimits(t *testing.T) {
	env := flowtest.New(t, flowtest.Options{})
	ctx := t.Context()
	p, err := env.Svc.CreateProject(ctx, "vars", automation.PlanTeam)
	if err != nil {
		t.Fatal(err)
	}
	for i := range automation.MaxVariables {
		if _, err := env.Svc.PutVariable(ctx, p, "V"+strconv.Itoa(i), automation.VariableInput{Value: text("x")}); err != nil {
			t.Fatalf("variable %d: %v", i, err)
		}
	}
	_, err = env.Svc.PutVariable(ctx, p, "ONE_MORE", automation.VariableInput{Value: text("x")})
	if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), "delete one first") {
		t.Errorf("variable past the limit: err = %v", err)
	}
	// A secret one past the limit leaves no value behind in Secrets.
	_, err = env.Svc.PutVariable(ctx, p, "ONE_MORE", automation.VariableInput{Value: text("s3cret-x"), Secret: true})
	if !errors.Is(err, automation.ErrInvalid) {
		t.Errorf("secret variable past the limit: err = %v", err)
	}
	if _, err := env.Dir.Secrets.Secret(ctx, p.ID, automation.VariableSecretName("ONE_MORE")); !automation.IsNotFound(err) {
		t.Errorf("the refused secret variable's value was kept: err = %v", err)
	}
	if _, err := env.Svc.PutVariable(ctx, p, "V0", automation.VariableInput{Value: text("y")}); err != nil {
		t.Errorf("replacing a variable at the limit: %v", err)
	}
}

// echoServer answers every request with its Authorization header and body
// as JSON, as a service that echoes what it was sent would.
func echoServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"auth": r.Header.Get("Authorization"), "body": string(b)})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Runs read vars.NAME in expressions; a secret variable's value reaches the
// external service but is masked in the run record (outputs and errors);
// a step reading a variable the project lacks fails naming it.
func TestRunsReadVariables(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{MaxAttempts: 1})
	ctx := t.Context()
	const secret = "tok-5b1e9c2d7f"
	for name, in := range map[string]automation.VariableInput{
		"GREETING":  {Value: text("hello")},
		"API_TOKEN": {Value: text(secret), Secret: true},
	} {
		if _, err := e.svc.PutVariable(ctx, e.project, name, in); err != nil {
			t.Fatal(err)
		}
	}
	srv := echoServer(t)
	f := e.ActiveFlow(t, e.project, "uses vars",
		automation.Step{Name: "greet", Type: automation.StepSet, Values: json.RawMessage(`{"text": "{{ vars.GREETING }} {{ trigger.body.ref }}"}`)},
		automation.Step{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: srv.URL,
			Headers: map[string]string{"Authorization": "Bearer {{ vars.API_TOKEN }}"},
			Body:    json.RawMessage(`{"token": "{{ vars[\"API_TOKEN\"] }}"}`)},
	)
	r := e.start1(t, f)
	x, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || x.Run.Status != automation.RunSucceeded {
		t.Fatalf("run = %s %q, %v", x.Run.Status, x.Run.Error, err)
	}
	got, err := e.svc.Run(ctx, e.project, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(got.Steps[0].Output); !strings.Contains(s, `"hello main"`) {
		t.Errorf("greet output = %s, want hello main", s)
	}
	call := string(got.Steps[1].Output)
	// The service got the secret (it echoes it back), the record has the mask.
	if strings.Contains(call, secret) || !strings.Contains(call, "Bearer "+automation.SecretMask) {
		t.Errorf("call output = %s: want the secret masked", call)
	}
	if b, _ := json.Marshal(got); strings.Contains(string(b), secret) {
		t.Errorf("the run record holds the secret: %s", b)
	}

	// A missing variable fails the step that reads it, naming it; a step
	// whose `when` is false reads nothing and is skipped.
	g := e.ActiveFlow(t, e.project, "missing var",
		automation.Step{Name: "skipped", Type: automation.StepSet, When: "false", Values: json.RawMessage(`{"x": "{{ vars.NOPE_SKIPPED }}"}`)},
		automation.Step{Name: "ok", Type: automation.StepSet, Values: json.RawMessage(`{"x": "{{ steps.vars?.NOT_A_VAR ?? 1 }}"}`)},
		automation.Step{Name: "reads", Type: automation.StepSet, Values: json.RawMessage(`{"x": "{{ vars.NOPE }}"}`)},
	)
	r = e.start1(t, g)
	x, err = e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || x.Run.Status != automation.RunFailed || !strings.Contains(x.Run.Error, "step reads: variable NOPE is not defined") {
		t.Fatalf("run = %s %q, %v: want FAILED naming NOPE at step reads", x.Run.Status, x.Run.Error, err)
	}
	if st := x.Run.Steps; st[0].Status != automation.StepSkipped || st[1].Status != automation.StepSucceeded || st[2].Status != automation.StepFailed {
		t.Errorf("steps = %s %s %s, want SKIPPED SUCCEEDED FAILED", st[0].Status, st[1].Status, st[2].Status)
	}

	// An error message that quotes the secret is masked too.
	h := e.ActiveFlow(t, e.project, "secret in error",
		automation.Step{Name: "bad", Type: automation.StepHTTP, Method: "GET", URL: "{{ vars.API_TOKEN }}"})
	r = e.start1(t, h)
	x, err = e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || x.Run.Status != automation.RunFailed {
		t.Fatalf("run = %s %q, %v: want FAILED", x.Run.Status, x.Run.Error, err)
	}
	if strings.Contains(x.Run.Error, secret) || strings.Contains(x.Run.Steps[0].Error, secret) {
		t.Errorf("errors hold the secret: run %q, step %q", x.Run.Error, x.Run.Steps[0].Error)
	}
}
