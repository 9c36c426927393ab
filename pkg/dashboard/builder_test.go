package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// TestFormsCoverEveryType: every step and trigger type has a form, every
// field is of a kind the script edits, and a step as the palette adds it
// is one the Service saves, in a flow of either engine.
func TestFormsCoverEveryType(t *testing.T) {
	kinds := []string{kindText, kindNumber, kindBool, kindSelect, kindExpression, kindTemplate, kindBody, kindJSON,
		kindKeyValue, kindList, kindCases, kindSteps, kindConnection, kindFlow, kindJSONText,
		kindConnName, kindAppAction, kindChecks, kindFormBuild, kindValues, kindTools, kindDecimal, kindMode}
	groups := map[string]bool{}
	for _, g := range paletteGroups {
		groups[g.ID] = true
	}
	for _, st := range automation.StepTypes {
		i := slices.IndexFunc(stepForms, func(f formSpec) bool { return f.Type == string(st) })
		if i < 0 {
			t.Errorf("step type %s has no form in stepForms", st)
			continue
		}
		if !groups[stepForms[i].Group] || stepForms[i].Name == "" {
			t.Errorf("step form %s: group %q, name %q", st, stepForms[i].Group, stepForms[i].Name)
		}
	}
	for _, tt := range []automation.TriggerType{automation.TriggerWebhook, automation.TriggerSchedule, automation.TriggerPoll} {
		if !slices.ContainsFunc(triggerForms, func(f formSpec) bool { return f.Type == string(tt) }) {
			t.Errorf("trigger type %s has no form", tt)
		}
	}
	for _, f := range append(slices.Clone(stepForms), triggerForms...) {
		for _, fl := range f.Fields {
			if !slices.Contains(kinds, fl.Kind) || fl.Label == "" {
				t.Errorf("%s.%s: kind %q, label %q", f.Type, fl.Key, fl.Kind, fl.Label)
			}
		}
	}
	var back struct {
		Steps []formSpec `json:"steps"`
	}
	if err := json.Unmarshal([]byte(formsJSON()), &back); err != nil || len(back.Steps) != len(stepForms) {
		t.Fatalf("formsJSON: %v, %d steps", err, len(back.Steps))
	}

	e := newEnv(t)
	ctx := context.Background()
	target := e.flow(t, e.p, "target") // for CALL_FLOW
	for _, sp := range stepForms {
		if sp.Hidden {
			continue // not in the palette: the flow language lacks the type
		}
		step := map[string]any{"name": sp.Name, "type": sp.Type}
		for k, v := range sp.New {
			step[k] = v
		}
		if sp.Type == string(automation.StepCallFlow) {
			step["flowId"] = target.ID
		}
		// What the user must fill before saving: the URL, the signing
		// secret, the loop's steps (added in its frame in the picture).
		switch automation.StepType(sp.Type) {
		case automation.StepHTTP:
			step["url"] = "https://api.example.com/"
		case automation.StepVerifySignature:
			step["signature"] = map[string]any{"preset": "GITHUB", "secret": "s3cret-value"}
		case automation.StepForEach:
			step["steps"] = []any{map[string]any{"name": "inner", "type": "SET", "values": map[string]any{"i": "{{ item }}"}}}
		}
		raw, _ := json.Marshal(map[string]any{"name": "new " + sp.Type, "engine": "FLOW_BUILDER", "trigger": map[string]any{"type": "WEBHOOK"}, "steps": []any{step}})
		in, err := decodeDefinition(string(raw))
		if err == nil {
			_, err = e.svc.CreateFlow(ctx, e.p, in)
		}
		if err != nil {
			t.Errorf("a new %s step as the palette adds it is refused: %v\n%s", sp.Type, err, raw)
		}
	}
}

