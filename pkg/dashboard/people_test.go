package dashboard

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

var setupLinkRE = regexp.MustCompile(`(/ui/setup\?token=fsu_[a-z0-9]+)`)

// uiCookie returns the browser's cookie for /ui/ paths.
func (b *browser) uiCookie(name string) *http.Cookie {
	u := *b.url
	u.Path = "/ui/flows"
	for _, c := range b.hc.Jar.Cookies(&u) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// passwordSignin signs a browser in with an email and password.
func (b *browser) passwordSignin(email, password string) page {
	b.t.Helper()
	return b.post("/ui/signin", "/ui/signin", url.Values{"email": {email}, "password": {password}})
}

// TestPeopleInDashboard: an admin invites a person on the People page; the
// set-up link works once and signs them in; their writes are audited as
// them; a role change and a removal end their session at the next request;
// the switcher moves between their projects.
func TestPeopleInDashboard(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	admin := e.browser(t)
	wantRedirect(t, admin.signin(e.key), "/ui/flows")

	p := admin.post("/ui/users", "/ui/users", url.Values{"email": {"ada@example.com"}, "role": {"editor"}})
	wantPage(t, p, http.StatusOK, "ada@example.com is invited")
	m := setupLinkRE.FindStringSubmatch(html.UnescapeString(p.body))
	if m == nil {
		t.Fatalf("no set-up link on the page: %s", p.body)
	}
	link := m[1]

	ada := e.browser(t)
	wantPage(t, ada.get(link), http.StatusOK, "ada@example.com", "acme")
	token, _ := url.ParseQuery(strings.SplitN(link, "?", 2)[1])
	form := url.Values{"token": {token.Get("token")}, "password": {"correct horse battery"}, "confirm": {"correct horse battery"}}
	short := url.Values{"token": {token.Get("token")}, "password": {"short"}, "confirm": {"short"}}
	wantPage(t, ada.post(link, "/ui/setup", short), http.StatusBadRequest, "at least 12")
	wantRedirect(t, ada.post(link, "/ui/setup", form), "/ui/flows")
	if c := ada.uiCookie(sessionCookie); c == nil || !strings.HasPrefix(c.Value, automation.PrefixSessionToken) {
		t.Fatalf("session cookie %v: want a person's session token", c)
	}
	wantPage(t, ada.get("/ui/flows"), http.StatusOK, "ada@example.com", "My API keys")
	// The link works once.
	again := e.browser(t)
	wantPage(t, again.get(link), http.StatusBadRequest, "not valid")

	// A write in the dashboard names the person in the audit log.
	wantRedirect(t, ada.post("/ui/variables", "/ui/variables", url.Values{"name": {"REGION"}, "value": {"eu"}}), "/ui/variables")
	log, err := e.svc.AuditLog(ctx, e.p, automation.AuditSearch{})
	if err != nil {
		t.Fatal(err)
	}
	var put *automation.AuditEntry
	for i := range log.Data {
		if log.Data[i].Action == "variable.put" {
			put = &log.Data[i]
		}
	}
	if put == nil || put.Actor.Email != "ada@example.com" || put.Actor.UserID == "" || put.Actor.Role != automation.RoleEditor {
		t.Fatalf("variable.put entry %+v: want the person", put)
	}
	userID := put.Actor.UserID

	// A personal key, at most her role.
	wantPage(t, ada.post("/ui/account/keys", "/ui/account/keys", url.Values{"role": {"admin"}}), http.StatusForbidden, "at most your role")
	wantPage(t, ada.post("/ui/account/keys", "/ui/account/keys", url.Values{"role": {"operator"}}), http.StatusOK, "fsk_")
	log, err = e.svc.AuditLog(ctx, e.p, automation.AuditSearch{})
	if err != nil || log.Data[0].Action != "key.create" || log.Data[0].Actor.Email != "ada@example.com" || !strings.HasPrefix(log.Data[0].Resource.ID, "key_") {
		t.Fatalf("newest audit entry %+v (%v): want key.create by ada", log.Data[0], err)
	}

	// The switcher: a second project of hers.
	other, _ := e.project(t, "beta", automation.PlanTeam)
	if _, err := e.svc.InviteUser(ctx, other.ID, "ada@example.com", automation.RoleViewer); err != nil {
		t.Fatal(err)
	}
	wantPage(t, ada.get("/ui/flows"), http.StatusOK, `name="project"`, "beta (viewer)")
	wantRedirect(t, ada.post("/ui/flows", "/ui/switch", url.Values{"project": {other.ID}}), "/ui/flows")
	wantPage(t, ada.get("/ui/flows"), http.StatusOK, "beta", `title="your role in this project">viewer`)
	wantPage(t, ada.post("/ui/flows", "/ui/variables", url.Values{"name": {"X"}, "value": {"y"}}), http.StatusForbidden, "viewer")
	wantRedirect(t, ada.post("/ui/flows", "/ui/switch", url.Values{"project": {e.p.ID}}), "/ui/flows")

	// A role change ends her session at the next request; signing in again gives the new role.
	wantRedirect(t, admin.post("/ui/users", "/ui/users/"+userID+"/role", url.Values{"role": {"viewer"}}), "/ui/users")
	wantRedirect(t, ada.get("/ui/flows"), "/ui/signin")
	wantRedirect(t, ada.passwordSignin("ada@example.com", "correct horse battery"), "/ui/flows")
	wantPage(t, ada.get("/ui/flows"), http.StatusOK, `title="your role in this project">viewer`)

	// Sign-out ends the stored session: the old cookie no longer works.
	old := ada.uiCookie(sessionCookie)
	ada.post("/ui/flows", "/ui/signout", nil)
	if _, err := e.svc.SessionPrincipal(ctx, old.Value, ""); err == nil {
		t.Fatal("the session still works after sign-out")
	}

	// Removal ends her session at once.
	wantRedirect(t, ada.passwordSignin("ada@example.com", "correct horse battery"), "/ui/flows")
	wantRedirect(t, admin.post("/ui/users", "/ui/users/"+userID+"/remove", nil), "/ui/users")
	wantRedirect(t, ada.get("/ui/flows"), "/ui/signin")
}

// TestPasswordSigninSlowedInDashboard: the sixth wrong password in a
// minute is a 429 with Retry-After, even for the right password.
func TestPasswordSigninSlowedInDashboard(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	inv, err := e.svc.InviteUser(ctx, e.p.ID, "ada@example.com", automation.RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.AcceptInvitation(ctx, inv.SetupToken, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	for range automation.SigninFailuresPerEmail {
		wantPage(t, b.passwordSignin("ada@example.com", "wrong password!!"), http.StatusUnauthorized, "do not match")
	}
	p := b.passwordSignin("ada@example.com", "correct horse battery")
	wantPage(t, p, http.StatusTooManyRequests, "too many failed sign-ins")
	if p.header.Get("Retry-After") == "" {
		t.Error("no Retry-After on the slowed sign-in")
	}
}
