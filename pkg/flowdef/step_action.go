package flowdef

import (
	"regexp"
	"strings"
)

func init() {
	register(Rules{
		Type: StepAction,
		Fields: []string{"action", "connection", "connectionId", "input", "timeoutMs", "continueOnFail",
			"idempotencyKey", "retry"},
		SideEffects: true,
		Check:       checkAction,
	})
}

// actionKeyRE is an action's key: the app's key, a dot, the action's.
var actionKeyRE = regexp.MustCompile(`^[a-z][a-z0-9_]{0,39}\.[a-z][a-z0-9_]{0,63}$`)

// checkAction checks an ACTION step's own fields. Whether the action
// exists, and its input against the action's schema, is the domain's to
// check (it holds the catalog): ValidateActionInput below does the latter.
func checkAction(c Checks, st *Step, at string) error {
	if strings.TrimSpace(st.Action) == "" {
		return Invalid(`%s.action is required for ACTION: a catalog action's key, e.g. "slack.post_message" (GET /api/v1/apps lists them)`, at)
	}
	if !actionKeyRE.MatchString(st.Action) {
		return Invalid(`%s.action %q: an action key is <app>.<action>, e.g. "slack.post_message"`, at, clip(st.Action))
	}
	if len(st.Input) == 0 {
		st.Input = []byte("{}")
	}
	if !IsJSONObject(st.Input) {
		return Invalid(`%s.input must be an object of the action's fields, e.g. {"channel": "#general", "text": "{{ trigger.body.message }}"}`, at)
	}
	if err := CheckTemplates(c, at+".input", st.Input); err != nil {
		return err
	}
	if st.TimeoutMs < 0 || st.TimeoutMs > MaxStepTimeoutMs {
		return Invalid("%s.timeoutMs %d: use 1 to %d (0 takes the default)", at, st.TimeoutMs, MaxStepTimeoutMs)
	}
	if st.Connection != "" && st.ConnectionID != "" {
		return Invalid("%s: connection and connectionId both name a connection; keep one", at)
	}
	if st.Connection != "" {
		return CheckText(at+".connection", st.Connection, 200)
	}
	return nil
}

// ValidateActionInput checks an ACTION step's input against its action's
// input schema, at save: a field that is a template passes (its value is
// known when the step runs, and checked then).
func ValidateActionInput(schema *JSONSchema, st *Step, at string) error {
	v, err := DecodeJSON(st.Input)
	if err != nil {
		return Invalid("%s.input is not valid JSON", at)
	}
	return schema.Validate(v, at+".input", true)
}