// TestNewFlowStartsAndGallery: each start of "New flow" is a definition the
// Service saves (the webhook with a reply on the workflow builder, answering
// on completion), and each of the gallery's flows is created in one POST
// that opens it in the editor.
func TestNewFlowStartsAndGallery(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	if len(gallery) < 10 {
		t.Fatalf("the gallery has %d flows, want at least 10", len(gallery))
	}
	p := b.get("/ui/flows/new")
	wantPage(t, p, http.StatusOK, "What starts it?", "Webhook with a reply", `data-forms=`, "static/builder.js", `id="advanced"`)
	for _, g := range gallery {
		if !strings.Contains(p.body, `action="/ui/templates/`+g.ID+`"`) {
			t.Errorf("the new flow page does not offer template %s", g.ID)
		}
	}
	for _, st := range flowStarts {
		p := b.get("/ui/flows/new?start=" + st.ID)
		m := regexp.MustCompile(`(?s)<textarea id="definition"[^>]*>(.*?)</textarea>`).FindStringSubmatch(p.body)
		if m == nil {
			t.Fatalf("start %s: no definition", st.ID)
		}
		def := htmlUnescape(m[1])
		if st.ID == "webhook-reply" && (!strings.Contains(def, `"WORKFLOW_BUILDER"`) || !strings.Contains(def, `"ON_COMPLETION"`) || !strings.Contains(def, `"RESPOND"`)) {
			t.Errorf("the webhook with a reply does not reply:\n%s", def)
		}
		created := b.post("/ui/flows/new?start="+st.ID, "/ui/flows", url.Values{"definition": {def}})
		if created.status != http.StatusSeeOther {
			t.Errorf("start %s is not saved: %d %s", st.ID, created.status, created.body)
		}
	}
	if p := b.get("/ui/flows/new?start=nope"); p.status != http.StatusBadRequest || !strings.Contains(p.body, "webhook-reply") {
		t.Errorf("an unknown start = %d", p.status)
	}
	for _, g := range gallery {
		p := b.post("/ui/flows/new", "/ui/templates/"+g.ID, nil)
		if p.status != http.StatusSeeOther || !regexp.MustCompile(`^/ui/flows/flw_[A-Za-z0-9_-]+/edit`).MatchString(p.header.Get("Location")) {
			t.Errorf("template %s: %d %q %s", g.ID, p.status, p.header.Get("Location"), p.body)
		}
	}
	// The same template twice: its webhook path is made unique.
	if p := b.post("/ui/flows/new", "/ui/templates/http-relay", nil); p.status != http.StatusSeeOther {
		t.Errorf("a template created twice: %d %s", p.status, p.body)
	}
	if p := b.post("/ui/flows/new", "/ui/templates/nope", nil); p.status != http.StatusNotFound {
		t.Errorf("an unknown template = %d", p.status)
	}
}

// TestStepTest tries one step alone through the Service: an HTTP step
// reaching a loopback server, a step reading an earlier step's output
// given by the editor, one reading the flow's last run; a STORE step and
// bad input are refused with a message, and no run is recorded.
func TestStepTest(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"greeting": "hello ` + r.URL.Query().Get("who") + `"}`))
	}))
	t.Cleanup(api.Close)
	f := e.flow(t, e.p, "tested")
	try := func(form url.Values) (int, map[string]any) {
		t.Helper()
		p := b.post("/ui/flows/"+f.ID+"/edit", "/ui/step-test", form)
		var out map[string]any
		if err := json.Unmarshal([]byte(p.body), &out); err != nil {
			t.Fatalf("step test answer is not JSON: %d %s", p.status, p.body)
		}
		return p.status, out
	}
	status, out := try(url.Values{"flowId": {f.ID}, "step": {`{"name": "call", "type": "HTTP", "method": "GET", "url": "` + api.URL + `/x", "query": {"who": "{{ steps.pick.who }}"}}`},
		"outputs": {`{"pick": {"who": "ada"}}`}})
	if status != http.StatusOK || out["status"] != "SUCCEEDED" {
		t.Fatalf("HTTP step test = %d %v", status, out)
	}
	if body, _ := out["output"].(map[string]any)["body"].(map[string]any); body["greeting"] != "hello ada" {
		t.Errorf("the HTTP step's output = %v", out["output"])
	}
	status, out = try(url.Values{"step": {`{"name": "r", "type": "RESPOND", "body": "{{ steps.call.body.greeting }}!"}`},
		"outputs": {`{"call": {"body": {"greeting": "hi"}}}`}})
	if status != http.StatusOK || !strings.Contains(mustJSON(out["output"]), "hi!") {
		t.Errorf("RESPOND step test = %d %v", status, out)
	}
	status, out = try(url.Values{"step": {`{"name": "s", "type": "SET", "values": {"x": "{{ trigger.body.n }}"}}`}, "trigger": {`{"n": 7}`}})
	if status != http.StatusOK || !strings.Contains(mustJSON(out["output"]), `"x":"7"`) && !strings.Contains(mustJSON(out["output"]), `"x":7`) {
		t.Errorf("SET step test with a trigger body = %d %v", status, out)
	}
	for name, form := range map[string]url.Values{
		"STORE":        {"step": {`{"name": "st", "type": "STORE", "set": {"a": "1"}}`}},
		"not JSON":     {"step": {`{"name": `}},
		"invalid step": {"step": {`{"name": "h", "type": "HTTP"}`}},
		"bad outputs":  {"step": {`{"name": "s", "type": "SET", "values": {}}`}, "outputs": {"[1]"}},
	} {
		if status, out := try(form); status != http.StatusBadRequest || out["message"] == "" {
			t.Errorf("%s: %d %v, want a 400 with a message", name, status, out)
		}
	}
	if l, err := e.svc.ListRuns(context.Background(), e.p, f.ID, automation.PageRequest{}); err != nil || len(l.Data) != 0 {
		t.Errorf("step tests recorded runs: %v %v", l.Data, err)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func htmlUnescape(s string) string {
	return strings.NewReplacer("&#34;", `"`, "&quot;", `"`, "&lt;", "<", "&gt;", ">", "&#39;", "'", "&amp;", "&").Replace(s)
}
