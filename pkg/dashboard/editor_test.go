package dashboard

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

var locationFlowRE = regexp.MustCompile(`^/ui/flows/(flw_[A-Za-z0-9_-]+)\?done=flowcreated$`)

func TestCreateEditDeleteFlow(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")

	// The editor starts from a valid template, with the API document's help.
	p := b.get("/ui/flows/new")
	wantPage(t, p, http.StatusOK, `name="definition"`, "FLOW_BUILDER", "<dt>steps[].type</dt>",
		"One of: <code>HTTP</code>", "trigger.webhook.responseMode")

	tests := []struct {
		name, definition, wantField, wantText string
	}{
		{"cut short", `{"name": "x",`, "", "not valid JSON: it ends before"},
		{"bad JSON", "{\n\"name\": x}", "", "not valid JSON at line 2, column 9"},
		{"unknown field", `{"name": "x", "engine": "FLOW_BUILDER", "stepz": []}`, "stepz", `unknown field: check its spelling`},
		{"unknown step type", `{"name": "x", "engine": "FLOW_BUILDER", "steps": [{"name": "a", "type": "TELEPORT"}]}`, "steps[0].type", "HTTP"},
		{"wrong type", `{"name": 7, "engine": "FLOW_BUILDER"}`, "name", "want a JSON string"},
		{"no engine", `{"name": "x"}`, "engine", "is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := b.post("/ui/flows/new", "/ui/flows", url.Values{"definition": {tt.definition}})
			wantPage(t, p, http.StatusBadRequest, `id="definition-error"`, html.EscapeString(tt.wantText))
			if tt.wantField != "" && !strings.Contains(p.body, "<strong>"+tt.wantField+"</strong>") {
				t.Errorf("the message does not name the field %s: %s", tt.wantField, p.body)
			}
			// What the user typed stays in the editor.
			if !strings.Contains(p.body, html.EscapeString(tt.definition)) {
				t.Errorf("the editor lost the definition")
			}
		})
	}

	def := `{"name": "Deploy notifier", "engine": "WORKFLOW_BUILDER",
	  "trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "deploys",
	    "authentication": {"type": "HEADER", "name": "X-Secret", "value": "hunter2-webhook-secret"}}},
	  "steps": [{"name": "pick", "type": "SET", "values": {"ref": "{{ trigger.body.ref }}"}}]}`
	p = b.post("/ui/flows/new", "/ui/flows", url.Values{"definition": {def}})
	m := locationFlowRE.FindStringSubmatch(p.header.Get("Location"))
	if p.status != http.StatusSeeOther || m == nil {
		t.Fatalf("create = %d %q: %s", p.status, p.header.Get("Location"), p.body)
	}
	id := m[1]
	path := "/ui/flows/" + id
	page := b.get(path + "?done=flowcreated")
	wantPage(t, page, http.StatusOK, "Flow created", "INACTIVE", "Edit definition", "Delete…", "pick",
		html.EscapeString(`"ref": "{{ trigger.body.ref }}"`), "none yet")
	if strings.Contains(page.body, "0.0%") || strings.Contains(page.body, "hunter2") {
		t.Errorf("the page of a flow that never ran shows 0.0%% or a secret: %s", page.body)
	}
	if list := b.get("/ui/flows"); strings.Contains(list.body, "0.0%") || !strings.Contains(list.body, "—") {
		t.Errorf("the flows list shows 0.0%% for a flow that never ran")
	}

	// Edit: the secret is masked in the editor and kept when the mask is sent back.
	edit := b.get(path + "/edit")
	wantPage(t, edit, http.StatusOK, "Deploy notifier", automation.SecretMask)
	if strings.Contains(edit.body, "hunter2") {
		t.Fatal("the editor shows a stored secret")
	}
	text := html.UnescapeString(regexp.MustCompile(`(?s)<textarea id="definition"[^>]*>(.*?)</textarea>`).FindStringSubmatch(edit.body)[1])
	text = strings.Replace(text, "Deploy notifier", "Deploy announcer", 1)
	wantRedirect(t, b.post(path+"/edit", path+"/edit", url.Values{"definition": {text}}), path+"?done=draftsaved")
	f, err := e.svc.Flow(ctx, e.p, id)
	if err != nil || f.Name != "Deploy announcer" || !f.HasDraft {
		t.Fatalf("after saving: %+v, %v", f, err)
	}
	if _, err := e.svc.Publish(ctx, e.p, id, automation.PublishRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.EnableFlow(ctx, e.p, id); err != nil {
		t.Fatal(err)
	}
	wf, err := e.svc.RouteFlow(ctx, "deploys", "POST") // with its secrets, as the receiver reads it
	if err != nil {
		t.Fatal(err)
	}
	if got := wf.Trigger.Webhook.Authentication.Value.Reveal(); got != "hunter2-webhook-secret" {
		t.Errorf("the stored secret after saving the masked definition = %q", got)
	}
	// A change the Service refuses is shown next to the field it names.
	bad := strings.Replace(text, `"SET"`, `"SEND"`, 1)
	wantPage(t, b.post(path+"/edit", path+"/edit", url.Values{"definition": {bad}}), http.StatusBadRequest,
		"<strong>steps[0].type</strong>", `class="field-error">steps[].type</dt>`)
	wantPage(t, b.post(path+"/edit", path+"/edit", url.Values{"definition": {`{"engine": "FLOW_BUILDER"}`}}), http.StatusBadRequest,
		"<strong>engine</strong> cannot be changed")

	// Every form needs the session's CSRF token.
	for _, post := range []string{"/ui/flows", path + "/edit", path + "/delete"} {
		if p := b.do("POST", post, url.Values{"definition": {def}, "csrf": {"forged"}}); p.status != http.StatusForbidden {
			t.Errorf("POST %s with a forged token = %d, want 403", post, p.status)
		}
	}

	// Delete after a confirmation page.
	wantPage(t, b.get(path+"/delete"), http.StatusOK, "Delete “Deploy announcer”?", "run history")
	wantRedirect(t, b.post(path+"/delete", path+"/delete", nil), "/ui/flows?done=flowdeleted")
	if _, err := e.svc.Flow(ctx, e.p, id); !automation.IsNotFound(err) {
		t.Errorf("flow after delete: %v", err)
	}
	wantPage(t, b.get(path), http.StatusNotFound)
}

