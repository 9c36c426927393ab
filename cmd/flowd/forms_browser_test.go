package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// readForms opens every box of the editor's picture in turn and reads its
// form: for each box (by its path), each field's values as shown (inputs,
// text areas, lists and checkboxes, in order).
const readForms = `(() => {
  const out = {};
  const boxes = () => [...document.querySelectorAll("#builder-picture button.bp-box[data-path]")];
  for (const p of boxes().map(b => b.getAttribute("data-path"))) {
    boxes().find(b => b.getAttribute("data-path") === p).click();
    const fields = {};
    document.querySelectorAll("#builder-panel .bf-field").forEach(f => {
      fields[f.getAttribute("data-key")] = [...f.querySelectorAll("input, textarea, select")]
        .map(i => i.type === "checkbox" ? String(i.checked) : i.value);
    });
    out[p] = fields;
  }
  return JSON.stringify(out);
})()`

// editForm changes one field of the box at path through its form, as a
// user does: the input's value, then its input and change events.
func editForm(path, key, css, value string) string {
	return fmt.Sprintf(`(() => {
  const b = [...document.querySelectorAll("#builder-picture button.bp-box[data-path]")].find(b => b.getAttribute("data-path") === %q);
  if (!b) throw new Error("no box " + %q);
  b.click();
  const f = document.querySelector('#builder-panel .bf-field[data-key=%q] %s');
  if (!f) throw new Error("no field %s in " + %q);
  f.value = %q;
  f.dispatchEvent(new Event("input", {bubbles: true}));
  f.dispatchEvent(new Event("change", {bubbles: true}));
})()`, path, path, key, css, key, path, value)
}

