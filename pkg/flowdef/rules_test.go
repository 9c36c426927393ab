package flowdef

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestValidateCode(t *testing.T) {
	tests := []struct {
		name    string
		step    Step
		wantErr string
	}{
		{"minimal", Step{Code: "return 1"}, ""},
		{"timeout", Step{Code: "return 1", Timeout: "10s"}, ""},
		{"milliseconds", Step{Code: "return 1", Timeout: "250ms"}, ""},
		{"no code", Step{Code: "  "}, "steps[0] (js).code is required for CODE"},
		{"code too long", Step{Code: strings.Repeat("x", MaxCodeBytes+1)}, "at most 65536 are allowed"},
		{"timeout over the cap", Step{Code: "return 1", Timeout: "11s"}, `steps[0] (js).timeout "11s": use a duration above 0 and at most 10s`},
		{"timeout zero", Step{Code: "return 1", Timeout: "0s"}, "above 0"},
		{"timeout not a duration", Step{Code: "return 1", Timeout: "1000"}, `timeout "1000"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.step.Name, tt.step.Type = "js", StepCode
			err := checkCode(nil, &tt.step, "steps[0] (js)")
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("validateCode = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if err := OnlyFields(&Step{Name: "h", Type: StepHTTP, URL: "https://x", Timeout: "1s"}, "steps[0]"); err == nil || !strings.Contains(err.Error(), "timeout does not apply to HTTP") {
		t.Errorf("timeout on an HTTP step: %v", err)
	}
}

// TestEveryStepTypeHasRules is what the compiler cannot say: a step type
// named in StepTypes has rules, every rules table is for a named type, and
// every field of Step belongs to some type (or is common to all).
func TestEveryStepTypeHasRules(t *testing.T) {
	for _, st := range StepTypes {
		if RulesOf(st) == nil {
			t.Errorf("step type %s has no rules: add a step_*.go file that registers them", st)
		}
	}
	if len(registry) != len(StepTypes) {
		t.Errorf("%d step types have rules, StepTypes names %d", len(registry), len(StepTypes))
	}
	owned := map[string]bool{}
	for _, r := range registry {
		for _, f := range r.Fields {
			owned[f] = true
		}
	}
	for _, f := range stepFields {
		if !owned[f.name] {
			t.Errorf("Step field %q belongs to no step type's Fields", f.name)
		}
	}
	for f := range owned {
		found := false
		for _, sf := range stepFields {
			found = found || sf.name == f
		}
		if !found {
			t.Errorf("a step type takes field %q, which Step does not have", f)
		}
	}
}

// TestOnlyFieldsSeesEveryField sets each field of Step in turn on a step
// of a type that does not take it.
func TestOnlyFieldsSeesEveryField(t *testing.T) {
	for _, f := range stepFields {
		st := Step{Name: "s", Type: StepSet}
		if slices.Contains(RulesOf(StepSet).Fields, f.name) {
			st.Type = StepFilter
		}
		v := reflect.ValueOf(&st).Elem().Field(f.index)
		switch v.Kind() {
		case reflect.String:
			v.SetString("x")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int:
			v.SetInt(1)
		case reflect.Slice:
			if v.Type() == reflect.TypeOf(json.RawMessage{}) {
				v.SetBytes([]byte("{}"))
			} else {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
		case reflect.Map:
			v.Set(reflect.MakeMap(v.Type()))
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
		case reflect.Struct:
			if v.Type() != reflect.TypeOf(Query{}) {
				t.Fatalf("field %s: struct %s not covered by this test", f.name, v.Type())
			}
			v.Set(reflect.ValueOf(Query{SQL: "x"}))
		default:
			t.Fatalf("field %s: kind %s not covered by this test", f.name, v.Kind())
		}
		err := OnlyFields(&st, "steps[0]")
		if err == nil || !strings.Contains(err.Error(), "steps[0]."+f.name+" does not apply to") {
			t.Errorf("field %s on a %s step: %v", f.name, st.Type, err)
		}
	}
}