func TestRetryRunAndStepSettings(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	f := e.flow(t, e.p, "Deploy", automation.Step{Name: "pick", Type: automation.StepSet,
		Values: json.RawMessage(`{"ref":"{{ trigger.body.ref }}"}`)})
	if _, err := e.svc.EnableFlow(ctx, e.p, f.ID); err != nil {
		t.Fatal(err)
	}
	wf, err := e.svc.WebhookFlow(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	run, err := receiveWebhook(ctx, e.svc, wf, automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + f.ID,
		Body: json.RawMessage(`{"ref":"refs/heads/main"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.ExecuteRun(ctx, e.p.ID, run.ID); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	runPath := "/ui/flows/" + f.ID + "/runs/" + run.ID
	wantPage(t, b.get(runPath), http.StatusOK, "Retry from the start")
	p := b.post(runPath, runPath+"/retry", nil)
	loc := p.header.Get("Location")
	if p.status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/flows/"+f.ID+"/runs/run_") || strings.Contains(loc, run.ID) {
		t.Fatalf("retry = %d to %q, want a new run's page", p.status, loc)
	}
	wantPage(t, b.get(loc), http.StatusOK, "Retry started", "refs/heads/main")
	l, err := e.svc.ListRuns(ctx, e.p, f.ID, automation.PageRequest{})
	if err != nil || len(l.Data) != 2 {
		t.Fatalf("runs after retry: %d, %v", len(l.Data), err)
	}
	wantPage(t, b.get("/ui/flows/"+f.ID), http.StatusOK, `<details id="step-1" class="panel">`, `pick <small>SET</small>`, html.EscapeString(`"type": "SET"`))

	// A step's secret shows as the mask in its settings, never itself.
	signed := e.flow(t, e.p, "Signed", automation.Step{Name: "check", Type: automation.StepVerifySignature,
		Signature: &automation.Signature{Header: "X-Sig", Prefix: "sha256=", Secret: "step-secret-never-shown"}})
	page := b.get("/ui/flows/" + signed.ID)
	wantPage(t, page, http.StatusOK, `check <small>VERIFY_SIGNATURE</small>`, html.EscapeString(`"secret": "`+automation.SecretMask+`"`))
	if strings.Contains(page.body, "step-secret-never-shown") {
		t.Error("the flow page shows a step's secret")
	}
}

// TestEditorErrorsSayWhere: the editor's message names a field once, and
// says at which line and column of the definition it is.
func TestEditorErrorsSayWhere(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	tests := []struct {
		name, definition string
		want             []string
	}{
		{"syntax", "{\n  \"name\": \"x\",\n  \"engine\": FLOW_BUILDER\n}",
			[]string{`data-line="3" data-col="13"`, "Line 3, column 13:", "not valid JSON at line 3, column 13"}},
		{"unknown step type", "{\"name\": \"x\", \"engine\": \"FLOW_BUILDER\",\n \"steps\": [\n  {\"name\": \"a\", \"type\": \"TELEPORT\"}]}",
			[]string{`data-line="3" data-col="17"`, "<strong>steps[0].type</strong>"}},
		{"unknown nested field", "{\"name\": \"x\", \"engine\": \"FLOW_BUILDER\", \"steps\": [\n {\"name\": \"r\", \"type\": \"SWITCH\", \"cases\": [\n  {\"when\": \"true\", \"steps\": [{\"name\": \"n\", \"type\": \"HTTP\", \"ulr\": \"https://example.com\"}]}]}]}",
			[]string{`data-line="3" data-col="60"`, "<strong>steps[0].cases[0].steps[0].ulr</strong>: unknown field: check its spelling"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := b.post("/ui/flows/new", "/ui/flows", url.Values{"definition": {tt.definition}})
			wantPage(t, p, http.StatusBadRequest, tt.want...)
			msg := regexp.MustCompile(`(?s)<p class="field-error" id="definition-error".*?</p>`).FindString(p.body)
			text := regexp.MustCompile(`<span class="where">.*?</span> `).ReplaceAllString(msg, "")
			text = strings.TrimSpace(html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(text, "")))
			if f, _ := fieldOf(text); f != "" && strings.Count(text, f) != 1 {
				t.Errorf("the message names its field %s other than once: %s", f, text)
			}
		})
	}
}

func TestLocateField(t *testing.T) {
	text := "{\n  \"steps\": [\n    {\"name\": \"a\"},\n    {\"name\": \"b\", \"url\": 1}\n  ],\n  \"trigger\": {\"webhook\": {\"path\": \"x\"}}\n}"
	for field, want := range map[string][2]int{
		"steps[1].url": {4, 19}, "steps[1]": {4, 5}, "trigger.webhook.path": {6, 27}, "steps": {2, 3},
	} {
		line, col, ok := locateField(text, field)
		if !ok || line != want[0] || col != want[1] {
			t.Errorf("locateField(%s) = %d:%d %v, want %d:%d", field, line, col, ok, want[0], want[1])
		}
	}
	if _, _, ok := locateField(text, "steps[2]"); ok {
		t.Error("found steps[2], which is not there")
	}
	if got := keyPath(text, "path"); got != "trigger.webhook.path" {
		t.Errorf("keyPath(path) = %q", got)
	}
}

// TestEditorShowsOnError: a flow's onError steps are in the editor, and
// saving the text as shown keeps them.
func TestEditorShowsOnError(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	name, eng := "Alerting", automation.FlowBuilder
	steps := []automation.Step{{Name: "a", Type: automation.StepSet, Values: json.RawMessage(`{}`)}}
	onErr := []automation.Step{{Name: "alert", Type: automation.StepSet, Values: json.RawMessage(`{"why":"{{ error.message }}"}`)}}
	f, err := e.svc.CreateFlow(ctx, e.p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps, OnError: &onErr})
	if err != nil {
		t.Fatal(err)
	}
	path := "/ui/flows/" + f.ID
	edit := b.get(path + "/edit")
	wantPage(t, edit, http.StatusOK, html.EscapeString(`"onError": [`), html.EscapeString(`"name": "alert"`))
	text := html.UnescapeString(regexp.MustCompile(`(?s)<textarea id="definition"[^>]*>(.*?)</textarea>`).FindStringSubmatch(edit.body)[1])
	wantRedirect(t, b.post(path+"/edit", path+"/edit", url.Values{"definition": {text}}), path+"?done=draftsaved")
	if got, err := e.svc.Draft(ctx, e.p, f.ID); err != nil || len(got.OnError) != 1 || got.OnError[0].Name != "alert" {
		t.Errorf("onError of the draft saved from the editor's text: %+v, %v", got.OnError, err)
	}
}
