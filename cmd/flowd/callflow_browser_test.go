package main

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardCallFlowInABrowser adds a CALL_FLOW step in the flow
// editor as a person does: from its template, the flow picked among the
// project's, wait turned off in the form; the definition gets a boolean,
// and the flow saves.
func TestDashboardCallFlowInABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd and a browser")
	}
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	child := createEnabled(t, p, key, `{"name": "enrich", "engine": "FLOW_BUILDER"}`)
	ctx := newBrowser(t)
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browserDo(t, ctx, p, what, actions...)
	}
	eval := func(js string) string {
		t.Helper()
		return browserRun(t, ctx, p, "evaluate "+js, chromedp.Evaluate[string](js))
	}
	fill := func(field, value string) chromedp.Action[chromedp.Void] {
		return chromedp.Evaluate[chromedp.Void](`(() => { const f = document.getElementById("step-field-` + field + `");
			f.value = ` + strconv.Quote(value) + `; f.dispatchEvent(new Event("change")); })()`)
	}
	form := chromedp.WaitVisible(chromedp.Search(`//fieldset[@id="step-form"]/legend[contains(., "(CALL_FLOW)")]`))

	do("sign in", chromedp.Navigate(p.base+"/ui/signin"), chromedp.SendKeys(chromedp.ID("apiKey"), key),
		loads(chromedp.Submit(chromedp.ID("apiKey"))), chromedp.WaitVisible(chromedp.Search(`//h1[text()="Flows"]`)),
		preferJSONView())
	do("a new flow", chromedp.Navigate(p.base+"/ui/flows/new"), chromedp.WaitReady(chromedp.CSS(`#definition[data-ready]`)),
		chromedp.Evaluate[chromedp.Void](`(() => { const ta = document.getElementById("definition");
			ta.value = JSON.stringify({name: "order", engine: "FLOW_BUILDER", steps: []}, null, 2);
			ta.focus(); ta.setSelectionRange(0, 0); ta.dispatchEvent(new Event("input")); })()`))
	do("add a CALL_FLOW step", chromedp.Click(chromedp.Search(`//div[@id="step-tools"]/button[text()="CALL_FLOW"]`)), form)
	if got := eval(`document.getElementById("step-field-flowId").getAttribute("list") + " " + document.querySelector("#flow-ids option").value`); got != "flow-ids "+child {
		t.Errorf("flowId offers %q, want the project's flows (%s)", got, child)
	}
	if got := eval(`[...document.querySelectorAll("#step-field-wait option")].map(o => o.value).join(",")`); got != ",true,false" {
		t.Errorf("wait offers %q, want true and false", got)
	}
	do("pick the flow", fill("flowId", child), form)
	do("do not wait", fill("wait", "false"), form,
		chromedp.WaitVisible(chromedp.Search(`//p[@id="editor-status"][not(@aria-busy)][contains(., "No problems found.")]`)))
	var def struct {
		Steps []struct {
			Type string `json:"type"`
			Flow string `json:"flowId"`
			Wait any    `json:"wait"`
		} `json:"steps"`
	}
	if err := json.Unmarshal([]byte(eval(`document.getElementById("definition").value`)), &def); err != nil ||
		len(def.Steps) != 1 || def.Steps[0].Type != "CALL_FLOW" || def.Steps[0].Flow != child || def.Steps[0].Wait != false {
		t.Fatalf("definition after the form: %+v, %v; want a CALL_FLOW of %s with wait false (a boolean)", def, err, child)
	}
	do("save it", loads(chromedp.Submit(chromedp.ID("definition"))), chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Flow created")]`)))
}