// TestStepFormsRoundTrip: a flow with every trigger field group and step
// type of the branch (VERIFY_SIGNATURE, HTTP, SET, CODE, STORE, FILTER,
// SWITCH with a WAIT in a case and a CALL_FLOW in its default, FOR_EACH,
// RESPOND) is opened in the editor in headless chromium at 1440x900; one
// field of each step is changed through its form and the draft saved. The
// saved definition is the original with exactly those changes, and the
// editor opened again, at 1440x900 and at 390x844, shows every form with
// the same values as before the save.
func TestStepFormsRoundTrip(t *testing.T) {
	t.Parallel() // its own flowd, directory and ports, and its own browser
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_WORKERS=1", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	var child struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "Child", "engine": "FLOW_BUILDER"}`, 201, &child)
	def := `{"name": "Every form", "engine": "WORKFLOW_BUILDER",
	  "trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "every-form", "responseMode": "ON_COMPLETION",
	    "idempotencyHeader": "X-Delivery"}},
	  "steps": [
	    {"name": "signed", "type": "VERIFY_SIGNATURE", "signature": {"preset": "GITHUB", "secret": "s3cret"}},
	    {"name": "call", "type": "HTTP", "method": "POST", "url": "http://127.0.0.1:9/hook",
	     "headers": {"X-Team": "ops"}, "query": {"page": "1"}, "body": {"name": "{{ trigger.body.name }}"},
	     "timeoutMs": 5000, "continueOnFail": true, "retry": {"attempts": 3, "backoff": "2s"}},
	    {"name": "shape", "type": "SET", "values": {"greeting": "Hello {{ trigger.body.name }}"}, "when": "trigger.body.name != nil"},
	    {"name": "code", "type": "CODE", "code": "return {n: 1}", "timeout": "2s"},
	    {"name": "remember", "type": "STORE", "set": {"last": "{{ trigger.body.name }}"}, "delete": ["old"]},
	    {"name": "only_if", "type": "FILTER", "condition": "trigger.body.name != nil"},
	    {"name": "route", "type": "SWITCH", "cases": [{"when": "trigger.body.kind == 'a'",
	       "steps": [{"name": "pause", "type": "WAIT", "duration": "10m"}]}],
	     "default": [{"name": "sub", "type": "CALL_FLOW", "flowId": "` + child.ID + `", "input": {"x": "1"}, "wait": false}]},
	    {"name": "each", "type": "FOR_EACH", "items": "trigger.body.items", "concurrency": 2,
	     "steps": [{"name": "item_set", "type": "SET", "values": {"i": "{{ item }}"}}]},
	    {"name": "reply", "type": "RESPOND", "statusCode": 201, "body": {"ok": "{{ steps.shape.greeting }}"},
	     "contentType": "application/json", "headers": {"X-Done": "yes"}}]}`
	var f struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", def, 201, &f)
	var before map[string]any
	api(t, p, key, "GET", "/api/v1/flows/"+f.ID, "", 200, &before)

	ctx := newBrowser(t)
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browserDo(t, ctx, p, what, actions...)
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

	shown := forms("as created")
	// Every step of the definition, nested ones included, has its box and
	// its form shows the definition's values.
	for path, want := range map[string][2]string{
		`["trigger"]`:                     {"webhook.path", "every-form"},
		`["steps",0]`:                     {"signature.preset", "GITHUB"},
		`["steps",1]`:                     {"url", "http://127.0.0.1:9/hook"},
		`["steps",2]`:                     {"when", "trigger.body.name != nil"},
		`["steps",3]`:                     {"timeout", "2s"},
		`["steps",4]`:                     {"delete", "old"},
		`["steps",5]`:                     {"condition", "trigger.body.name != nil"},
		`["steps",6]`:                     {"cases", "trigger.body.kind == 'a'"},
		`["steps",6,"cases",0,"steps",0]`: {"duration", "10m"},
		`["steps",6,"default",0]`:         {"flowId", child.ID},
		`["steps",7]`:                     {"concurrency", "2"},
		`["steps",7,"steps",0]`:           {"values", "{{ item }}"},
		`["steps",8]`:                     {"statusCode", "201"},
	} {
		got, ok := shown[path]
		if !ok {
			t.Errorf("no box for %s; boxes: %v", path, keysOf(shown))
			continue
		}
		if !anyHolds(got[want[0]], want[1]) {
			t.Errorf("the form of %s shows %s = %q, want %q among them (form: %v)", path, want[0], got[want[0]], want[1], got)
		}
	}

	// One field of each step type changed through its form.
	edits := []struct{ path, key, css, value string }{
		{`["steps",0]`, "signature.preset", "select", "STRIPE"},
		{`["steps",1]`, "url", "input", "http://127.0.0.1:9/hook2"},
		{`["steps",2]`, "values", "input.kv-value", "Hi {{ trigger.body.name }}"},
		{`["steps",3]`, "code", "textarea", "return {n: 2}"},
		{`["steps",4]`, "set", "input.kv-value", "{{ trigger.body.id }}"},
		{`["steps",5]`, "condition", "input", "trigger.body.name != ''"},
		{`["steps",6]`, "cases", "input", "trigger.body.kind == 'b'"},
		{`["steps",6,"cases",0,"steps",0]`, "duration", "input", "20m"},
		{`["steps",6,"default",0]`, "input", "textarea", `{"x": "2"}`},
		{`["steps",7]`, "concurrency", "input", "3"},
		{`["steps",8]`, "statusCode", "input", "202"},
	}
	for _, e := range edits {
		do("edit "+e.path+" "+e.key, chromedp.Evaluate[chromedp.Void](editForm(e.path, e.key, e.css, e.value)))
	}
	edited := forms("after the edits")
	do("save the draft", loads(chromedp.Click(chromedp.ID("builder-save"))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Draft saved")]`)))

	var draft map[string]any
	api(t, p, key, "GET", "/api/v1/flows/"+f.ID+"/draft", "", 200, &draft)
	steps := before["steps"].([]any)
	set := func(i int, v any, keys ...any) {
		var cur any = steps[i]
		for _, k := range keys[:len(keys)-1] {
			switch k := k.(type) {
			case string:
				cur = cur.(map[string]any)[k]
			case int:
				cur = cur.([]any)[k]
			}
		}
		cur.(map[string]any)[keys[len(keys)-1].(string)] = v
	}
	set(0, "STRIPE", "signature", "preset")
	set(1, "http://127.0.0.1:9/hook2", "url")
	set(2, "Hi {{ trigger.body.name }}", "values", "greeting")
	set(3, "return {n: 2}", "code")
	set(4, "{{ trigger.body.id }}", "set", "last")
	set(5, "trigger.body.name != ''", "condition")
	set(6, "trigger.body.kind == 'b'", "cases", 0, "when")
	set(6, "20m", "cases", 0, "steps", 0, "duration")
	set(6, map[string]any{"x": "2"}, "default", 0, "input")
	set(7, float64(3), "concurrency")
	set(8, float64(202), "statusCode")
	if !reflect.DeepEqual(draft["steps"], before["steps"]) {
		a, _ := json.MarshalIndent(draft["steps"], "", " ")
		b, _ := json.MarshalIndent(before["steps"], "", " ")
		t.Errorf("the saved steps differ from the definition with the edits:\nsaved %s\nwant  %s", a, b)
	}
	if !reflect.DeepEqual(draft["trigger"], before["trigger"]) {
		t.Errorf("the saved trigger changed: %v, want %v", draft["trigger"], before["trigger"])
	}

	// The forms show the saved definition as they showed it before the
	// save, on a laptop and on a phone (the secret shows masked once saved).
	for _, size := range [][2]int64{{1440, 900}, {390, 844}} {
		do(fmt.Sprintf("the editor again at %dx%d", size[0], size[1]), chromedp.EmulateViewport(size[0], size[1]),
			chromedp.Navigate(editor), ready)
		again := forms("after the save")
		for path, fields := range edited {
			for k, v := range fields {
				if k == "signature.secret" {
					continue
				}
				if w := again[path][k]; !reflect.DeepEqual(w, v) {
					t.Errorf("at %dx%d, %s %s shows %q after the save, %q before", size[0], size[1], path, k, w, v)
				}
			}
		}
		if len(again) != len(edited) {
			t.Errorf("at %dx%d: %d boxes after the save, %d before", size[0], size[1], len(again), len(edited))
		}
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func anyHolds(vs []string, s string) bool {
	for _, v := range vs {
		if strings.Contains(v, s) {
			return true
		}
	}
	return false
}
