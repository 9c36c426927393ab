package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// Webhook authentication values and signature secrets that name a variable
// are resolved at each delivery: a changed variable takes effect on the
// next one, a missing variable refuses every delivery, and the run record
// holds neither the value nor the reference's value.
func TestWebhookSecretsFromVariables(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	put := func(name, value string, secret bool) {
		t.Helper()
		body := `{"value":"` + value + `","secret":` + map[bool]string{true: "true", false: "false"}[secret] + `}`
		call(t, h.api, "PUT", "/api/v1/variables/"+name, h.key, body).into(t, http.StatusOK, &automation.Variable{})
	}
	put("HOOK_TOKEN", "tok-one-81f3", true)
	put("SIG_SECRET", "sig-one-a7c2", true)
	header := h.activeFlow(t, h.key, workflowFlow("vars-header", "POST",
		`,"authentication":{"type":"HEADER","name":"X-Webhook-Secret","value":"{{ vars.HOOK_TOKEN }}"}`, ""))
	fb := h.activeFlow(t, h.key, `{"name":"fb","engine":"FLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST",`+
		`"signature":{"header":"X-Signature","prefix":"sha256=","secret":"{{ vars.SIG_SECRET }}"}}}}`)

	// The flow shows the reference masked like any secret.
	if r := call(t, h.api, "GET", "/api/v1/flows/"+header, h.key, ""); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), `"value":"`+automation.SecretMask+`"`) {
		t.Errorf("get flow = %d %s, want the authentication value masked", r.status, r.body)
	}

	deliverHeader := func(token string) result {
		return call(t, h.workflow, "POST", "/webhook/vars-header", "", `{"n":1}`, "X-Webhook-Secret: "+token)
	}
	deliverSigned := func(secret string) result {
		body := `{"n":2}`
		return call(t, h.engine, "POST", "/api/v1/webhooks/"+fb, "", body, "X-Signature: sha256="+hmacHex(secret, body))
	}

	runID := deliverHeader("tok-one-81f3").started(t)
	deliverSigned("sig-one-a7c2").started(t)
	drain(t, h.svc, h.runs)
	if raw := h.runJSON(t, header, runID); strings.Contains(raw, "tok-one-81f3") {
		t.Errorf("run record holds the header value: %s", raw)
	}
	deliverHeader("{{ vars.HOOK_TOKEN }}").wantError(t, http.StatusUnauthorized, "UNAUTHORIZED")
	deliverHeader("tok-two").wantError(t, http.StatusUnauthorized, "UNAUTHORIZED")

	// New values: the very next delivery uses them.
	put("HOOK_TOKEN", "tok-two", true)
	put("SIG_SECRET", "sig-two", false)
	deliverHeader("tok-one-81f3").wantError(t, http.StatusUnauthorized, "UNAUTHORIZED")
	deliverHeader("tok-two").started(t)
	deliverSigned("sig-one-a7c2").wantError(t, http.StatusUnauthorized, "INVALID_SIGNATURE")
	deliverSigned("sig-two").started(t)
	drain(t, h.svc, h.runs)

	// Deleted: nothing gets in, an empty value included.
	if r := call(t, h.api, "DELETE", "/api/v1/variables/HOOK_TOKEN", h.key, ""); r.status != http.StatusNoContent {
		t.Fatalf("delete = %d %s", r.status, r.body)
	}
	if r := call(t, h.api, "DELETE", "/api/v1/variables/SIG_SECRET", h.key, ""); r.status != http.StatusNoContent {
		t.Fatalf("delete = %d %s", r.status, r.body)
	}
	deliverHeader("tok-two").wantError(t, http.StatusUnauthorized, "UNAUTHORIZED")
	call(t, h.workflow, "POST", "/webhook/vars-header", "", `{"n":1}`, "X-Webhook-Secret: ").wantError(t, http.StatusUnauthorized, "UNAUTHORIZED")
	deliverSigned("sig-two").wantError(t, http.StatusUnauthorized, "INVALID_SIGNATURE")
	deliverSigned("").wantError(t, http.StatusUnauthorized, "INVALID_SIGNATURE")
}
