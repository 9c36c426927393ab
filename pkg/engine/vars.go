package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"flowservice/pkg/automation"
)

// usesVars reports whether the flow's steps mention vars at all, so that
// runs of other flows read no variables.
func (x *execution) usesVars() bool {
	return bytes.Contains(x.stepsJSON(), []byte("vars"))
}

// loadVars puts the project's variables in scope as `vars`, read once for
// the attempt when the flow uses them, and keeps the secret values to mask
// them in what the run records.
func (x *execution) loadVars(ctx context.Context) *stepError {
	x.env["vars"] = map[string]any{}
	if x.e.vars == nil || !x.usesVars() {
		return nil
	}
	rv, err := x.e.vars.LoadRunVariables(ctx, x.flow.Project)
	if err != nil {
		x.e.log.WarnContext(ctx, "read variables", "run", x.run.ID, "flow", x.flow.ID, "err", err)
		return &stepError{msg: "the project's variables could not be read; the run will be retried", retryable: true}
	}
	vars := make(map[string]any, len(rv.Values))
	for k, v := range rv.Values {
		vars[k] = v
	}
	x.env["vars"] = vars
	x.sh.varNames = rv.Values
	x.addSecrets(rv.Secrets)
	return nil
}

// addSecrets adds secret values the run's record masks, in every form
// automation.SecretForms names (URL-escaped, base64, JSON-escaped).
func (x *execution) addSecrets(values []string) {
	for _, s := range values {
		if len(s) >= automation.MinMaskedSecret && !slices.Contains(x.sh.secrets, s) {
			x.sh.secrets = append(x.sh.secrets, s)
		}
	}
	x.sh.masks = automation.SecretMasks(x.sh.secrets)
}

// prepare puts what the run reads besides its trigger in scope, once per
// attempt: the flow's state, the connection names and the variables.
// A failure names what could not be read, in place of a step.
func (x *execution) prepare(ctx context.Context) (string, *stepError) {
	// A called run masks what its caller masked, whatever it reads itself.
	x.addSecrets(x.run.Trigger.CallerSecrets())
	if err := x.loadState(ctx); err != nil {
		return "(state)", err
	}
	if err := x.loadConnectionNames(ctx); err != nil {
		return "(connections)", err
	}
	if err := x.loadVars(ctx); err != nil {
		return "(variables)", err
	}
	return "", nil
}

// varRef finds a read of a variable: vars.NAME, vars?.NAME or
// vars["NAME"] (quotes JSON-escaped or not), not preceded by a name or a
// dot (steps.vars.x is a step output's field).
var varRef = regexp.MustCompile(`(?:^|[^A-Za-z0-9_.$])vars\s*(?:\??\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*\\?["'` + "`" + `]([A-Za-z_][A-Za-z0-9_]*)\\?["'` + "`" + `]\s*\])`)

// missingVar returns the first variable that text reads and the project
// does not have, or "".
func (x *execution) missingVar(text string) string {
	if x.sh.varNames == nil && !strings.Contains(text, "vars") {
		return ""
	}
	for _, m := range varRef.FindAllStringSubmatch(text, -1) {
		name := m[1] + m[2]
		if _, ok := x.sh.varNames[name]; !ok {
			return name
		}
	}
	return ""
}

// ownText is the JSON of a step without its nested steps and its `when`:
// what the step itself evaluates when it runs.
func ownText(s automation.Step) string {
	s.When, s.Steps, s.Default = "", nil, nil
	if s.Cases != nil {
		cases := make([]automation.Case, len(s.Cases))
		for i, c := range s.Cases {
			cases[i] = automation.Case{When: c.When}
		}
		s.Cases = cases
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// checkVars fails a step that reads a variable the project does not have,
// naming it, before the step does anything.
func (x *execution) checkVars(text string) *stepError {
	if !usesVarsText(text) {
		return nil
	}
	if name := x.missingVar(text); name != "" {
		return &stepError{msg: "variable " + name + " is not defined in the project (PUT /api/v1/variables/" + name + ")"}
	}
	return nil
}

func usesVarsText(text string) bool { return strings.Contains(text, "vars") }

// checkStepVars is checkVars for what step s evaluates, once per step and
// attempt: the variables do not change within an attempt, and a step
// inside FOR_EACH runs once per item.
func (x *execution) checkStepVars(s automation.Step) *stepError {
	if x.sh.varNames == nil {
		return nil
	}
	if missing, ok := x.sh.varChecks.Load(s.Name); ok {
		if msg := missing.(string); msg != "" {
			return &stepError{msg: msg}
		}
		return nil
	}
	se := x.checkVars(ownText(s))
	msg := ""
	if se != nil {
		msg = se.msg
	}
	x.sh.varChecks.Store(s.Name, msg)
	return se
}

// mask replaces the run's secret values in s, in every form
// automation.SecretForms names.
func (x *execution) mask(s string) string {
	return automation.MaskText(s, x.sh.masks)
}

func (x *execution) maskAll(lines []string) []string {
	if len(x.sh.secrets) == 0 || len(lines) == 0 {
		return lines
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = x.mask(l)
	}
	return out
}

// maskJSON replaces the run's secret values inside the strings (keys
// included) of a recorded output, keeping it valid JSON.
func (x *execution) maskJSON(raw json.RawMessage) json.RawMessage {
	return automation.MaskJSON(raw, x.sh.masks)
}
