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
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
)

// waitingRun starts a run of a new flow "Paused" (a WAIT of an hour, then
// a SET) and leaves it waiting at the WAIT step.
func (e *env) waitingRun(t *testing.T) (automation.Flow, automation.Run) {
	t.Helper()
	ctx := context.Background()
	f := e.flow(t, e.p, "Paused", automation.Step{Name: "later", Type: automation.StepWait, Duration: "1h"},
		automation.Step{Name: "after", Type: automation.StepSet, Values: json.RawMessage(`{"done": true}`)})
	if _, err := e.svc.EnableFlow(ctx, e.p, f.ID); err != nil {
		t.Fatal(err)
	}
	wf, err := e.svc.WebhookFlow(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	r, err := receiveWebhook(ctx, e.svc, wf, automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + f.ID, Body: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.ExecuteRun(ctx, e.p.ID, r.ID) // a run that waits answers with an error saying until when
	if r, err = e.svc.Run(ctx, e.p, f.ID, r.ID); err != nil {
		t.Fatal(err)
	}
	if r.WaitingFor != automation.WaitingWait {
		t.Fatalf("run %s is %s waiting for %q, want WAIT", r.ID, r.Status, r.WaitingFor)
	}
	return f, r
}

var (
	postFormRE = regexp.MustCompile(`<form method="post" action="([^"]+)"`)
	hrefRE     = regexp.MustCompile(`href="(/ui/[^"?#]*)`)
)

// TestRolesSeeOnlyTheirForms: for each role, every page of the dashboard
// offers only the forms and links the role may use: each form's action and
// each link, routed by the dashboard's own mux, needs a permission the
// role has. A viewer gets no test-event form, no save or delete buttons
// and no keys page; an operator gets enable and cancel but no editor; an
// editor no keys; an admin everything, the keys page included.
func TestRolesSeeOnlyTheirForms(t *testing.T) {
	e := newEnv(t)
	f, run := e.waitingRun(t)
	ctx := context.Background()
	steps := []automation.Step{{Name: "now", Type: automation.StepSet, Values: json.RawMessage(`{"v": 2}`)}}
	if _, err := e.svc.SaveDraft(ctx, e.p, f.ID, automation.DraftInput{Steps: &steps}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Publish(ctx, e.p, f.ID, automation.PublishRequest{}); err != nil {
		t.Fatal(err)
	}
	region := "eu"
	if _, err := e.svc.PutVariable(ctx, e.p, "REGION", automation.VariableInput{Value: &region}); err != nil {
		t.Fatal(err)
	}
	mux := New(e.svc, Options{}).(*Dashboard).mux
	pages := []string{"/ui/flows", "/ui/flows/" + f.ID, "/ui/flows/" + f.ID + "/runs", "/ui/flows/" + f.ID + "/runs/" + run.ID,
		"/ui/flows/" + f.ID + "/versions", "/ui/connections", "/ui/variables", "/ui/audit", "/ui/project"}

	for _, tc := range []struct {
		role automation.Role
		want []string // what the role must be offered (forms and links)
	}{
		{automation.RoleViewer, nil},
		{automation.RoleOperator, []string{"/disable", "/runs/" + run.ID + "/cancel"}},
		{automation.RoleEditor, []string{"/send-test", "/edit", "/versions/1/restore", "/variables", "/flows/new"}},
		{automation.RoleAdmin, []string{"/ui/keys", "/send-test", "/runs/" + run.ID + "/cancel"}},
	} {
		t.Run(string(tc.role), func(t *testing.T) {
			key, _ := e.roleKey(t, tc.role)
			b := e.browser(t)
			wantRedirect(t, b.signin(key), "/ui/flows")
			offered := map[string]bool{}
			for _, path := range pages {
				p := b.get(path)
				wantPage(t, p, http.StatusOK)
				check := func(method, target string) {
					target = strings.ReplaceAll(target, "&amp;", "&")
					offered[target] = true
					u, _ := url.Parse(target)
					_, pattern := mux.Handler(httptest.NewRequest(method, u.Path, nil))
					if pattern == "" || pattern == "/ui/" || pattern == "GET /ui/static/" {
						return
					}
					if need := pagePermission(pattern); !tc.role.Can(need) {
						t.Errorf("%s's %s offers %s %s, which needs %q", tc.role, path, method, u.Path, need)
					}
				}
				for _, m := range postFormRE.FindAllStringSubmatch(p.body, -1) {
					check("POST", m[1])
				}
				for _, m := range hrefRE.FindAllStringSubmatch(p.body, -1) {
					check("GET", m[1])
				}
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(mapsKeys(offered), func(o string) bool { return strings.HasSuffix(o, w) || strings.Contains(o, w+"?") }) {
					t.Errorf("%s is not offered %s", tc.role, w)
				}
			}
			keys := b.get("/ui/keys")
			if tc.role == automation.RoleAdmin {
				wantPage(t, keys, http.StatusOK, "<h1>API keys</h1>")
			} else {
				wantPage(t, keys, http.StatusForbidden, "the "+string(tc.role)+" role may not administer the project")
			}
		})
	}
}

func mapsKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestKeysPage: an admin lists the project's keys with their roles, makes
// a viewer key that is shown once (on the answer, never on the list or in
// a URL) and signs in with it; revoking asks first, ends the key's session
// and is in the audit log; the last admin key is kept.
func TestKeysPage(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	list := b.get("/ui/keys")
	wantPage(t, list, http.StatusOK, "<h1>API keys</h1>", `title="this dashboard session signed in with it">you</span>`, "session.signin")

	made := b.post("/ui/keys", "/ui/keys", url.Values{"role": {"viewer"}})
	wantPage(t, made, http.StatusOK, "Key created. Copy it now")
	secret := regexp.MustCompile(`id="new-key" value="([^"]+)"`).FindStringSubmatch(made.body)
	if secret == nil {
		t.Fatalf("the new key is not shown: %s", made.body)
	}
	if p := b.get("/ui/keys"); strings.Contains(p.body, secret[1]) {
		t.Error("the key is shown again on the list")
	}
	ks, err := e.svc.ProjectKeys(context.Background(), e.p)
	if err != nil {
		t.Fatal(err)
	}
	viewer := ks[len(ks)-1]
	if viewer.Role != automation.RoleViewer || len(ks) != 2 {
		t.Fatalf("keys after the create: %+v", ks)
	}
	vb := e.browser(t)
	wantRedirect(t, vb.signin(secret[1]), "/ui/flows")
	wantPage(t, vb.get("/ui/flows"), http.StatusOK, `title="the role of the API key you signed in with">viewer</span>`)

	wantPage(t, b.post("/ui/keys", "/ui/keys", url.Values{"role": {"owner"}}), http.StatusBadRequest,
		"role &#34;owner&#34;: allowed values are admin, editor, operator, viewer")

	confirm := b.get("/ui/keys/" + viewer.ID + "/revoke")
	wantPage(t, confirm, http.StatusOK, "Revoke key "+viewer.ID+"?", `action="/ui/keys/`+viewer.ID+`/revoke"`)
	wantRedirect(t, b.post("/ui/keys/"+viewer.ID+"/revoke", "/ui/keys/"+viewer.ID+"/revoke", nil), "/ui/keys?done=keyrevoked")
	wantPage(t, b.get("/ui/keys?done=keyrevoked"), http.StatusOK, "Key revoked", "REVOKED")
	wantRedirect(t, vb.get("/ui/flows"), "/ui/signin")

	// The signed-in admin key is the last admin key: kept.
	self := ks[0].ID
	wantPage(t, b.post("/ui/keys", "/ui/keys/"+self+"/revoke", nil), http.StatusConflict, "last admin key")
	wantPage(t, b.get("/ui/keys/key_other/revoke"), http.StatusNotFound)

	l, err := e.svc.AuditLog(context.Background(), e.p, automation.AuditSearch{Action: "key"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range l.Data {
		got = append(got, en.Action+" "+en.Resource.ID)
	}
	if want := []string{"key.revoke " + viewer.ID, "key.create " + viewer.ID}; !slices.Equal(got, want) {
		t.Errorf("audit entries of keys = %q, want %q", got, want)
	}
}

// TestFlowListSearchAndSort: the flow list finds flows by part of their
// name in any case, sorts by name either way and by creation, keeps the
// search in its sort links and pages, and refuses what it does not know.
func TestFlowListSearchAndSort(t *testing.T) {
	e := newEnv(t)
	for _, n := range []string{"Invoice paid", "Deploy", "invoice failed", "Nightly report"} {
		f := e.flow(t, e.p, n)
		// Creation times are kept to the millisecond, and a tie sorts by
		// name: each flow is made in a later millisecond than the one
		// before, so that the sort by creation has one answer (two made in
		// one millisecond on a loaded machine came out by name).
		testwait.For(t, time.Second, "the clock to pass the millisecond of "+n, func() bool {
			return time.Now().Truncate(time.Millisecond).After(f.Created.Truncate(time.Millisecond))
		})
	}
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	names := func(p page) []string {
		var out []string
		for _, m := range regexp.MustCompile(`<td class="title"><a href="/ui/flows/flw_[^"]+">([^<]+)</a>`).FindAllStringSubmatch(p.body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"", []string{"Deploy", "invoice failed", "Invoice paid", "Nightly report"}},
		{"?q=INVOICE", []string{"invoice failed", "Invoice paid"}},
		{"?q=invoice&sort=name&order=desc", []string{"Invoice paid", "invoice failed"}},
		{"?sort=created", []string{"Nightly report", "invoice failed", "Deploy", "Invoice paid"}},
		{"?sort=created&order=asc", []string{"Invoice paid", "Deploy", "invoice failed", "Nightly report"}},
		{"?q=nothing-like-it", nil},
	} {
		p := b.get("/ui/flows" + c.query)
		wantPage(t, p, http.StatusOK)
		if got := names(p); !slices.Equal(got, c.want) {
			t.Errorf("/ui/flows%s lists %q, want %q", c.query, got, c.want)
		}
	}
	p := b.get("/ui/flows?q=invoice&sort=name")
	// The heading sorts the other way and keeps the search.
	wantPage(t, p, http.StatusOK, `<a href="?order=desc&amp;q=invoice&amp;sort=name" aria-label="sort by name">Name</a> ▲`, "2 flows named like “invoice”")
	wantPage(t, b.get("/ui/flows?order=up"), http.StatusBadRequest, "order must be asc or desc")
}

// TestAuditFiltersAndLinks: the audit log filters by action (a prefix
// keeps the actions under it), by key and by time, and links each flow and
// run to its page with the flow's name.
func TestAuditFiltersAndLinks(t *testing.T) {
	e := newEnv(t)
	f, run := e.waitingRun(t)
	operator, ok := e.roleKey(t, automation.RoleOperator)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	wantRedirect(t, b.post("/ui/flows/"+f.ID, "/ui/flows/"+f.ID+"/disable", nil), "/ui/flows/"+f.ID)
	ob := e.browser(t)
	wantRedirect(t, ob.signin(operator), "/ui/flows")
	wantRedirect(t, ob.post("/ui/flows/"+f.ID, "/ui/flows/"+f.ID+"/enable", nil), "/ui/flows/"+f.ID)
	_ = run

	all := b.get("/ui/audit")
	wantPage(t, all, http.StatusOK, `<a href="/ui/flows/`+f.ID+`">Paused <code>`+f.ID+`</code></a>`,
		`<td class="nowrap"><code>flow.enable</code></td>`, `<td class="nowrap"><code>session.signin</code></td>`)
	onlyFlows := b.get("/ui/audit?action=flow")
	wantPage(t, onlyFlows, http.StatusOK, "<code>flow.enable</code>", "<code>flow.disable</code>")
	if strings.Contains(onlyFlows.body, "<code>session.signin</code>") {
		t.Error("action=flow keeps sign-ins")
	}
	byOperator := b.get("/ui/audit?actor=" + ok.ID)
	wantPage(t, byOperator, http.StatusOK, "<code>flow.enable</code>")
	if strings.Contains(byOperator.body, "<code>flow.disable</code>") {
		t.Error("actor= keeps another key's entries")
	}
	future := b.get("/ui/audit?since=2999-01-01T00:00")
	wantPage(t, future, http.StatusOK, "No entries match")
	wantPage(t, b.get("/ui/audit?until=yesterday"), http.StatusBadRequest, "until must be a time")

	// A run's entry links to the run, named by its flow.
	wantRedirect(t, b.post("/ui/flows/"+f.ID+"/runs/"+run.ID+"/cancel", "/ui/flows/"+f.ID+"/runs/"+run.ID+"/cancel", nil),
		"/ui/flows/"+f.ID+"/runs/"+run.ID+"?done=cancelled")
	wantPage(t, b.get("/ui/audit?action=run.cancel"), http.StatusOK,
		`<a href="/ui/flows/`+f.ID+`/runs/`+run.ID+`">run of Paused <code>`+run.ID+`</code></a>`)
}

// TestCancelWaitingRunFromItsPage: the page of a run waiting at a WAIT
// step offers "Cancel run…", which asks first; cancelling ends the run
// FAILED with CANCELLED and the page says so and offers it no more.
func TestCancelWaitingRunFromItsPage(t *testing.T) {
	e := newEnv(t)
	f, run := e.waitingRun(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	path := "/ui/flows/" + f.ID + "/runs/" + run.ID
	wantPage(t, b.get(path), http.StatusOK, `<a class="button danger" href="`+path+`/cancel">Cancel run…</a>`)
	wantPage(t, b.get(path+"/cancel"), http.StatusOK, "Cancel this waiting run?", `action="`+path+`/cancel"`)
	wantRedirect(t, b.post(path+"/cancel", path+"/cancel", nil), path+"?done=cancelled")
	p := b.get(path + "?done=cancelled")
	wantPage(t, p, http.StatusOK, "Run cancelled", `<span class="status failed">FAILED</span>`, "CANCELLED: cancelled while it waited")
	if strings.Contains(p.body, "Cancel run…") {
		t.Error("a cancelled run still offers Cancel")
	}
	wantPage(t, b.post(path, path+"/cancel", nil), http.StatusConflict, "FAILED already")
}

// TestRestoreAsksFirst: the versions page's Restore is a link to a page
// that asks, naming the version and what restoring does; only its form
// restores.
func TestRestoreAsksFirst(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	f := e.flow(t, e.p, "Deploy", automation.Step{Name: "v", Type: automation.StepSet, Values: json.RawMessage(`{"v": 1}`)})
	steps := []automation.Step{{Name: "v", Type: automation.StepSet, Values: json.RawMessage(`{"v": 2}`)}}
	if _, err := e.svc.SaveDraft(ctx, e.p, f.ID, automation.DraftInput{Steps: &steps}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Publish(ctx, e.p, f.ID, automation.PublishRequest{}); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	base := "/ui/flows/" + f.ID + "/versions"
	v := b.get(base)
	wantPage(t, v, http.StatusOK, `<a class="button secondary" href="`+base+`/1/restore">Restore…</a>`)
	if strings.Contains(v.body, `method="post" action="`+base+`/1/restore"`) {
		t.Error("the versions page restores in one click")
	}
	wantPage(t, b.get(base+"/1/restore"), http.StatusOK, "Restore version 1 of “Deploy”?", "in place of version 2",
		`<button type="submit" class="danger">Restore version 1</button>`)
	if g, err := e.svc.Flow(ctx, e.p, f.ID); err != nil || g.LiveVersion != 2 {
		t.Fatalf("asking restored already: %+v %v", g.LiveVersion, err)
	}
	wantPage(t, b.get(base+"/9/restore"), http.StatusNotFound)
	wantRedirect(t, b.post(base+"/1/restore", base+"/1/restore", nil), "/ui/flows/"+f.ID+"?done=restored")
	if g, err := e.svc.Flow(ctx, e.p, f.ID); err != nil || g.LiveVersion != 3 {
		t.Fatalf("after the restore: version %d %v, want 3", g.LiveVersion, err)
	}
}
