package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/chromedp/chromedp"
)

// setField sets the element at css (in the editor's panel) as a user
// does: its value, then its input and change events.
func setField(css, value string) string {
	return fmt.Sprintf(`(() => {
  const f = document.querySelector(%q);
  if (!f) throw new Error("no element " + %q);
  f.value = %q;
  f.dispatchEvent(new Event("input", {bubbles: true}));
  f.dispatchEvent(new Event("change", {bubbles: true}));
})()`, css, css, value)
}

// clickField clicks the element at css (a checkbox, a button) with script:
// a form far down a phone's panel need not be scrolled to first.
func clickField(css string) string {
	return fmt.Sprintf(`(() => {
  const f = document.querySelector(%q);
  if (!f) throw new Error("no element " + %q);
  f.click();
})()`, css, css)
}

// TestNewStepFormsRoundTrip: the forms of ACTION (app, action, connection
// of the app and one input per property of the action's schema), APPROVAL
// (roles as checkboxes, the form builder, a notify step in its frame), SQL
// (connection, query, parameters as a list), EMAIL, AI (tools: a flow of
// the project), WAIT (until, and a callback with a notify step) and MCP
// (connection, tool, arguments as name and template rows) are
// filled in headless chromium at 1440x900, each step added from the
// palette; no JSON is typed but ACTION's array input (its JSON fallback)
// and AI's advanced output schema. The saved draft read through the API
// is exactly what was filled, and the editor opened again at 1440x900 and
// at 390x844 shows every form with the same values.
func TestNewStepFormsRoundTrip(t *testing.T) {
	t.Parallel() // its own flowd, directory and ports, and its own browser
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_WORKERS=1", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	for _, c := range []string{
		`{"name": "gh", "app": "github", "type": "API_KEY", "value": {"apiKey": "ghp_test"}}`,
		`{"name": "db", "app": "postgres", "type": "POSTGRES", "value": {"url": "postgres://u:p@db.example.com:5432/app"}}`,
		`{"name": "mail", "app": "smtp", "type": "SMTP", "value": {"host": "smtp.example.com", "port": 587, "username": "u", "password": "p", "from": "flows@example.com"}}`,
		`{"name": "openai", "app": "openai", "type": "OPENAI", "value": {"apiKey": "sk-test"}}`,
		`{"name": "mcp", "app": "tracker", "type": "MCP", "value": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer t0k"}}}`,
	} {
		api(t, p, key, "POST", "/api/v1/connections", c, 201, nil)
	}
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "Lookup", "engine": "FLOW_BUILDER", "trigger": {"type": "WEBHOOK"},
	  "steps": [{"name": "found", "type": "SET", "values": {"id": "{{ trigger.body.id }}"}}]}`, 201, nil)
	var f struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "New forms", "engine": "FLOW_BUILDER", "trigger": {"type": "WEBHOOK"},
	  "steps": [{"name": "start", "type": "SET", "values": {"a": "1"}}]}`, 201, &f)

	ctx := newBrowser(t)
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browserDo(t, ctx, p, what, actions...)
	}
	js := func(what, script string) { t.Helper(); do(what, chromedp.Evaluate[chromedp.Void](script)) }
	field := func(key, css string) string { return `#builder-panel .bf-field[data-key="` + key + `"] ` + css }
	set := func(key, css, value string) { t.Helper(); js("set "+key, setField(field(key, css), value)) }
	add := func(list string, i int, typ, first string) {
		t.Helper()
		plus := fmt.Sprintf(`button[data-add='[%s,%d]']`, list, i)
		do("add "+typ, chromedp.WaitVisible(chromedp.CSS(plus)), chromedp.Click(chromedp.CSS(plus)),
			chromedp.WaitVisible(chromedp.CSS(`button[data-new-step="`+typ+`"]`)), chromedp.Click(chromedp.CSS(`button[data-new-step="`+typ+`"]`)),
			chromedp.WaitVisible(chromedp.CSS(field(first, ""))))
	}
	forms := func(what string) map[string]map[string][]string {
		t.Helper()
		raw := browserRun(t, ctx, p, what+": read the forms", chromedp.Evaluate[string](readForms))
		var out map[string]map[string][]string
		if err := json.Unmarshal([]byte(raw), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	editor := p.base + "/ui/flows/" + f.ID + "/edit"
	ready := chromedp.WaitVisible(chromedp.CSS(`#builder[data-ready="true"]`))
	do("sign in", chromedp.EmulateViewport(1440, 900), chromedp.Navigate(p.base+"/ui/signin"), chromedp.SendKeys(chromedp.ID("apiKey"), key),
		loads(chromedp.Submit(chromedp.ID("apiKey"))), chromedp.WaitVisible(chromedp.Search(`//h1[text()="Flows"]`)))
	do("open the editor", chromedp.Navigate(editor), ready)

	// ACTION: the app, then its action, the connection and each input.
	add(`["steps"]`, 1, "ACTION", "action")
	set("action", "select.aa-app", "github")
	do("the action list", chromedp.WaitVisible(chromedp.CSS(field("action", `select.aa-action`))))
	set("action", "select.aa-action", "github.create_issue")
	do("the action's inputs", chromedp.WaitVisible(chromedp.CSS(field("action", `[data-input="owner"] input`))))
	set("action", "select.aa-connection", "gh")
	set("action", `[data-input="owner"] input`, "acme")
	set("action", `[data-input="repo"] input`, "web")
	set("action", `[data-input="title"] input`, "{{ trigger.body.alert }}")
	set("action", `[data-input="body"] textarea`, "Seen at {{ trigger.body.at }}")
	set("action", `[data-input="labels"] textarea`, `["ops", "alert"]`)

	// APPROVAL: its fields, two form fields built, a notify step.
	add(`["steps"]`, 2, "APPROVAL", "title")
	set("title", "input", "Refund {{ trigger.body.amount }}?")
	set("approvals", "input", "2")
	js("check admin", clickField(field("approvers.roles", `input[value="admin"]`)))
	js("check operator", clickField(field("approvers.roles", `input[value="operator"]`)))
	set("timeout", "input", "48h")
	js("add a form field", clickField(field("form", ".form-build > button")))
	set("form", ".fb-row:nth-of-type(1) .fb-name", "amount")
	set("form", ".fb-row:nth-of-type(1) .fb-type", "number")
	js("amount is required", clickField(field("form", ".fb-row:nth-of-type(1) .fb-required")))
	js("add another form field", clickField(field("form", ".form-build > button")))
	set("form", ".fb-row:nth-of-type(2) .fb-name", "tier")
	set("form", ".fb-row:nth-of-type(2) .fb-type", "enum")
	set("form", ".fb-row:nth-of-type(2) .fb-enum", "gold, silver")
	add(`["steps",2,"notify"]`, 0, "HTTP", "url")
	set("url", "input", "https://hooks.example.com/notify")

	// SQL: the connection is the palette's "db"; parameters as a list.
	add(`["steps"]`, 3, "SQL", "query")
	set("query", "textarea", "select id from users where id = $1 and tier = $2")
	js("add a parameter", clickField(field("params", ".values > button")))
	js("add a parameter", clickField(field("params", ".values > button")))
	set("params", ".kv-row:nth-of-type(1) input", "{{ trigger.body.id }}")
	set("params", ".kv-row:nth-of-type(2) input", "5")
	set("maxRows", "input", "50")
	set("timeout", "input", "5s")

	// EMAIL
	add(`["steps"]`, 4, "EMAIL", "to")
	set("to", "textarea", "a@example.com\n{{ trigger.body.email }}")
	set("cc", "textarea", "c@example.com")
	set("replyTo", "input", "ops@example.com")
	set("subject", "input", "Refund {{ trigger.body.id }}")
	set("text", "textarea", "Hello")
	set("html", "textarea", "<p>Hello</p>")

	// AI: a flow of the project as a tool.
	add(`["steps"]`, 5, "AI", "model")
	set("model", "input", "gpt-4o")
	set("system", "input", "You triage.")
	set("maxTurns", "input", "4")
	set("maxTokens", "input", "500")
	set("temperature", "input", "0.3")
	js("add a tool", clickField(field("tools", ".tools > button")))
	set("tools", ".kv-row:nth-of-type(1) select.tool-flow", "Lookup")
	set("output", "textarea", `{"type": "object", "properties": {"priority": {"enum": ["low", "high"]}}}`)

	// WAIT until a time, and WAIT for a callback with a notify step.
	add(`["steps"]`, 6, "WAIT", "for")
	set("for", "select", "until")
	do("the until field", chromedp.WaitVisible(chromedp.CSS(field("until", "input"))))
	set("until", "input", "trigger.body.at")
	add(`["steps"]`, 7, "WAIT", "for")
	set("for", "select", "callback")
	do("the callback's fields", chromedp.WaitVisible(chromedp.CSS(field("timeout", "input"))))
	set("timeout", "input", "2h")
	add(`["steps",7,"notify"]`, 0, "HTTP", "url")
	set("url", "input", "https://worker.example.com/jobs")

	// MCP: the connection is the palette's "mcp"; arguments as name and
	// template rows.
	add(`["steps"]`, 8, "MCP", "tool")
	set("tool", "input", "create_issue")
	js("add an argument", clickField(field("arguments", ".kv > button")))
	set("arguments", ".kv-row:nth-of-type(1) .kv-key", "title")
	set("arguments", ".kv-row:nth-of-type(1) .kv-value", "{{ trigger.body.title }}")

	filled := forms("as filled")
	do("save the draft", loads(chromedp.Click(chromedp.ID("builder-save"))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Draft saved")]`)))

	var draft struct{ Steps []map[string]any }
	api(t, p, key, "GET", "/api/v1/flows/"+f.ID+"/draft", "", 200, &draft)
	var want []map[string]any
	if err := json.Unmarshal([]byte(`[
	  {"name": "start", "type": "SET", "values": {"a": "1"}},
	  {"name": "action", "type": "ACTION", "action": "github.create_issue", "connection": "gh",
	   "input": {"owner": "acme", "repo": "web", "title": "{{ trigger.body.alert }}", "body": "Seen at {{ trigger.body.at }}", "labels": ["ops", "alert"]}},
	  {"name": "approve", "type": "APPROVAL", "title": "Refund {{ trigger.body.amount }}?", "approvals": 2,
	   "approvers": {"roles": ["admin", "operator"]}, "timeout": "48h",
	   "form": {"type": "object", "properties": {"amount": {"type": "number"}, "tier": {"type": "string", "enum": ["gold", "silver"]}}, "required": ["amount"]},
	   "notify": [{"name": "call", "type": "HTTP", "method": "GET", "url": "https://hooks.example.com/notify"}]},
	  {"name": "query", "type": "SQL", "connection": "db", "query": "select id from users where id = $1 and tier = $2",
	   "params": ["{{ trigger.body.id }}", 5], "maxRows": 50, "timeout": "5s"},
	  {"name": "mail", "type": "EMAIL", "connection": "mail", "to": ["a@example.com", "{{ trigger.body.email }}"], "cc": ["c@example.com"],
	   "replyTo": "ops@example.com", "subject": "Refund {{ trigger.body.id }}", "text": "Hello", "html": "<p>Hello</p>"},
	  {"name": "ask", "type": "AI", "connection": "openai", "model": "gpt-4o", "system": "You triage.", "prompt": "{{ trigger.body.text }}",
	   "tools": [{"flow": "Lookup"}], "maxTurns": 4, "maxTokens": 500, "temperature": 0.3,
	   "output": {"type": "object", "properties": {"priority": {"enum": ["low", "high"]}}}},
	  {"name": "wait", "type": "WAIT", "until": "trigger.body.at"},
	  {"name": "wait_2", "type": "WAIT", "for": "callback", "timeout": "2h",
	   "notify": [{"name": "call_2", "type": "HTTP", "method": "GET", "url": "https://worker.example.com/jobs"}]},
	  {"name": "tool", "type": "MCP", "connection": "mcp", "tool": "create_issue", "arguments": {"title": "{{ trigger.body.title }}"}}
	]`), &want); err != nil {
		t.Fatal(err)
	}
	if len(draft.Steps) != len(want) {
		t.Fatalf("saved %d steps, want %d: %v", len(draft.Steps), len(want), draft.Steps)
	}
	for i := range want {
		if !reflect.DeepEqual(draft.Steps[i], want[i]) {
			a, _ := json.Marshal(draft.Steps[i])
			b, _ := json.Marshal(want[i])
			t.Errorf("step %d saved as\n%s\nwant\n%s", i, a, b)
		}
	}

	// Opened again, on a laptop and on a phone, the forms show what was
	// filled.
	for _, size := range [][2]int64{{1440, 900}, {390, 844}} {
		do(fmt.Sprintf("the editor again at %dx%d", size[0], size[1]), chromedp.EmulateViewport(size[0], size[1]),
			chromedp.Navigate(editor), ready)
		again := forms("after the save")
		if len(again) != len(filled) {
			t.Errorf("at %dx%d: %d boxes after the save, %d before", size[0], size[1], len(again), len(filled))
		}
		for path, fields := range filled {
			for k, v := range fields {
				if w := again[path][k]; !reflect.DeepEqual(w, v) {
					t.Errorf("at %dx%d, %s %s shows %q after the save, %q before", size[0], size[1], path, k, w, v)
				}
			}
		}
	}
}
