package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// The variables page lists plain values, never a secret one, sets and
// deletes variables, and keeps a refused form's name but not its value.
func TestVariablesPage(t *testing.T) {
	const secret = "var-secret-77aa"
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")

	wantPage(t, b.get("/ui/variables"), http.StatusOK, "No variables yet", `href="/ui/variables" aria-current="page"`)
	wantRedirect(t, b.post("/ui/variables", "/ui/variables", url.Values{"name": {"BASE_URL"}, "value": {"https://api.example.com"}}),
		"/ui/variables?done=saved")
	wantRedirect(t, b.post("/ui/variables", "/ui/variables", url.Values{"name": {"API_TOKEN"}, "value": {secret}, "secret": {"on"}}),
		"/ui/variables?done=saved")
	p := b.get("/ui/variables?done=saved")
	wantPage(t, p, http.StatusOK, "Variable saved", "BASE_URL", "https://api.example.com", "API_TOKEN", "secret")
	if strings.Contains(p.body, secret) {
		t.Fatal("the variables page renders a secret value")
	}
	rv, err := e.svc.LoadRunVariables(context.Background(), e.p.ID)
	if err != nil || rv.Values["API_TOKEN"] != secret || rv.Values["BASE_URL"] != "https://api.example.com" {
		t.Fatalf("stored variables %+v, %v", rv.Values, err)
	}

	// A bad name: 400 with the Service's message, the name kept, the value not.
	p = b.post("/ui/variables", "/ui/variables", url.Values{"name": {"9lives"}, "value": {secret}, "secret": {"on"}})
	wantPage(t, p, http.StatusBadRequest, "must match", `value="9lives"`)
	if strings.Contains(p.body, secret) {
		t.Error("the refused form renders the secret value")
	}

	wantRedirect(t, b.post("/ui/variables", "/ui/variables/API_TOKEN/delete", nil), "/ui/variables?done=deleted")
	if _, err := e.svc.Variable(context.Background(), e.p, "API_TOKEN"); !automation.IsNotFound(err) {
		t.Errorf("variable after delete: %v, want not found", err)
	}
	// Without the CSRF token nothing is deleted.
	if p := b.do("POST", "/ui/variables/BASE_URL/delete", url.Values{}); p.status == http.StatusSeeOther {
		t.Errorf("delete without CSRF = %d", p.status)
	}
	if _, err := e.svc.Variable(context.Background(), e.p, "BASE_URL"); err != nil {
		t.Errorf("BASE_URL after a delete without CSRF: %v", err)
	}
}

// A flow's page links its export, which downloads the portable document.
func TestFlowExportDownload(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	f := e.flow(t, e.p, "Deploy notes", automation.Step{Name: "s", Type: automation.StepSet, Values: json.RawMessage(`{"a":"1"}`)})
	wantPage(t, b.get("/ui/flows/"+f.ID), http.StatusOK, `href="/ui/flows/`+f.ID+`/export"`)
	p := b.get("/ui/flows/" + f.ID + "/export")
	if p.status != http.StatusOK || !strings.Contains(p.header.Get("Content-Disposition"), `filename="Deploy notes.flow.json"`) {
		t.Fatalf("export = %d %v", p.status, p.header)
	}
	var doc automation.FlowDocument
	if err := json.Unmarshal([]byte(p.body), &doc); err != nil || doc.APIVersion != "v1" || doc.Kind != "Flow" || doc.Name != "Deploy notes" || len(doc.Definition.Steps) != 1 {
		t.Errorf("downloaded %s (%v)", p.body, err)
	}
	other, _ := e.project(t, "other", automation.PlanTeam)
	g := e.flow(t, other, "Theirs")
	if p := b.get("/ui/flows/" + g.ID + "/export"); p.status != http.StatusNotFound {
		t.Errorf("another project's flow export = %d", p.status)
	}
}
