package httpapi

import (
	"strings"
	"testing"
)

// TestCodeThatDoesNotCompileIsRefusedAtSave: a CODE step with a syntax
// error is a 400 naming the step and the line, at create and at update,
// instead of a flow that fails on every webhook.
func TestCodeThatDoesNotCompileIsRefusedAtSave(t *testing.T) {
	h := newHookEnv(t, HookConfig{MaxBody: 1 << 20})
	srv, key := h.api, h.key
	for _, tt := range []struct{ code, want string }{
		{`return {`, "SyntaxError"},
		{`const x = 1;\nreturn x +;`, "Line 2:11"},
		{`let trigger = 1; return trigger`, "SyntaxError"}, // a name the script already has
	} {
		def := `{"name": "js", "engine": "FLOW_BUILDER", "steps": [{"name": "verify", "type": "CODE", "code": "` + tt.code + `"}]}`
		e := call(t, srv, "POST", "/api/v1/flows", key, def).wantError(t, 400, "VALIDATION_ERROR")
		if !strings.Contains(e.Message, "steps[0]") || !strings.Contains(e.Message, ".code") || !strings.Contains(e.Message, tt.want) {
			t.Errorf("code %q: message %q; want the step's code named and %q", tt.code, e.Message, tt.want)
		}
	}
	var f struct{ ID string }
	call(t, srv, "POST", "/api/v1/flows", key, `{"name": "js", "engine": "FLOW_BUILDER", "steps": [{"name": "verify", "type": "CODE", "code": "return 1"}]}`).into(t, 201, &f)
	call(t, srv, "POST", "/api/v1/flows/"+f.ID, key, `{"steps": [{"name": "verify", "type": "CODE", "code": "return (1"}]}`).wantError(t, 400, "VALIDATION_ERROR")
}
