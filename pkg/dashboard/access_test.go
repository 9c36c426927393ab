package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/oauth/oauthtest"
)

// TestDashboardRoutesHavePermissions: every form route the dashboard
// registers (in any of its files) has a permission and, when it changes
// something, an audit action; unlisted ones are admin-only.
func TestDashboardRoutesHavePermissions(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var src []byte
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	routes := regexp.MustCompile(`d\.mux\.Handle(?:Func)?\("((?:POST|PUT|DELETE|PATCH) [^"]+)", d\.auth`).FindAllStringSubmatch(string(src), -1)
	if len(routes) < 5 {
		t.Fatalf("found %d form routes in dashboard.go: the pattern no longer matches its route table", len(routes))
	}
	for _, m := range routes {
		pattern := m[1]
		if _, ok := pagePermissions[pattern]; !ok {
			t.Errorf("dashboard route %s has no entry in pagePermissions", pattern)
		}
		// Signing out and switching projects change nothing stored.
		if _, ok := pageAudit[pattern]; !ok && pattern != "POST /ui/signout" && pattern != "POST /ui/switch" {
			t.Errorf("dashboard route %s has no audit action in pageAudit", pattern)
		}
	}
}

func (e *env) roleKey(t *testing.T, r automation.Role) (string, automation.APIKey) {
	t.Helper()
	key, k, err := e.svc.CreateAPIKeyWithRole(context.Background(), e.p.ID, r)
	if err != nil {
		t.Fatal(err)
	}
	return key, k
}

// TestDashboardViewerIsReadOnly: a viewer signs in and reads, and every form
// that changes something is refused with 403 naming the role, with nothing
// changed; an operator may enable.
func TestDashboardViewerIsReadOnly(t *testing.T) {
	e := newEnv(t)
	f := e.flow(t, e.p, "Deploy")
	viewer, _ := e.roleKey(t, automation.RoleViewer)
	b := e.browser(t)
	wantRedirect(t, b.signin(viewer), "/ui/flows")
	path := "/ui/flows/" + f.ID
	// The pages offer nothing the role may not do, and say the role.
	for page, hidden := range map[string][]string{
		path:              {`/enable"`, "Edit definition", "Delete…", `/test"`},
		"/ui/flows":       {"New flow", "/flows/new"},
		"/ui/connections": {"Create connection", "New API key connection"},
	} {
		p := b.get(page)
		wantPage(t, p, http.StatusOK, `<span class="badge" title="the role of the API key you signed in with">viewer</span>`)
		for _, h := range hidden {
			if strings.Contains(p.body, h) {
				t.Errorf("the viewer's %s offers %q", page, h)
			}
		}
	}
	admin := e.browser(t)
	wantRedirect(t, admin.signin(e.key), "/ui/flows")
	wantPage(t, admin.get(path), http.StatusOK, `/enable"`, "Edit definition", "Test trigger")
	wantPage(t, admin.get("/ui/flows"), http.StatusOK, "New flow")
	for _, post := range []struct {
		path string
		form url.Values
	}{
		{path + "/enable", nil},
		{path + "/delete", nil},
		{"/ui/flows", url.Values{"name": {"x"}, "engine": {"FLOW_BUILDER"}}},
		{"/ui/connections", url.Values{"name": {"x"}, "app": {"x"}, "apiKey": {"k"}}},
	} {
		wantPage(t, b.post("/ui/flows", post.path, post.form), http.StatusForbidden, "viewer")
	}
	wantPage(t, b.get(path+"/edit"), http.StatusForbidden, "viewer")
	if got, _ := e.svc.Flow(context.Background(), e.p, f.ID); got.Status != automation.FlowInactive || got.Name != "Deploy" {
		t.Errorf("after the viewer's refused forms: %+v", got)
	}
	if l, _ := e.svc.ListFlows(context.Background(), e.p, automation.PageRequest{}); len(l.Data) != 1 {
		t.Errorf("the viewer's create made a flow: %d flows", len(l.Data))
	}

	operator, _ := e.roleKey(t, automation.RoleOperator)
	ob := e.browser(t)
	wantRedirect(t, ob.signin(operator), "/ui/flows")
	wantRedirect(t, ob.post(path, path+"/enable", nil), path+"?done=enabled")
	wantPage(t, ob.post(path, path+"/delete", nil), http.StatusForbidden, "operator")
}

