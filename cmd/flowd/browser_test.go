package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"flowservice/pkg/oauth/oauthtest"
)

// chromium finds Debian's chromium; `make test` installs it when missing.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("the browser tests need Debian's chromium: `make test` installs it (apt-get install -y chromium)")
	return ""
}

// newBrowser starts a headless chromium that reaches loopback only, with a
// fresh profile, and returns a tab.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox, // containers and CI run as root
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-pings", true),
		// Every name resolves to nothing: only 127.0.0.1 is reachable.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// No deadline on the tab: a test's steps are bounded one by one
	// (browserDo). The first action starts chromium, and the context it
	// gets is the browser's lifetime, so the start is bounded from here.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx, chromedp.Navigate("about:blank")) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start chromium: %v", err)
		}
	case <-time.After(browserStep):
		t.Fatalf("start chromium: no answer within %s", browserStep)
	}
	return ctx
}

// TestDashboardInABrowser drives the dashboard of a running flowd with a
// real browser through what a user does: sign in, create an API key
// connection, connect an OAuth2 app through the provider's consent page,
// create and enable a flow, send a webhook, read the run's steps, retry
// it, write a POLL flow with a CALL_FLOW step in the editor, save a draft
// and publish it, compare versions, open a run waiting at a WAIT step and
// the project's limits, delete a connection. At phone width the header
// keeps "Sign out" on screen and no page scrolls sideways. With
// FLOWD_SCREENSHOTS=DIR it saves screenshots of the main pages there (make
// screenshots: docs/screenshots).
func TestDashboardInABrowser(t *testing.T) {
	t.Parallel() // its own flowd, directory and ports, and its own browser
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_WORKERS=2", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	idp := oauthtest.Start(oauthtest.Options{RedirectBase: p.base})
	defer idp.Close()
	add := exec.Command(flowctlBin, "--data-dir", dir, "oauth-apps", "add", "idp", "--client-id", oauthtest.ClientID,
		"--client-secret-stdin", "--authorize-url", idp.AuthorizeURL, "--token-url", idp.TokenURL, "--scopes", "read")
	add.Stdin = strings.NewReader(oauthtest.ClientSecret)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("oauth-apps add: %v %s", err, out)
	}

	ctx := newBrowser(t)
	shots := os.Getenv("FLOWD_SCREENSHOTS")
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browserDo(t, ctx, p, what, actions...)
	}
	text := func(sel string) string {
		t.Helper()
		return browserRun(t, ctx, p, "the text of "+sel, chromedp.Text(chromedp.CSS(sel)))
	}
	wantText := func(sel string, want ...string) {
		t.Helper()
		got := text(sel)
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Fatalf("%s lacks %q:\n%s", sel, w, got)
			}
		}
	}
	// snap checks the page at desktop and phone width and saves both
	// screenshots when asked to.
	snap := func(name string) {
		t.Helper()
		for _, w := range []struct {
			suffix        string
			width, height int64
		}{{"desktop", 1440, 900}, {"phone", 390, 844}} {
			// The layout is judged once the page has all it is drawn
			// with: its style sheet and scripts (the document complete),
			// its fonts, and the new width (the emulation reaches the page
			// after the command answers).
			do(fmt.Sprintf("%s at %d px: the page laid out", name, w.width), chromedp.EmulateViewport(w.width, w.height),
				laidOut(w.width))
			// A script may still draw after that (the editors): both
			// checks are awaited, and only a page that stays wrong fails.
			if err := settles(ctx, `document.documentElement.scrollWidth <= window.innerWidth + 1`); err != nil {
				sw, _ := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.documentElement.scrollWidth`))
				// The innermost element past the right edge, to say what to fix.
				wide, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
					const past = [...document.querySelectorAll("body *")].filter(e => e.getBoundingClientRect().right > window.innerWidth + 1);
					const e = past.find(e => ![...e.children].some(c => past.includes(c)));
					return e ? e.tagName + "." + e.className + " " + e.outerHTML.slice(0, 120) : "";
				})()`))
				t.Errorf("%s at %d px: the page scrolls sideways (scrollWidth %v, widest %s): %v", name, w.width, sw, wide, err)
			}
			if err := settles(ctx, `(() => {
				const b = [...document.querySelectorAll("button")].find(b => b.textContent.trim() === "Sign out");
				if (!b) return true; // signed out: nothing to check
				const r = b.getBoundingClientRect();
				return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth;
			})()`); err != nil {
				t.Errorf("%s at %d px: Sign out is off screen (%v)", name, w.width, err)
			}
			if shots != "" {
				png := browserRun(t, ctx, p, "screenshot "+name, chromedp.FullScreenshot(100))
				if err := os.WriteFile(filepath.Join(shots, name+"-"+w.suffix+".png"), png, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		do("back to desktop", chromedp.EmulateViewport(1440, 900))
	}

	// A browser opening the address lands on the sign-in page, which says
	// where the initial key is.
	do("open flowd", chromedp.Navigate(p.base+"/"), chromedp.WaitVisible(chromedp.ID("apiKey")))
	wantText("main", filepath.Join(dir, "initial-api-key"))
	snap("signin")
	do("sign in", chromedp.SendKeys(chromedp.ID("apiKey"), key), loads(chromedp.Submit(chromedp.ID("apiKey"))),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Flows"]`)),
		preferJSONView())

	// An API key connection.
	do("create an API key connection", chromedp.Navigate(p.base+"/ui/connections"),
		chromedp.SendKeys(chromedp.ID("name"), "Chat bot"), chromedp.SendKeys(chromedp.ID("app"), "chat"),
		chromedp.SendKeys(chromedp.ID("apiKey"), "chat-key-never-shown"), loads(chromedp.Submit(chromedp.ID("apiKey"))),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	wantText("main", "Connection created", "Chat bot", "API_KEY")

	// OAuth2: Connect idp, allow at the provider, come back connected.
	do("connect idp", loads(chromedp.Click(chromedp.Search(`//a[text()="Connect idp"]`))),
		chromedp.WaitVisible(chromedp.ID("allow")), loads(chromedp.Click(chromedp.ID("allow"))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Connected. The tokens")]`)))
	wantText("main", "OAUTH2", "idp", "ACTIVE", "Reconnect")
	snap("connections")

	// A flow, created in the editor and enabled.
	do("open the editor", loads(chromedp.Click(chromedp.Search(`//nav/a[text()="Flows"]`))),
		loads(chromedp.Click(chromedp.Search(`//a[text()="New flow"]`))), chromedp.WaitVisible(chromedp.ID("definition")))
	snap("editor")
	do("a definition the server refuses", chromedp.SetValue(chromedp.ID("definition"),
		`{"name": "Greeter", "engine": "FLOW_BUILDER", "steps": [{"name": "greet", "type": "SEND"}]}`),
		loads(chromedp.Submit(chromedp.ID("definition"))), chromedp.WaitVisible(chromedp.ID("definition-error")))
	wantText("#definition-error", "steps[0].type", "allowed values")
	do("create the flow", chromedp.SetValue(chromedp.ID("definition"), `{"name": "Greeter", "engine": "FLOW_BUILDER",
		"steps": [{"name": "greet", "type": "SET", "values": {"message": "Hello {{ trigger.body.name }}"}},
		  {"name": "route", "type": "SWITCH", "cases": [{"when": "trigger.body.name == 'Ada'",
		    "steps": [{"name": "welcome", "type": "SET", "values": {"vip": true}}]}],
		   "default": [{"name": "guest", "type": "SET", "values": {"vip": false}}]}]}`),
		loads(chromedp.Submit(chromedp.ID("definition"))), chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Flow created")]`)),
		loads(chromedp.Click(chromedp.Search(`//button[text()="Enable"]`))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Flow enabled")]`)))
	hook := browserRun(t, ctx, p, "the webhook's address", chromedp.Value(chromedp.ID("webhook-url")))
	snap("flow")

	// A webhook starts a run; its page shows the step's output.
	resp, err := http.Post(hook, "application/json", strings.NewReader(`{"name": "Ada"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	runID := resp.Header.Get("X-Run-Id")
	if resp.StatusCode != http.StatusOK || runID == "" {
		t.Fatalf("webhook %s = %d", hook, resp.StatusCode)
	}
	flowID := regexp.MustCompile(`flw_[A-Za-z0-9_-]+`).FindString(hook)
	waitRun(t, p, key, flowID, runID)
	do("open the run", loads(chromedp.Click(chromedp.Search(`//a[text()="Run history"]`))),
		loads(chromedp.Click(chromedp.Search(fmt.Sprintf(`//a[contains(., %q)]`, runID)))),
		chromedp.WaitVisible(chromedp.Search(`//h2[text()="Steps"]`)))
	wantText("main", "greet", "SUCCEEDED", "Hello Ada")
	snap("run")
	do("retry it", loads(chromedp.Click(chromedp.Search(`//button[text()="Retry from the start"]`))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Retry started")]`)))
	loc := browserRun(t, ctx, p, "the new run's address", chromedp.Location())
	retryID := regexp.MustCompile(`run_[A-Za-z0-9_-]+`).FindString(loc)
	if retryID == "" || retryID == runID {
		t.Fatalf("retry did not lead to a new run: %s", loc)
	}
	// The new run may still be queued when its page first shows: wait for
	// it to finish, then look again.
	waitRun(t, p, key, flowID, retryID)
	do("reload the new run", chromedp.Reload(), chromedp.WaitVisible(chromedp.Search(`//h2[text()="Steps"]`)))
	wantText("main", "SUCCEEDED", "Hello Ada")

	// The flow's page charts its two finished runs, as the browser draws
	// them: both charts laid out inside the page, a green bar, and the
	// bars' titles (what a pointer over a bar shows) adding up to 2 runs,
	// none failed, whichever hours they fell in.
	do("the flow's insights", chromedp.Navigate(p.base+"/ui/flows/"+flowID), chromedp.WaitVisible(chromedp.CSS("svg.insights")))
	drawn := browserRun(t, ctx, p, "the charts as drawn", chromedp.Evaluate[string](`(() => {
		const cs = [...document.querySelectorAll("svg.insights")];
		const inside = cs.filter(c => { const r = c.getBoundingClientRect(); return r.width > 50 && r.height > 20 && r.right <= window.innerWidth + 1; });
		const first = cs[0];
		return [cs.length, inside.length, first ? first.querySelectorAll("rect.bar-ok").length : 0,
			first ? [...first.querySelectorAll("title")].map(t => t.textContent).join("\n") : ""].join("|");
	})()`))
	parts := strings.SplitN(drawn, "|", 4)
	if len(parts) != 4 || parts[0] != "2" || parts[1] != "2" || parts[2] == "0" {
		t.Fatalf("the flow page's charts as drawn (charts|inside the page|green bars|titles): %q; want 2 charts inside the page with a green bar", drawn)
	}
	runs, failed := 0, 0
	for _, m := range regexp.MustCompile(`: (\d+) runs, (\d+) did not succeed`).FindAllStringSubmatch(parts[3], -1) {
		var n, f int
		fmt.Sscan(m[1], &n)
		fmt.Sscan(m[2], &f)
		runs, failed = runs+n, failed+f
	}
	if runs != 2 || failed != 0 {
		t.Errorf("the runs chart's bars say %d runs, %d not succeeded; want 2 and 0:\n%s", runs, failed, parts[3])
	}

	// A POLL flow that calls Greeter, written in the editor: the CALL_FLOW
	// step added from its template and its flow picked in the form; on the
	// flow's page, the POLL trigger after its first poll.
	orders := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"orders": [{"id": "o-1", "name": "Ada"}, {"id": "o-2", "name": "Grace"}]}`)
	}))
	defer orders.Close()
	pollDef := fmt.Sprintf(`{"name": "New orders", "engine": "FLOW_BUILDER", "trigger": {"type": "POLL", "poll": {"every": "5m",
		"request": {"method": "GET", "url": %q}, "items": "response.body.orders", "key": "item.id"}}, "steps": []}`, orders.URL+"/orders")
	do("a POLL flow in the editor", chromedp.Navigate(p.base+"/ui/flows/new"), chromedp.WaitReady(chromedp.CSS(`#definition[data-ready]`)),
		chromedp.Evaluate[chromedp.Void](`(() => { const ta = document.getElementById("definition");
			ta.value = JSON.stringify(`+pollDef+`, null, 2);
			ta.focus(); ta.setSelectionRange(0, 0); ta.dispatchEvent(new Event("input")); })()`))
	callForm := chromedp.WaitVisible(chromedp.Search(`//fieldset[@id="step-form"]/legend[contains(., "(CALL_FLOW)")]`))
	do("add a CALL_FLOW step", chromedp.Click(chromedp.Search(`//div[@id="step-tools"]/button[text()="CALL_FLOW"]`)), callForm,
		chromedp.Evaluate[chromedp.Void](`(() => { const f = document.getElementById("step-field-flowId");
			f.value = "`+flowID+`"; f.dispatchEvent(new Event("change")); })()`), callForm,
		chromedp.WaitVisible(chromedp.Search(`//p[@id="editor-status"][not(@aria-busy)][contains(., "No problems found.")]`)))
	snap("editor-callflow")
	do("create and enable it", loads(chromedp.Submit(chromedp.ID("definition"))), chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Flow created")]`)),
		loads(chromedp.Click(chromedp.Search(`//button[text()="Enable"]`))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Flow enabled")]`)))
	loc = browserRun(t, ctx, p, "the POLL flow's address", chromedp.Location())
	pollID := regexp.MustCompile(`flw_[A-Za-z0-9_-]+`).FindString(loc)
	waitFor(t, "the first poll", func() bool {
		var f struct {
			Poll struct{ LastPolledAt *time.Time }
		}
		api(t, p, key, "GET", "/api/v1/flows/"+pollID, "", 200, &f)
		return f.Poll.LastPolledAt != nil
	})
	do("the POLL flow again", chromedp.Navigate(p.base+"/ui/flows/"+pollID), chromedp.WaitVisible(chromedp.Search(`//dt[text()="Polling"]`)))
	wantText("main", "POLL", "last poll", "subflow")
	snap("flow-poll")

	// A draft of Greeter that waits before routing: the flow list marks
	// it, its page offers Publish and Discard; once published, the
	// versions page compares the two, and a run waits at the WAIT step.
	api(t, p, key, "PUT", "/api/v1/flows/"+flowID+"/draft", `{"steps": [
		{"name": "greet", "type": "SET", "values": {"message": "Hello {{ trigger.body.name }}"}},
		{"name": "hold", "type": "WAIT", "duration": "1h"},
		{"name": "route", "type": "SWITCH", "cases": [{"when": "trigger.body.name == 'Ada'",
		  "steps": [{"name": "welcome", "type": "SET", "values": {"vip": true}}]}],
		 "default": [{"name": "guest", "type": "SET", "values": {"vip": false}}]}]}`, 200, nil)
	do("flows list", loads(chromedp.Click(chromedp.Search(`//nav/a[text()="Flows"]`))), chromedp.WaitVisible(chromedp.CSS("table")))
	wantText("main", "Greeter", "draft", "New orders")
	snap("flows")
	do("Greeter with a draft", chromedp.Navigate(p.base+"/ui/flows/"+flowID), chromedp.WaitVisible(chromedp.ID("draft")))
	snap("flow-draft")
	do("publish it", chromedp.SendKeys(chromedp.ID("publish-message"), "wait an hour before routing"),
		loads(chromedp.Click(chromedp.Search(`//button[text()="Publish"]`))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Draft published")]`)))
	do("the versions page", chromedp.Navigate(p.base+"/ui/flows/"+flowID+"/versions"),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Versions"]`)))
	wantText("main", "wait an hour before routing", "hold")
	snap("versions")
	resp, err = http.Post(hook, "application/json", strings.NewReader(`{"name": "Grace"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waiting := resp.Header.Get("X-Run-Id")
	waitFor(t, "the run to wait at hold", func() bool {
		var r struct{ WaitingFor string }
		api(t, p, key, "GET", "/api/v1/flows/"+flowID+"/runs/"+waiting, "", 200, &r)
		return r.WaitingFor == "WAIT"
	})
	do("the waiting run", chromedp.Navigate(p.base+"/ui/flows/"+flowID+"/runs/"+waiting),
		chromedp.WaitVisible(chromedp.Search(`//dt[text()="Waiting for"]`)))
	snap("run-waiting")
	// Cancel it, after its confirmation page.
	do("cancel the waiting run", loads(chromedp.Click(chromedp.Search(`//a[contains(., "Cancel run…")]`))),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Cancel this waiting run?"]`)))
	snap("run-cancel")
	do("confirm the cancel", loads(chromedp.Click(chromedp.Search(`//button[text()="Cancel run"]`))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Run cancelled")]`)))
	wantText("main", "FAILED", "CANCELLED: cancelled while it waited")

	// Restore the first version, after its confirmation page.
	do("restore version 1", chromedp.Navigate(p.base+"/ui/flows/"+flowID+"/versions"),
		loads(chromedp.Click(chromedp.Search(`//tr[td[1][normalize-space(text())="1"]]//a[contains(., "Restore…")]`))),
		chromedp.WaitVisible(chromedp.Search(`//h1[contains(., "Restore version 1 of")]`)))
	snap("restore-confirm")
	do("confirm the restore", loads(chromedp.Click(chromedp.Search(`//button[text()="Restore version 1"]`))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Version restored")]`)))

	// The flow list searched by name and sorted by its last run.
	do("search the flows", chromedp.Navigate(p.base+"/ui/flows"), chromedp.SendKeys(chromedp.ID("q"), "gree"),
		loads(chromedp.Submit(chromedp.ID("q"))), chromedp.WaitVisible(chromedp.ID("flow-count")))
	wantText("#flow-count", "1 flow named like “gree”")
	wantText("main", "Greeter")
	if strings.Contains(text("main"), "New orders") {
		t.Error("the search for gree lists New orders")
	}
	do("sort by last run", chromedp.Navigate(p.base+"/ui/flows?sort=lastRun"), chromedp.WaitVisible(chromedp.ID("flow-count")))
	snap("flows-search")

	// The audit log filtered to runs: the cancel, linked to its run.
	do("the audit log of runs", chromedp.Navigate(p.base+"/ui/audit"), chromedp.SendKeys(chromedp.ID("action"), "run"),
		loads(chromedp.Submit(chromedp.ID("action"))), chromedp.WaitVisible(chromedp.Search(`//code[text()="run.cancel"]`)))
	wantText("main", "run of Greeter", "run.retry")
	if strings.Contains(text("table.audit"), "flow.create") {
		t.Error("the audit log filtered to run lists flow.create")
	}
	snap("audit")

	// Keys: an operator key made (shown once) and revoked.
	do("the keys page", loads(chromedp.Click(chromedp.Search(`//nav/a[text()="Keys"]`))),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="API keys"]`)),
		chromedp.SetValue(chromedp.ID("role"), "operator"), loads(chromedp.Click(chromedp.Search(`//button[text()="Create key"]`))),
		chromedp.WaitVisible(chromedp.ID("new-key")))
	newKey := browserRun(t, ctx, p, "the new key", chromedp.Value(chromedp.ID("new-key")))
	if !strings.HasPrefix(newKey, "fsk_") && len(newKey) < 20 {
		t.Fatalf("new key %q", newKey)
	}
	wantText("main", "Key created", "operator", "you")
	snap("keys")
	do("revoke it", loads(chromedp.Click(chromedp.Search(`//tr[contains(., "operator")]//a[contains(., "Revoke…")]`))),
		chromedp.WaitVisible(chromedp.Search(`//h1[starts-with(., "Revoke key")]`)),
		loads(chromedp.Click(chromedp.Search(`//button[text()="Revoke key"]`))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Key revoked")]`)))
	wantText("main", "REVOKED")
	do("the project page", chromedp.Navigate(p.base+"/ui/project"), chromedp.WaitVisible(chromedp.Search(`//h1[contains(., "Project")]`)))
	snap("project")

	// A run waiting on an APPROVAL: its page says so and links to the
	// approvals inbox, where it is approved with its form; the run goes on.
	refunds := createEnabled(t, p, key, `{"name": "Refunds", "engine": "FLOW_BUILDER", "steps": [
		{"name": "approve", "type": "APPROVAL", "title": "Refund {{ trigger.body.amount }} to {{ trigger.body.name }}?",
		 "approvers": {"roles": ["admin", "operator"]},
		 "form": {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number", "description": "At most 500"},
		   "reason": {"enum": ["damaged", "late", "other"]}, "note": {"type": "string"}}}},
		{"name": "after", "type": "SET", "values": {"decision": "{{ steps.approve.decision }}", "amount": "{{ steps.approve.values.amount }}"}}]}`)
	parked := trigger(t, p, refunds, `{"amount": 120, "name": "Ada"}`)
	waitFor(t, "the run to wait for its approval", func() bool {
		var r struct{ WaitingFor string }
		api(t, p, key, "GET", "/api/v1/flows/"+refunds+"/runs/"+parked, "", 200, &r)
		return r.WaitingFor == "APPROVAL"
	})
	do("the run waiting on an approval", chromedp.Navigate(p.base+"/ui/flows/"+refunds+"/runs/"+parked),
		chromedp.WaitVisible(chromedp.ID("pending-approval")))
	wantText("#pending-approval", "Waiting for approval:", "Refund 120 to Ada?")
	snap("run-approval")
	do("to the inbox", loads(chromedp.Click(chromedp.Search(`//a[contains(., "Decide in the approvals inbox")]`))),
		chromedp.WaitVisible(chromedp.CSS(`section.approval-item[data-run="`+parked+`"]`)))
	wantText("main", "Refund 120 to Ada?", "Refunds", "0 of 1 approval", "At most 500")
	snap("approvals")
	do("approve it", chromedp.SendKeys(chromedp.CSS(`section.approval-item input[name="amount"]`), "120"),
		chromedp.SetValue(chromedp.CSS(`section.approval-item select[name="reason"]`), "late"),
		loads(chromedp.Click(chromedp.Search(`//section[contains(@class, "approval-item")]//button[text()="Approve"]`))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Approved: the run goes on")]`)))
	wantText("main", "No approval is waiting.")
	var done struct {
		Status string
		Steps  []struct {
			Name   string
			Output map[string]any
		}
	}
	waitFor(t, "the approved run to go on to its end", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+refunds+"/runs/"+parked, "", 200, &done)
		return done.Status != "RUNNING"
	})
	if done.Status != "SUCCEEDED" || len(done.Steps) != 2 || done.Steps[1].Output["decision"] != "approved" || fmt.Sprint(done.Steps[1].Output["amount"]) != "120" {
		t.Errorf("the approved run: %+v, want SUCCEEDED with the decision approved and the amount 120", done)
	}
	var decided struct {
		Data []struct {
			RunID     string
			Decisions []struct{ Via, Decision string }
		}
	}
	api(t, p, key, "GET", "/api/v1/approvals?status=DECIDED", "", 200, &decided)
	if len(decided.Data) != 1 || decided.Data[0].RunID != parked || len(decided.Data[0].Decisions) != 1 || decided.Data[0].Decisions[0].Via != "dashboard" {
		t.Errorf("decided approvals: %+v, want the run's, approved via dashboard", decided.Data)
	}

	// The newer steps' forms in the editor: APPROVAL's, and ACTION's with
	// its app, action and inputs.
	api(t, p, key, "POST", "/api/v1/connections", `{"name": "GitHub bot", "app": "github", "type": "API_KEY", "value": {"apiKey": "ghp_test"}}`, 201, nil)
	var issues struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "Alerts to issues", "engine": "FLOW_BUILDER", "steps": [
		{"name": "issue", "type": "ACTION", "action": "github.create_issue", "connection": "GitHub bot",
		 "input": {"owner": "acme", "repo": "web", "title": "{{ trigger.body.alert }}", "labels": ["ops"]}}]}`, 201, &issues)
	box := func(path string) chromedp.Action[chromedp.Void] {
		return chromedp.Click(chromedp.CSS(`#builder-picture button.bp-box[data-path='` + path + `']`))
	}
	do("the APPROVAL form", chromedp.Navigate(p.base+"/ui/flows/"+refunds+"/edit"), chromedp.WaitVisible(chromedp.CSS(`#builder[data-ready="true"]`)),
		box(`["steps",0]`), chromedp.WaitVisible(chromedp.CSS(`#builder-panel .fb-row`)))
	snap("editor-approval")
	do("the ACTION form", chromedp.Navigate(p.base+"/ui/flows/"+issues.ID+"/edit"), chromedp.WaitVisible(chromedp.CSS(`#builder[data-ready="true"]`)),
		box(`["steps",0]`), chromedp.WaitVisible(chromedp.CSS(`#builder-panel [data-input="title"] input`)))
	snap("editor-action")

	// Delete the API key connection after its confirmation page.
	do("delete a connection", chromedp.Navigate(p.base+"/ui/connections"),
		loads(chromedp.Click(chromedp.Search(`//tr[contains(., "Chat bot")]//a[contains(., "Delete")]`))),
		chromedp.WaitVisible(chromedp.Search(`//h1[contains(., "Chat bot")]`)),
		loads(chromedp.Click(chromedp.Search(`//button[text()="Delete connection"]`))),
		chromedp.WaitVisible(chromedp.Search(`//p[contains(., "Connection deleted")]`)))
	if got := text("main"); strings.Contains(got, "Chat bot") || !strings.Contains(got, "OAUTH2") {
		t.Errorf("connections after deleting Chat bot:\n%s", got)
	}
}
