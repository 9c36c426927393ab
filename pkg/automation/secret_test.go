package automation

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestSecretForms: a secret is masked as itself, URL-escaped (query and
// path), base64 (standard and URL, padded or not) and inside JSON strings
// (HTML characters escaped or not); a value too short to mask has none.
func TestSecretForms(t *testing.T) {
	const v = "s3cr3t tok/en+&=?ä"
	forms := SecretForms(v)
	for _, want := range []string{v, url.QueryEscape(v), url.PathEscape(v),
		base64.StdEncoding.EncodeToString([]byte(v)), base64.URLEncoding.EncodeToString([]byte(v)),
		base64.RawStdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)),
		`s3cr3t tok/en+\u0026=?ä`} {
		if !slices.Contains(forms, want) {
			t.Errorf("SecretForms(%q) lacks %q: %q", v, want, forms)
		}
	}
	for i := 1; i < len(forms); i++ {
		if len(forms[i]) > len(forms[i-1]) {
			t.Fatalf("forms not longest first: %q", forms)
		}
	}
	if f := SecretForms("abc"); f != nil {
		t.Errorf("a 3-character value has forms %q, want none", f)
	}
	text := "q=" + url.QueryEscape(v) + " p=" + url.PathEscape(v) + " b=" + base64.StdEncoding.EncodeToString([]byte(v)) + " raw=" + v
	if got := MaskText(text, SecretMasks([]string{v})); got != "q=******** p=******** b=******** raw=********" {
		t.Errorf("MaskText = %q", got)
	}
}

// TestPublicMasksCallerSecrets: a called run's record shows the secrets
// its caller gave it masked, in its trigger's body and raw body, and never
// the list of them; the stored run keeps the body the child executes with.
func TestPublicMasksCallerSecrets(t *testing.T) {
	const sec = "tok&en-4711"
	r := Run{ID: "run_1", Trigger: TriggerData{
		Body:    json.RawMessage(`{"token":"tok\u0026en-4711","b64":"` + base64.StdEncoding.EncodeToString([]byte(sec)) + `","note":"plain"}`),
		RawBody: `token=` + url.QueryEscape(sec),
		Caller:  &Caller{RunID: "run_0", FlowID: "flw_0", Wait: true, Secrets: []string{sec}},
	}}
	p := r.Public()
	if string(p.Trigger.Body) != `{"b64":"********","note":"plain","token":"********"}` || p.Trigger.RawBody != "token=********" {
		t.Errorf("public trigger = %s / %q, want the secret masked in both", p.Trigger.Body, p.Trigger.RawBody)
	}
	b, _ := json.Marshal(p)
	if strings.Contains(string(b), "4711") || strings.Contains(string(b), "secrets") {
		t.Errorf("the public run shows a secret or the list: %s", b)
	}
	s, _ := json.Marshal(r.Summary())
	if strings.Contains(string(s), "4711") {
		t.Errorf("the summary shows a secret: %s", s)
	}
	if !strings.Contains(string(r.Trigger.Body), `tok\u0026en-4711`) || len(r.Trigger.Caller.Secrets) != 1 {
		t.Errorf("Public changed the stored run: %s", r.Trigger.Body)
	}
}
