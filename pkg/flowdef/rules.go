package flowdef

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// Rules are one step type's part of the language: the fields it takes and
// the checks that need nothing outside the step. Each step type declares
// its Rules in its own file (step_http.go, step_wait.go, …) and adds them
// to the table in that file's init; a new step type is that file, its
// fields on Step, its name in StepTypes, and an executor in pkg/engine.
// TestEveryStepTypeHasRules fails when one of these is missing.
type Rules struct {
	Type StepType
	// Fields are the JSON names of the Step fields this type takes, beside
	// name, type and when. A field of another type is refused, so that a
	// misplaced field is seen.
	Fields []string
	// SideEffects: the step acts on the world outside the run. Its result
	// is journaled before the next step starts, and an attempt that
	// resumes a run never executes a journaled one again.
	SideEffects bool
	// Parks says why a step of this type, as configured, parks the run
	// (a durable wait), or "" when it does not. A parking step cannot run
	// inside FOR_EACH, nor in onError steps, which run after the run ended.
	Parks func(st *Step) (inLoop, inOnError string)
	// Check checks the step's own fields, filling defaults in place.
	// Messages start with at (the step's path).
	Check func(c Checks, st *Step, at string) error
}

var registry = map[StepType]*Rules{}

// register adds one step type's rules; called from each step file's init.
func register(r Rules) {
	if registry[r.Type] != nil {
		panic("flowdef: step type registered twice: " + r.Type)
	}
	registry[r.Type] = &r
}

// RulesOf returns the rules of step type t, or nil for an unknown type.
func RulesOf(t StepType) *Rules { return registry[t] }

// SideEffects reports whether steps of type t act on the world outside the
// run (Rules.SideEffects).
func (t StepType) SideEffects() bool {
	r := registry[t]
	return r != nil && r.SideEffects
}

// stepFields are Step's fields by JSON name, found once by reflection so
// that adding a field to Step is enough for OnlyFields to see it.
var stepFields = func() []struct {
	name  string
	index int
} {
	var out []struct {
		name  string
		index int
	}
	t := reflect.TypeOf(Step{})
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		switch name {
		case "", "-", "name", "type", "when":
			continue
		}
		out = append(out, struct {
			name  string
			index int
		}{name, i})
	}
	return out
}()

// OnlyFields refuses a field set on st that belongs to another step type.
func OnlyFields(st *Step, at string) error {
	r := registry[st.Type]
	if r == nil {
		return Invalid("%s.type %q: allowed values are %s", at, st.Type, join(StepTypes))
	}
	v := reflect.ValueOf(st).Elem()
	for _, f := range stepFields {
		if v.Field(f.index).IsZero() || slices.Contains(r.Fields, f.name) {
			continue
		}
		var owners []StepType
		for _, t := range StepTypes {
			if o := registry[t]; o != nil && slices.Contains(o.Fields, f.name) {
				owners = append(owners, t)
			}
		}
		return Invalid("%s.%s does not apply to %s steps (it belongs to %s)", at, f.name, st.Type, join(owners))
	}
	return nil
}

// Step names are identifiers so that `steps.<name>` works in expressions.
var stepNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// Validator checks the steps of one flow: names unique in the whole flow,
// nesting, each type's Rules, and where parking steps may run. Messages
// name the path of the bad field and the step.
type Validator struct {
	Checks Checks
	// Before runs before a step's own rules: names a portable document
	// gives are resolved into this installation's IDs there.
	Before func(st *Step, at string) error
	// After runs after them: the checks that need the project (the
	// connection or flow a step names, a script's compile).
	After func(st *Step, at string) error
}

