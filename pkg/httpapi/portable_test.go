package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// A flow's export names its connections, masks secrets typed inline and
// keeps variable references; importing it elsewhere needs the masked
// secrets replaced, creates an INACTIVE flow, and that flow exports the
// same document.
func TestExportImport(t *testing.T) {
	srv, key := newTestServer(t)
	var c automation.Connection
	call(t, srv, "POST", "/api/v1/connections", key, connectionBody("Slack")).into(t, http.StatusCreated, &c)
	f := createFlow(t, srv, key, `{"name":"Deploys","description":"tell the team","engine":"WORKFLOW_BUILDER",
		"trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST","path":"deploys",
			"authentication":{"type":"HEADER","name":"X-Token","value":"inline-s3cret-1"},
			"signature":{"header":"X-Sig","prefix":"sha256=","secret":"{{ vars.SIG_SECRET }}"}}},
		"steps":[{"name":"notify","type":"HTTP","connectionId":"`+c.ID+`","method":"POST","url":"https://hooks.example.com/{{ vars.CHANNEL }}"},
			{"name":"check","type":"VERIFY_SIGNATURE","signature":{"preset":"GITHUB","secret":"{{ vars.GH_SECRET }}"}}],
		"onError":[{"name":"alert","type":"SET","values":{"x":"1"}}]}`)

	r := call(t, srv, "GET", "/api/v1/flows/"+f.ID+"/export", key, "")
	if r.status != http.StatusOK {
		t.Fatalf("export = %d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), "inline-s3cret-1") || strings.Contains(string(r.body), c.ID) || strings.Contains(string(r.body), f.ID) {
		t.Errorf("export holds a secret or an installation's ID: %s", r.body)
	}
	var doc struct {
		APIVersion, Kind, Name, Description, Engine string
		Definition                                  struct {
			Trigger struct {
				Webhook struct {
					Authentication struct{ Value string }
					Signature      struct{ Secret string }
				}
			}
			Steps []struct {
				Name, Connection, ConnectionID string
				Signature                      *struct{ Secret string }
			}
			OnError []struct{ Name string }
		}
	}
	if err := json.Unmarshal(r.body, &doc); err != nil {
		t.Fatal(err)
	}
	d := doc.Definition
	if doc.APIVersion != "v1" || doc.Kind != "Flow" || doc.Name != "Deploys" || doc.Description != "tell the team" || doc.Engine != "WORKFLOW_BUILDER" ||
		d.Trigger.Webhook.Authentication.Value != automation.SecretMask || d.Trigger.Webhook.Signature.Secret != "{{ vars.SIG_SECRET }}" ||
		len(d.Steps) != 2 || d.Steps[0].Connection != "Slack" || d.Steps[0].ConnectionID != "" ||
		d.Steps[1].Signature == nil || d.Steps[1].Signature.Secret != "{{ vars.GH_SECRET }}" || len(d.OnError) != 1 {
		t.Fatalf("export = %s", r.body)
	}

	// Into another project: the masked secret has no stored value there.
	other := newProjectKey(t, srv, automation.PlanTeam)
	e := call(t, srv, "POST", "/api/v1/flows/import", other, string(r.body)).wantError(t, http.StatusBadRequest, "VALIDATION_ERROR")
	if !strings.Contains(e.Message, "definition.trigger.authentication.value") {
		t.Errorf("message %q does not name the field", e.Message)
	}
	// With the secret as a variable reference, it imports; the path is
	// held by the first project's flow, so the copy takes another.
	body := strings.Replace(string(r.body), `"value":"`+automation.SecretMask+`"`, `"value":"{{ vars.HOOK_TOKEN }}"`, 1)
	body = strings.Replace(body, `"path":"deploys"`, `"path":"deploys-copy"`, 1)
	var g flowView
	call(t, srv, "POST", "/api/v1/flows/import", other, body).into(t, http.StatusCreated, &g)
	if g.Status != "INACTIVE" || g.Name != "Deploys" || g.ID == f.ID {
		t.Errorf("imported = %+v", g)
	}
	again := call(t, srv, "GET", "/api/v1/flows/"+g.ID+"/export", other, "")
	if again.status != http.StatusOK || !sameJSON(t, again.body, []byte(body)) {
		t.Errorf("export of the import = %s\nwant %s", again.body, body)
	}

	for _, tt := range []struct{ name, body, want string }{
		{"api version", strings.Replace(body, `"apiVersion":"v1"`, `"apiVersion":"v2"`, 1), "apiVersion"},
		{"kind", strings.Replace(body, `"kind":"Flow"`, `"kind":"Connection"`, 1), "kind"},
		{"unknown field", strings.Replace(body, `"kind":"Flow"`, `"kind":"Flow","extra":1`, 1), "extra"},
		{"bad step", strings.Replace(body, `"type":"SET"`, `"type":"SETT"`, 1), "definition.onError[0]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := call(t, srv, "POST", "/api/v1/flows/import", other, tt.body).wantError(t, http.StatusBadRequest, "")
			if !strings.Contains(e.Message, tt.want) {
				t.Errorf("message %q, want it to name %q", e.Message, tt.want)
			}
		})
	}
	call(t, srv, "GET", "/api/v1/flows/flw_missing/export", key, "").wantError(t, http.StatusNotFound, "FLOW_NOT_FOUND")
	call(t, srv, "GET", "/api/v1/flows/"+f.ID+"/export", other, "").wantError(t, http.StatusNotFound, "FLOW_NOT_FOUND")
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
