package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// TestEditorAssist: the editor gets the flow schema of the API document,
// and offers the captured sample's fields and the last run's outputs as
// expressions to insert.
func TestEditorAssist(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")

	p := b.get("/ui/flow-schema.json")
	var schema struct {
		Root    string                     `json:"root"`
		Schemas map[string]json.RawMessage `json:"schemas"`
	}
	if p.status != http.StatusOK || json.Unmarshal([]byte(p.body), &schema) != nil || schema.Root != "FlowCreate" ||
		schema.Schemas["Step"] == nil || schema.Schemas["FlowUpdate"] == nil {
		t.Fatalf("GET /ui/flow-schema.json = %d %.200s", p.status, p.body)
	}

	f := e.flow(t, e.p, "Deploy", automation.Step{Name: "pick", Type: automation.StepSet,
		Values: json.RawMessage(`{"ref":"{{ trigger.body.ref }}","n":1}`)})
	if _, err := e.svc.ArmWebhookTest(ctx, e.p, f.ID); err != nil {
		t.Fatal(err)
	}
	wf, err := e.svc.WebhookFlow(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	run, err := receiveWebhook(ctx, e.svc, wf, automation.TriggerData{Method: "POST",
		Body: json.RawMessage(`{"ref":"refs/heads/main","repo":{"name":"site"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.ExecuteRun(ctx, e.p.ID, run.ID); err != nil {
		t.Fatal(err)
	}
	wantPage(t, b.get("/ui/flows/"+f.ID+"/edit"), http.StatusOK, `data-schema-root="FlowUpdate"`, "Insert a field",
		`data-insert="{{ trigger.body.ref }}"`, `data-insert="{{ trigger.body.repo.name }}"`, `data-insert="{{ steps.pick.ref }}"`,
		`data-insert="{{ steps.pick.n }}"`)
	// The project's connections are offered for connectionId.
	if _, err := e.svc.CreateConnection(ctx, e.p, automation.ConnectionInput{Name: "Chat bot", App: "chat",
		Type: automation.ConnectionAPIKey, Value: json.RawMessage(`{"apiKey":"k-never-shown"}`)}); err != nil {
		t.Fatal(err)
	}
	page := b.get("/ui/flows/" + f.ID + "/edit")
	wantPage(t, page, http.StatusOK, `<datalist id="connection-ids">`, `label="Chat bot (chat)"`)
	if strings.Contains(page.body, "k-never-shown") {
		t.Error("the editor shows a connection's key")
	}
	// The project's flows are offered for a CALL_FLOW step's flowId, with
	// the API document's help for its fields.
	wantPage(t, page, http.StatusOK, `<datalist id="flow-ids">`, `<option value="`+f.ID+`"`,
		"<dt>steps[].flowId</dt>", "<dt>steps[].wait</dt>", "<code>CALL_FLOW</code>")
	// A new flow has neither: no section to insert from.
	if p := b.get("/ui/flows/new"); p.status != http.StatusOK || strings.Contains(p.body, "Insert a field") {
		t.Errorf("the new flow editor offers expressions: %d", p.status)
	}
}
