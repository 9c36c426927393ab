package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// builderFlow nests a FOR_EACH in a SWITCH case and ends with a CODE step
// that fails when the event asks it to.
const builderFlow = `{"name": "Orders", "engine": "FLOW_BUILDER", "steps": [
  {"name": "route", "type": "SWITCH", "cases": [
    {"when": "trigger.body.kind == 'order'", "steps": [
      {"name": "each_line", "type": "FOR_EACH", "items": "trigger.body.lines", "steps": [
        {"name": "price", "type": "SET", "values": {"total": "{{ item.qty * 2 }}"}}]}]}],
   "default": [{"name": "ignore", "type": "SET", "values": {"ignored": true}}]},
  {"name": "check", "type": "CODE", "code": "if (trigger.body.fail) { throw new Error('check failed: ' + trigger.body.kind) } return 1"}
]}`

// TestDashboardBuilderInABrowser builds a flow the way a newcomer does,
// in a real browser against a running flowd: the flow page draws it as a
// picture with its nested steps, and a box opens the step's settings; "Send
// test event" runs it without curl and lands on the run, whose picture
// colours each step by its result, with a timeline, and a box opens the
// failed step's error in place.
func TestDashboardBuilderInABrowser(t *testing.T) {
	t.Parallel() // its own flowd, directory and ports, and its own browser
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_WORKERS=2", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	ctx := newBrowser(t)
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browserDo(t, ctx, p, what, actions...)
	}
	eval := func(js string) string {
		t.Helper()
		return browserRun(t, ctx, p, "evaluate "+js, chromedp.Evaluate[string](js))
	}

	do("sign in", chromedp.Navigate(p.base+"/ui/signin"), chromedp.SendKeys(chromedp.ID("apiKey"), key),
		loads(chromedp.Submit(chromedp.ID("apiKey"))), chromedp.WaitVisible(chromedp.Search(`//h1[text()="Flows"]`)),
		preferJSONView())
	do("create the flow in the editor", chromedp.Navigate(p.base+"/ui/flows/new"), chromedp.WaitVisible(chromedp.ID("definition")),
		chromedp.SetValue(chromedp.ID("definition"), builderFlow), loads(chromedp.Submit(chromedp.ID("definition"))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Flow created")]`)))

	// 1. The picture: every step, nested ones too, the case's condition
	// and the loop's frame, drawn by the server.
	steps := strings.Split(eval(`[...document.querySelectorAll("svg.flow-picture g[data-step]")].map(g => g.dataset.step).filter(Boolean).join(",")`), ",")
	for _, name := range []string{"route", "each_line", "price", "ignore", "check"} {
		if !slices.Contains(steps, name) {
			t.Errorf("the picture lacks step %s: %v", name, steps)
		}
	}
	if text := eval(`document.querySelector("svg.flow-picture").textContent`); !strings.Contains(text, "case 1: trigger.body.kind == 'order'") ||
		!strings.Contains(text, "for each item of") || !strings.Contains(text, "default") {
		t.Errorf("the picture lacks the case condition, the loop or the default:\n%s", text)
	}
	do("open a nested step's settings from its box",
		chromedp.Click(chromedp.CSS(`svg.flow-picture g[data-step="price"] a`)),
		chromedp.WaitVisible(chromedp.Search(`//details[@open]//pre[contains(., "item.qty * 2")]`)))

	// 4. A test event, sent from the flow page, lands on its run.
	do("send a test event", chromedp.SetValue(chromedp.ID("test-body"), `{"kind": "order", "lines": [{"qty": 1}, {"qty": 2}], "fail": true}`),
		loads(chromedp.Click(chromedp.Search(`//button[text()="Send test event"]`))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Test event sent through the test URL")]`)))
	loc := browserRun(t, ctx, p, "the run's address", chromedp.Location())
	m := regexp.MustCompile(`/ui/flows/(flw_[A-Za-z0-9_-]+)/runs/(run_[A-Za-z0-9_-]+)`).FindStringSubmatch(loc)
	if m == nil {
		t.Fatalf("the test event did not open a run: %s", loc)
	}
	if st := waitRun(t, p, key, m[1], m[2]); st != "FAILED" {
		t.Fatalf("the test run ended %s, want FAILED", st)
	}

	// 2. The run on the picture: colours by result, a timeline, and the
	// failed step's error opened in place.
	do("the finished run", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`svg.flow-picture`)))
	for step, want := range map[string]string{
		"route": "st-succeeded", "each_line": "st-succeeded", "price": "st-succeeded", "ignore": "st-unreached", "check": "st-failed",
	} {
		if got := eval(`document.querySelector('svg.flow-picture g[data-step="` + step + `"]').getAttribute("class")`); !strings.Contains(got, want) {
			t.Errorf("step %s has class %q, want %s", step, got, want)
		}
	}
	if fill := eval(`getComputedStyle(document.querySelector('svg.flow-picture g[data-step="check"] rect.box')).fill`); fill != "rgb(253, 236, 234)" {
		t.Errorf("the failed step is filled %s, want the failure colour", fill)
	}
	if fill := eval(`getComputedStyle(document.querySelector('svg.flow-picture g[data-step="price"] rect.box')).fill`); fill != "rgb(227, 243, 233)" {
		t.Errorf("a succeeded step is filled %s, want the success colour", fill)
	}
	if bars := eval(`String(document.querySelectorAll("svg.timeline g.bar").length)`); bars == "0" || bars == "" {
		t.Error("the run has no timeline bars")
	}
	do("open the failed step in place", chromedp.Click(chromedp.CSS(`svg.flow-picture g[data-step="check"] a`)),
		chromedp.WaitVisible(chromedp.Search(`//details[@open]//p[contains(., "check failed: order")]`)))

	// On a phone the run page and the run list fit the screen: pictures
	// scroll inside their frame, runs are cards.
	for _, page := range []string{loc, p.base + "/ui/flows/" + m[1] + "/runs"} {
		do("a phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("main")))
		if over := eval(`String(document.documentElement.scrollWidth > window.innerWidth + 1)`); over != "false" {
			t.Errorf("%s scrolls sideways on a phone", page)
		}
	}
	if shown := eval(`getComputedStyle(document.querySelector("table.cards thead")).display`); shown != "none" {
		t.Errorf("the run list on a phone shows its table header (%s), not cards", shown)
	}
}

// TestDashboardEditorInABrowser: the flow editor checks the definition as
// it is typed against the API document's schema, saying where the problem
// is (line and column) before anything is saved; it completes field names
// and step types, and formats.
func TestDashboardEditorInABrowser(t *testing.T) {
	t.Parallel() // its own flowd, directory and ports, and its own browser
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	ctx := newBrowser(t)
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browserDo(t, ctx, p, what, actions...)
	}
	eval := func(js string) string {
		t.Helper()
		return browserRun(t, ctx, p, "evaluate "+js, chromedp.Evaluate[string](js))
	}
	// typed replaces the definition and tells the editor, as typing does.
	typed := func(text string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](`(() => { const ta = document.getElementById("definition");
			ta.value = ` + strconv.Quote(text) + `; ta.focus(); ta.setSelectionRange(ta.value.length, ta.value.length);
			ta.dispatchEvent(new Event("input")); })()`)
	}
	do("sign in", chromedp.Navigate(p.base+"/ui/signin"), chromedp.SendKeys(chromedp.ID("apiKey"), key),
		loads(chromedp.Submit(chromedp.ID("apiKey"))), chromedp.WaitVisible(chromedp.Search(`//h1[text()="Flows"]`)),
		preferJSONView())
	do("open the editor", chromedp.Navigate(p.base+"/ui/flows/new"), chromedp.WaitReady(chromedp.CSS(`#definition[data-ready]`)))

	// A misspelt field: named with its step, at its line and column, with
	// the name it probably means.
	do("a misspelt field", typed("{\"name\": \"x\", \"engine\": \"FLOW_BUILDER\",\n \"steps\": [\n  {\"name\": \"a\", \"type\": \"SET\", \"valeus\": {}}]}"),
		chromedp.WaitVisible(chromedp.CSS(`#editor-status[data-line="3"]`)))
	if got := eval(`document.getElementById("editor-status").textContent`); !strings.Contains(got,
		`Line 3, column 32: steps[0].valeus: unknown field "valeus" in steps[0]: did you mean "values"?`) {
		t.Errorf("status for a misspelt field: %q", got)
	}
	// A syntax error, at its place.
	do("a syntax error", typed("{\"name\": \"x\",\n \"engine\": FLOW_BUILDER}"),
		chromedp.WaitVisible(chromedp.CSS(`#editor-status[data-line="2"][data-col="12"]`)))
	if got := eval(`document.getElementById("editor-status").textContent`); !strings.Contains(got, "Line 2, column 12: not valid JSON") {
		t.Errorf("status for a syntax error: %q", got)
	}
	if got := eval(`document.getElementById("editor-gutter").textContent`); got != "1\n2" {
		t.Errorf("line numbers = %q", got)
	}

	// Completion: a field name in a step, then a step type.
	do("start a field name", typed(`{"name": "x", "engine": "FLOW_BUILDER", "steps": [{"name": "a", `),
		chromedp.SendKeys(chromedp.ID("definition"), `"ty`),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="editor-suggestions"]/button[text()="type"]`)),
		chromedp.KeyEvent("\t"))
	if got := eval(`document.getElementById("definition").value`); !strings.HasSuffix(got, `{"name": "a", "type": `) {
		t.Errorf("after Tab on the field name: %q", got)
	}
	// The check of the text runs 250 ms after the last key and rewrites
	// the status line, which moves what is under it: the suggestion is
	// clicked once that is done, or a loaded machine's late check moves
	// the button between finding it and the click (the click then missed
	// it and the text stayed "S).
	do("start a step type", chromedp.SendKeys(chromedp.ID("definition"), `"S`),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="editor-suggestions"]/button[text()="SWITCH"]`)),
		chromedp.WaitVisible(chromedp.Search(`//p[@id="editor-status"][not(@aria-busy)]`)))
	if got := eval(`[...document.querySelectorAll("#editor-suggestions button")].map(b => b.textContent).join(",")`); got != "SET,SWITCH,STORE,SQL" {
		t.Errorf("step types offered after \"S: %q", got)
	}
	do("take one", chromedp.Click(chromedp.Search(`//div[@id="editor-suggestions"]/button[text()="SET"]`)))
	if got := eval(`document.getElementById("definition").value`); !strings.HasSuffix(got, `"type": "SET"`) {
		t.Fatalf("after a click on the suggestion SET: %q", got)
	}
	do("finish the step", chromedp.SendKeys(chromedp.ID("definition"), `, "values": {}}]}`))
	do("format it", chromedp.Click(chromedp.ID("editor-format")),
		chromedp.WaitVisible(chromedp.Search(`//p[@id="editor-status"][contains(., "No problems found.")]`)))
	if got := eval(`document.getElementById("definition").value`); !strings.Contains(got, "\n  \"steps\": [\n    {\n      \"name\": \"a\",\n      \"type\": \"SET\"") {
		t.Errorf("formatted definition: %q", got)
	}

	// A step added from its template lands after the one under the cursor;
	// its form edits it.
	do("add an HTTP step", chromedp.Evaluate[chromedp.Void](`(() => { const ta = document.getElementById("definition");
			const at = ta.value.indexOf('"type": "SET"'); ta.focus(); ta.setSelectionRange(at, at); })()`),
		chromedp.Click(chromedp.Search(`//div[@id="step-tools"]/button[text()="HTTP"]`)),
		chromedp.WaitVisible(chromedp.Search(`//fieldset[@id="step-form"]/legend[text()="Step steps[1] (HTTP)"]`)),
		chromedp.SetValue(chromedp.ID("step-field-url"), "https://hooks.example.com/deploys"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("step-field-url").dispatchEvent(new Event("change"))`),
		chromedp.WaitVisible(chromedp.Search(`//p[@id="editor-status"][contains(., "No problems found.")]`)))
	var def struct {
		Steps []struct{ Name, Type, URL string } `json:"steps"`
	}
	if err := json.Unmarshal([]byte(eval(`document.getElementById("definition").value`)), &def); err != nil ||
		len(def.Steps) != 2 || def.Steps[1].Name != "call" || def.Steps[1].Type != "HTTP" || def.Steps[1].URL != "https://hooks.example.com/deploys" {
		t.Errorf("after adding an HTTP step and setting its url: %+v, %v", def, err)
	}
	do("save it", loads(chromedp.Submit(chromedp.ID("definition"))), chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Flow created")]`)))
	if got := eval(`[...document.querySelectorAll("svg.flow-picture g[data-step]")].map(g => g.dataset.step).join(",")`); got != ",a,call" {
		t.Errorf("the saved flow's picture shows %q", got)
	}
}

// TestDashboardReadmeFlowInABrowser builds the README's first example flow
// the way a newcomer would, without writing its steps' JSON: the trigger
// typed, then each step added from its template and filled in its form
// (the connection picked from the project's), saved, sent a test event
// from the flow page, and shown failing at the step that failed.
func TestDashboardReadmeFlowInABrowser(t *testing.T) {
	t.Parallel() // its own flowd, directory and ports, and its own browser
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_WORKERS=2", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	ctx := newBrowser(t)
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browserDo(t, ctx, p, what, actions...)
	}
	eval := func(js string) string {
		t.Helper()
		return browserRun(t, ctx, p, "evaluate "+js, chromedp.Evaluate[string](js))
	}
	// fill sets a field of the step form as a person does: type, then
	// leave the field.
	fill := func(field, value string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](`(() => { const f = document.getElementById("step-field-` + field + `");
			f.value = ` + strconv.Quote(value) + `; f.dispatchEvent(new Event("change")); })()`)
	}
	addStep := func(typ string, fields ...string) {
		t.Helper()
		do("add a "+typ+" step", chromedp.Click(chromedp.Search(`//div[@id="step-tools"]/button[text()="`+typ+`"]`)),
			chromedp.WaitVisible(chromedp.Search(`//fieldset[@id="step-form"]/legend[contains(., "(`+typ+`)")]`)))
		for i := 0; i+1 < len(fields); i += 2 {
			do("set "+fields[i], fill(fields[i], fields[i+1]),
				chromedp.WaitVisible(chromedp.Search(`//fieldset[@id="step-form"]/legend[contains(., "(`+typ+`)")]`)))
		}
	}

	do("sign in", chromedp.Navigate(p.base+"/ui/signin"), chromedp.SendKeys(chromedp.ID("apiKey"), key),
		loads(chromedp.Submit(chromedp.ID("apiKey"))), chromedp.WaitVisible(chromedp.Search(`//h1[text()="Flows"]`)),
		preferJSONView())
	do("a connection for the chat service", chromedp.Navigate(p.base+"/ui/connections"),
		chromedp.SendKeys(chromedp.ID("name"), "Chat bot"), chromedp.SendKeys(chromedp.ID("app"), "chat"),
		chromedp.SendKeys(chromedp.ID("apiKey"), "chat-key"), loads(chromedp.Submit(chromedp.ID("apiKey"))),
		chromedp.WaitVisible(chromedp.CSS(".notice")))

	do("the trigger", chromedp.Navigate(p.base+"/ui/flows/new"), chromedp.WaitReady(chromedp.CSS(`#definition[data-ready]`)),
		chromedp.Evaluate[chromedp.Void](`(() => { const ta = document.getElementById("definition");
			ta.value = JSON.stringify({name: "Deploy notifier", engine: "WORKFLOW_BUILDER", trigger: {type: "WEBHOOK", webhook: {
				httpMethod: "POST", path: "deploys/github", responseMode: "ON_COMPLETION",
				authentication: {type: "HEADER", name: "X-Webhook-Secret", value: "s3cret-header-value"}}}, steps: []}, null, 2);
			ta.focus(); ta.setSelectionRange(0, 0); ta.dispatchEvent(new Event("input")); })()`))
	conn := eval(`document.querySelector("#connection-ids option").value`)
	addStep("FILTER", "name", "only_pushes", "condition", `trigger.body.event == "push"`)
	// Private addresses are refused by the SSRF guard: this chat service
	// fails at once, as an unreachable one would.
	addStep("HTTP", "name", "notify", "connectionId", conn, "url", "http://10.255.255.1/messages")
	addStep("RESPOND", "name", "reply")
	do("save", chromedp.WaitVisible(chromedp.Search(`//p[@id="editor-status"][contains(., "No problems found.")]`)),
		loads(chromedp.Submit(chromedp.ID("definition"))), chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Flow created")]`)))
	if got := eval(`[...document.querySelectorAll("svg.flow-picture g[data-step]")].map(g => g.dataset.step).join(",")`); got != ",only_pushes,notify,reply" {
		t.Fatalf("the saved flow's picture shows %q", got)
	}

	do("send a test event", chromedp.SetValue(chromedp.ID("test-body"), `{"event": "push", "data": {"ref": "refs/heads/main"}}`),
		loads(chromedp.Click(chromedp.Search(`//button[text()="Send test event"]`))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Test event sent through the test URL")]`)),
		chromedp.WaitVisible(chromedp.CSS(`svg.flow-picture g.st-failed[data-step="notify"]`)))
	for step, want := range map[string]string{"only_pushes": "st-succeeded", "notify": "st-failed", "reply": "st-skipped"} {
		if got := eval(`document.querySelector('svg.flow-picture g[data-step="` + step + `"]').getAttribute("class")`); !strings.Contains(got, want) {
			t.Errorf("step %s has class %q, want %s", step, got, want)
		}
	}
	do("see why it failed", chromedp.Click(chromedp.CSS(`svg.flow-picture g[data-step="notify"] a`)),
		chromedp.WaitVisible(chromedp.Search(`//details[@open]//p[@class="error-text"]`)))
	if got := eval(`document.querySelector("details[open] p.error-text").textContent`); !strings.Contains(got, "10.255.255.1") {
		t.Errorf("the failed step's error does not say what it could not reach: %q", got)
	}
}
