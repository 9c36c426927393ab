package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
			"steps[0] (f).condition", "nest 6 deep"},
		{"huge expression", automation.Step{Name: "s", Type: automation.StepSet,
			Values: []byte(`{"v": "{{ 1` + strings.Repeat(" + 1", engine.MaxExprNodes) + ` }}"}`)},
			"steps[0] (s).values.v", "at most 1000"},
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
		if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), "steps[0] (h).headers.X-Ref contains a control character") {
			t.Errorf("header value %q: CreateFlow = %v, want ErrInvalid naming steps[0] (h).headers.X-Ref", v, err)
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
