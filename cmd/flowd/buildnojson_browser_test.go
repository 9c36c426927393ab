package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Bounds of the bar flow built in the browser: a newcomer's path, no JSON.
const (
	barMaxClicks     = 12
	barMaxKeystrokes = 60
)

// TestBuildWithoutJSON builds "a webhook, then an HTTP call, then respond
// with a field of its answer" in a real browser from an empty project with
// the visual editor, counting every click and keystroke from the flow list
// (signing in aside), asserts no JSON was typed, then calls the flow's
// webhook and reads the field in its answer. The HTTP step calls a loopback
// server, tried once with "Test step" so that the field picker offers the
// answer's fields before any run.
func TestBuildWithoutJSON(t *testing.T) {
	t.Parallel() // its own flowd, directory and ports, and its own browser
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"greeting": "hello from the API", "id": 42}`)
	}))
	t.Cleanup(api.Close)
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_WORKERS=2", "FLOWD_LOG_LEVEL=warn", "FLOWD_ALLOW_PRIVATE_NETWORKS=true")
	key := initialKey(t, dir)
	ctx := newBrowser(t) // fails, saying why, when chromium is missing or does not start
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browserDo(t, ctx, p, what, actions...)
	}
	clicks, keys := 0, 0
	var typed []string
	click := func(what, css string, then ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		clicks++
		do(what, append([]chromedp.Action[chromedp.Void]{chromedp.WaitVisible(chromedp.CSS(css)), chromedp.Click(chromedp.CSS(css))}, then...)...)
	}
	// clickTo is click on what loads another page (a link, a form's
	// button): what follows waits for that page, not for the one clicked.
	clickTo := func(what, css string, then ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		clicks++
		do(what, append([]chromedp.Action[chromedp.Void]{chromedp.WaitVisible(chromedp.CSS(css)), loads(chromedp.Click(chromedp.CSS(css)))}, then...)...)
	}
	typeIn := func(what, css, text string) {
		t.Helper()
		keys += len([]rune(text))
		typed = append(typed, text)
		do(what, chromedp.SendKeys(chromedp.CSS(css), text))
	}

	do("sign in", chromedp.Navigate(p.base+"/ui/signin"), chromedp.SendKeys(chromedp.ID("apiKey"), key),
		loads(chromedp.Submit(chromedp.ID("apiKey"))), chromedp.WaitVisible(chromedp.Search(`//h1[text()="Flows"]`)))

	// From the empty flow list.
	clickTo("New flow", `a.button[href$="/flows/new"]`, chromedp.WaitVisible(chromedp.Search(`//h2[text()="What starts it?"]`)))
	clickTo("a webhook with a reply", `a.start[href$="start=webhook-reply"]`, chromedp.WaitVisible(chromedp.CSS(`#builder[data-ready="true"]`)))
	click("+ before the reply", `button[data-add='[["steps"],0]']`)
	click("HTTP in the palette", `button[data-new-step="HTTP"]`, chromedp.WaitVisible(chromedp.CSS(`#builder-panel .bf-field[data-key="url"] input`)))
	click("the URL field", `#builder-panel .bf-field[data-key="url"] input`)
	typeIn("the URL", `#builder-panel .bf-field[data-key="url"] input`, api.URL+"/hello")
	click("Test step", `#builder-test-step`, chromedp.WaitVisible(chromedp.CSS(`#step-test-result [data-status="SUCCEEDED"]`)))
	click("the reply in the picture", `button.bp-box[data-path='["steps",1]']`, chromedp.WaitVisible(chromedp.CSS(`#builder-panel .bf-field[data-key="body"] textarea`)))
	click("the body's field picker", `#builder-panel .bf-field[data-key="body"] button.picker`)
	click("the answer's greeting", `#builder-panel .bf-field[data-key="body"] button[data-field="steps.call.body.greeting"]`)
	clickTo("Create flow", `#builder-save`, chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Flow created")]`)))
	clickTo("Enable", `form[action$="/enable"] button`, chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Flow enabled")]`)))

	t.Logf("the bar flow took %d clicks and %d keystrokes (typed: %q)", clicks, keys, typed)
	if clicks > barMaxClicks || keys > barMaxKeystrokes {
		t.Errorf("the bar flow took %d clicks and %d keystrokes, want at most %d and %d", clicks, keys, barMaxClicks, barMaxKeystrokes)
	}
	for _, s := range typed {
		if strings.ContainsAny(s, `{}[]"`) {
			t.Errorf("JSON was typed: %q", s)
		}
	}

	hook := browserRun(t, ctx, p, "the webhook's address", chromedp.Value(chromedp.ID("webhook-url")))
	resp, err := http.Post(hook, "application/json", strings.NewReader(`{"name": "Ada"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "hello from the API" {
		t.Fatalf("the webhook answered %d %q, want 200 with the API's greeting\nflowd stderr:\n%s", resp.StatusCode, body, p.stderr)
	}
}

// preferJSONView makes the editor open on its JSON view (Advanced), as it
// does for a user who last used it: the tests of the JSON editor type there.
func preferJSONView() chromedp.Action[chromedp.Void] {
	return chromedp.Evaluate[chromedp.Void](`localStorage.setItem("flow-editor-json", "open")`)
}