// TestDashboardAudit: sign-ins, failed sign-ins and the forms' changes are
// in the audit log with the key and its role, and the audit page shows them.
func TestDashboardAudit(t *testing.T) {
	e := newEnv(t)
	f := e.flow(t, e.p, "Deploy")
	editor, ek := e.roleKey(t, automation.RoleEditor)
	revoked, rk := e.roleKey(t, automation.RoleViewer)
	if err := e.svc.RevokeAPIKey(context.Background(), rk.ID); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	wantPage(t, b.signin(revoked), http.StatusUnauthorized)
	wantRedirect(t, b.signin(editor), "/ui/flows")
	path := "/ui/flows/" + f.ID
	wantRedirect(t, b.post(path, path+"/enable", nil), path+"?done=enabled")

	l, err := e.svc.AuditLog(context.Background(), e.p, automation.AuditSearch{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ action, key string }{{"flow.enable", ek.ID}, {"session.signin", ek.ID}, {"session.signin_failed", rk.ID}}
	if len(l.Data) != len(want) {
		t.Fatalf("audit log = %+v, want %v", l.Data, want)
	}
	for i, w := range want {
		if e := l.Data[i]; e.Action != w.action || e.Actor.KeyID != w.key || e.SourceIP != "127.0.0.1" || e.RequestID == "" {
			t.Errorf("entry %d = %+v, want %s by %s from 127.0.0.1", i, e, w.action, w.key)
		}
	}
	if l.Data[0].Resource.ID != f.ID || l.Data[0].Actor.Role != automation.RoleEditor {
		t.Errorf("flow.enable entry = %+v", l.Data[0])
	}
	page := b.get("/ui/audit")
	wantPage(t, page, http.StatusOK, "flow.enable", "session.signin_failed", ek.ID, f.ID, "editor")
	if strings.Contains(page.body, editor) {
		t.Error("the audit page shows an API key")
	}
}

// TestOAuth2ConnectWithAllowedHosts: Connect with ?allowedHosts= makes an
// OAUTH2 connection fenced to them; a bad pattern is refused before the
// provider is involved.
func TestOAuth2ConnectWithAllowedHosts(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	idp := oauthtest.Start(oauthtest.Options{RedirectBase: e.srv.URL})
	defer idp.Close()
	if _, err := e.svc.AddOAuthApp(ctx, automation.OAuthAppInput{
		Name: "idp", ClientID: oauthtest.ClientID, ClientSecret: oauthtest.ClientSecret,
		AuthorizeURL: idp.AuthorizeURL, TokenURL: idp.TokenURL, Scopes: []string{"read"},
	}); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	wantPage(t, b.get("/ui/connections/connect/idp?allowedHosts=https://api.idp.example"), http.StatusBadRequest, "allowedHosts[0]")
	back, cookie := b.connect(idp, "/ui/connections/connect/idp?allowedHosts=api.idp.example,*.files.idp.example")
	wantPage(t, b.callback(back, cookie), http.StatusOK, "Connected idp")
	list, err := e.svc.ListConnections(ctx, e.p, automation.PageRequest{})
	if err != nil || len(list.Data) != 1 {
		t.Fatalf("connections = %+v, %v", list.Data, err)
	}
	if got := strings.Join(list.Data[0].AllowedHosts, " "); got != "api.idp.example *.files.idp.example" {
		t.Errorf("OAUTH2 connection allowedHosts = %q", got)
	}
	l, err := e.svc.AuditLog(ctx, e.p, automation.AuditSearch{})
	if err != nil || len(l.Data) == 0 || l.Data[0].Action != "connection.create" || l.Data[0].Resource.ID != list.Data[0].ID {
		t.Errorf("audit log after Connect = %+v, %v", l.Data, err)
	}

	// A viewer may not connect.
	viewer, _ := e.roleKey(t, automation.RoleViewer)
	vb := e.browser(t)
	wantRedirect(t, vb.signin(viewer), "/ui/flows")
	wantPage(t, vb.get("/ui/connections/connect/idp"), http.StatusForbidden, "viewer")
}

// TestConnectionFormAllowedHosts: the API key form fences the connection
// to the hosts given; a bad pattern keeps the form with the message.
func TestConnectionFormAllowedHosts(t *testing.T) {
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	wantPage(t, b.post("/ui/connections", "/ui/connections", url.Values{"name": {"s"}, "app": {"stripe"},
		"apiKey": {"sk_1"}, "allowedHosts": {"https://api.stripe.com"}}), http.StatusBadRequest, "allowedHosts[0]", "https://api.stripe.com")
	wantRedirect(t, b.post("/ui/connections", "/ui/connections", url.Values{"name": {"s"}, "app": {"stripe"},
		"apiKey": {"sk_1"}, "allowedHosts": {"api.stripe.com, *.stripe.net"}}), "/ui/connections?done=created")
	l, err := e.svc.ListConnections(context.Background(), e.p, automation.PageRequest{})
	if err != nil || len(l.Data) != 1 || strings.Join(l.Data[0].AllowedHosts, " ") != "api.stripe.com *.stripe.net" {
		t.Fatalf("connections = %+v, %v", l.Data, err)
	}
}