// Steps checks a flow's steps and its onError steps, filling defaults in
// place.
func (v Validator) Steps(steps, onError []Step) error {
	if n := CountSteps(steps) + CountSteps(onError); n > MaxSteps {
		return Invalid("steps: %d steps (nested steps and onError included); at most %d are allowed", n, MaxSteps)
	}
	w := walk{v: v, seen: map[string]bool{}}
	if err := w.steps(steps, "steps", 0, false); err != nil {
		return err
	}
	if err := w.steps(onError, "onError", 0, false); err != nil {
		return err
	}
	var why string
	WalkSteps(onError, func(st *Step) {
		if r := registry[st.Type]; why == "" && r != nil && r.Parks != nil {
			_, why = r.Parks(st)
		}
	})
	if why != "" {
		return Invalid("onError: %s", why)
	}
	return nil
}

// CountSteps counts steps and the steps nested in them.
func CountSteps(steps []Step) int {
	n := 0
	WalkSteps(steps, func(*Step) { n++ })
	return n
}

type walk struct {
	v    Validator
	seen map[string]bool
}

// steps checks a list of steps at path at (such as "steps" or
// "steps[0].cases[1].steps"), depth levels deep, inLoop inside a FOR_EACH.
func (w *walk) steps(steps []Step, at string, depth int, inLoop bool) error {
	if depth > MaxNesting {
		return Invalid("%s: steps nest more than %d levels deep", at, MaxNesting)
	}
	for i := range steps {
		st := &steps[i]
		here := fmt.Sprintf("%s[%d]", at, i)
		if !stepNameRE.MatchString(st.Name) {
			return Invalid("%s.name %q: use a letter or underscore, then letters, digits or underscores (at most 64), so that expressions can say steps.<name>", here, st.Name)
		}
		if w.seen[st.Name] {
			return Invalid("%s.name %q: step names must be unique in the whole flow, nested steps included", here, st.Name)
		}
		w.seen[st.Name] = true
		if err := w.step(st, here, depth, inLoop); err != nil {
			return err
		}
	}
	return nil
}

// step checks one step: the fields of every step, its type's, then the
// steps nested in it.
func (w *walk) step(st *Step, at string, depth int, inLoop bool) error {
	if err := w.own(st, at); err != nil {
		return Named(st, err)
	}
	r := registry[st.Type]
	if r.Parks != nil && inLoop {
		if why, _ := r.Parks(st); why != "" {
			return Named(st, Invalid("%s: %s", at, why))
		}
	}
	switch st.Type {
	case StepSwitch:
		for j, c := range st.Cases {
			if err := w.steps(c.Steps, fmt.Sprintf("%s.cases[%d].steps", at, j), depth+1, inLoop); err != nil {
				return err
			}
		}
		return w.steps(st.Default, at+".default", depth+1, inLoop)
	case StepForEach:
		return w.steps(st.Steps, at+".steps", depth+1, true)
	case StepApproval, StepWait:
		return w.steps(st.Notify, at+".notify", depth+1, inLoop)
	}
	return nil
}

// own checks a step's own fields: when, the type and its fields, retry,
// then the type's rules between the Before and After hooks.
func (w *walk) own(st *Step, at string) error {
	if st.When != "" {
		if err := w.v.Checks.Expression(st.When); err != nil {
			return Invalid("%s.when: %v", at, err)
		}
	}
	if err := OnlyFields(st, at); err != nil {
		return err
	}
	if st.Retry != nil {
		if st.Retry.Attempts < 1 || st.Retry.Attempts > MaxStepAttempts {
			return Invalid(`%s.retry.attempts %d: use 1 to %d, e.g. {"attempts": 3, "backoff": "2s", "maxBackoff": "1m"}`, at, st.Retry.Attempts, MaxStepAttempts)
		}
		if _, _, err := st.Retry.Delays(); err != nil {
			return Invalid("%s.retry.%v", at, err)
		}
	}
	if w.v.Before != nil {
		if err := w.v.Before(st, at); err != nil {
			return err
		}
	}
	if r := registry[st.Type]; r.Check != nil {
		if err := r.Check(w.v.Checks, st, at); err != nil {
			return err
		}
	}
	if w.v.After != nil {
		return w.v.After(st, at)
	}
	return nil
}

// Named adds the name of step st to a message about its own fields.
func Named(st *Step, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return Invalid("%s (step %q)", e.Message, st.Name)
	}
	return err
}
