package dashboard

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/oauth/oauthtest"
)

// callback requests the OAuth2 callback as the provider's redirect does: a
// navigation from another site, so only the Lax oauth cookie comes along,
// never the Strict session cookie.
func (b *browser) callback(back *url.URL, oauthCookieValue string) page {
	b.t.Helper()
	req, err := http.NewRequest("GET", back.String(), nil)
	if err != nil {
		b.t.Fatal(err)
	}
	if oauthCookieValue != "" {
		req.AddCookie(&http.Cookie{Name: oauthCookie, Value: oauthCookieValue})
	}
	resp, err := (&http.Client{CheckRedirect: b.hc.CheckRedirect}).Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	_, _ = io.Copy(&sb, resp.Body)
	return page{status: resp.StatusCode, header: resp.Header, body: sb.String()}
}

// connect clicks "Connect app" (or Reconnect) and allows access at the
// provider; it returns where the provider sends the browser back, and the
// oauth cookie the dashboard set.
func (b *browser) connect(idp *oauthtest.Server, path string) (*url.URL, string) {
	b.t.Helper()
	p := b.get(path)
	loc := p.header.Get("Location")
	if p.status != http.StatusFound || !strings.HasPrefix(loc, idp.AuthorizeURL+"?") {
		b.t.Fatalf("GET %s = %d to %q, want 302 to the authorize URL", path, p.status, loc)
	}
	var cookie string
	for _, c := range (&http.Response{Header: p.header}).Cookies() {
		if c.Name == oauthCookie {
			cookie = c.Value
			if c.SameSite != http.SameSiteLaxMode || !c.HttpOnly || c.Path != "/ui/oauth" {
				b.t.Errorf("oauth cookie %+v: want HttpOnly, SameSite=Lax, Path /ui/oauth", c)
			}
		}
	}
	if cookie == "" {
		b.t.Fatalf("GET %s set no %s cookie", path, oauthCookie)
	}
	back, err := idp.Consent(loc)
	if err != nil {
		b.t.Fatal(err)
	}
	return back, cookie
}

func TestOAuth2Connect(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	idp := oauthtest.Start(oauthtest.Options{RedirectBase: e.srv.URL})
	defer idp.Close()
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	wantPage(t, b.get("/ui/connections"), http.StatusOK, "No OAuth2 apps are configured", "flowctl oauth-apps add")

	if _, err := e.svc.AddOAuthApp(ctx, automation.OAuthAppInput{
		Name: "idp", ClientID: oauthtest.ClientID, ClientSecret: oauthtest.ClientSecret,
		AuthorizeURL: idp.AuthorizeURL, TokenURL: idp.TokenURL, Scopes: []string{"read"},
	}); err != nil {
		t.Fatal(err)
	}
	wantPage(t, b.get("/ui/connections"), http.StatusOK, `href="/ui/connections/connect/idp"`, "Connect idp")

	// The authorization request carries what authorization code with PKCE
	// needs: response type, client, redirect URL, scope, state, S256 challenge.
	p := b.get("/ui/connections/connect/idp")
	u, _ := url.Parse(p.header.Get("Location"))
	q := u.Query()
	for k, v := range map[string]string{"response_type": "code", "client_id": oauthtest.ClientID,
		"redirect_uri": e.srv.URL + "/ui/oauth/callback", "scope": "read", "code_challenge_method": "S256"} {
		if q.Get(k) != v {
			t.Errorf("authorize URL %s = %q, want %q", k, q.Get(k), v)
		}
	}
	if q.Get("state") == "" || q.Get("code_challenge") == "" {
		t.Errorf("authorize URL lacks state or code_challenge: %s", u)
	}

	back, cookie := b.connect(idp, "/ui/connections/connect/idp")
	if !strings.HasPrefix(back.String(), e.srv.URL+"/ui/oauth/callback?") {
		t.Fatalf("the provider sends the browser to %s", back)
	}
	// A state that is not the one this browser started with is refused.
	forged := *back
	fq := forged.Query()
	fq.Set("state", "forged")
	forged.RawQuery = fq.Encode()
	wantPage(t, b.callback(&forged, cookie), http.StatusBadRequest, "did not start in this browser")
	wantPage(t, b.callback(back, ""), http.StatusBadRequest, "did not start in this browser")
	wantPage(t, b.callback(back, cookie+"x"), http.StatusBadRequest, "did not start in this browser")

	done := b.callback(back, cookie)
	wantPage(t, done, http.StatusOK, "Connected idp", `<meta http-equiv="refresh" content="0;url=/ui/connections?done=connected&amp;connection=con_`, "ACTIVE")
	list, err := e.svc.ListConnections(ctx, e.p, automation.PageRequest{})
	if err != nil || len(list.Data) != 1 {
		t.Fatalf("connections = %+v, %v; want one", list.Data, err)
	}
	c := list.Data[0]
	if c.Type != automation.ConnectionOAuth2 || c.App != "idp" || c.Status != automation.ConnectionActive {
		t.Fatalf("connection = %+v", c)
	}
	if _, v, err := e.svc.ConnectionCredential(ctx, e.p.ID, c.ID); err != nil || v.APIKey == "" {
		t.Fatalf("credential of the new connection: %v", err)
	}
	// The code is used once: replaying the callback makes nothing.
	wantPage(t, b.callback(back, cookie), http.StatusBadRequest, "did not grant access")

	page := b.get("/ui/connections")
	wantPage(t, page, http.StatusOK, "OAUTH2", `/ui/connections/connect/idp?connection=`+c.ID, "Reconnect")

	// Reconnect: after the user revoked access the connection is REVOKED
	// at its next use; re-authorizing makes the same connection ACTIVE.
	if err := e.svc.SetConnectionStatus(ctx, e.p.ID, c.ID, automation.ConnectionRevoked); err != nil {
		t.Fatal(err)
	}
	back, cookie = b.connect(idp, "/ui/connections/connect/idp?connection="+c.ID)
	wantPage(t, b.callback(back, cookie), http.StatusOK, "Connected idp", c.ID)
	if got, _ := e.svc.Connection(ctx, e.p, c.ID); got.Status != automation.ConnectionActive {
		t.Errorf("after reconnecting: %s, want ACTIVE", got.Status)
	}
	if l, _ := e.svc.ListConnections(ctx, e.p, automation.PageRequest{}); len(l.Data) != 1 {
		t.Errorf("reconnecting made a new connection: %d", len(l.Data))
	}

	// Another project's connection cannot be reconnected from here: its
	// owner connects it in a browser of its own; asking for it from this
	// project is a 404, while its own project may reconnect it.
	other, otherKey := e.project(t, "other", automation.PlanFree)
	ob := e.browser(t)
	wantRedirect(t, ob.signin(otherKey), "/ui/flows")
	oback, ocookie := ob.connect(idp, "/ui/connections/connect/idp")
	wantPage(t, ob.callback(oback, ocookie), http.StatusOK, "Connected idp")
	theirs, err := e.svc.ListConnections(ctx, other, automation.PageRequest{})
	if err != nil || len(theirs.Data) != 1 {
		t.Fatalf("the other project's connections = %+v, %v; want one", theirs.Data, err)
	}
	reconnect := "/ui/connections/connect/idp?connection=" + theirs.Data[0].ID
	wantPage(t, b.get(reconnect), http.StatusNotFound)
	if p := ob.get(reconnect); p.status != http.StatusFound {
		t.Errorf("GET %s from its own project = %d, want 302 to the provider", reconnect, p.status)
	}
	wantPage(t, b.get("/ui/connections/connect/nope"), http.StatusNotFound)

	// The API still refuses OAUTH2 connections, naming the dashboard.
	if _, err := e.svc.CreateConnection(ctx, e.p, automation.ConnectionInput{Name: "x", App: "idp", Type: automation.ConnectionOAuth2}); err == nil || !strings.Contains(err.Error(), "dashboard") {
		t.Errorf("CreateConnection OAUTH2: %v, want a refusal naming the dashboard", err)
	}
}

// TestOAuth2CallbackAfterRevocation: a key revoked between Connect and the
// callback makes no connection.
func TestOAuth2CallbackAfterRevocation(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	idp := oauthtest.Start(oauthtest.Options{RedirectBase: e.srv.URL})
	defer idp.Close()
	if _, err := e.svc.AddOAuthApp(ctx, automation.OAuthAppInput{
		Name: "idp", ClientID: oauthtest.ClientID, ClientSecret: oauthtest.ClientSecret,
		AuthorizeURL: idp.AuthorizeURL, TokenURL: idp.TokenURL,
	}); err != nil {
		t.Fatal(err)
	}
	b := e.browser(t)
	b.signin(e.key)
	back, cookie := b.connect(idp, "/ui/connections/connect/idp")
	keys, err := e.svc.APIKeys(ctx, e.p.ID)
	if err != nil || len(keys) != 1 {
		t.Fatal(keys, err)
	}
	if err := e.svc.RevokeAPIKey(ctx, keys[0].ID); err != nil {
		t.Fatal(err)
	}
	wantRedirect(t, b.callback(back, cookie), "/ui/signin?why=revoked")
	if l, _ := e.svc.ListConnections(ctx, e.p, automation.PageRequest{}); len(l.Data) != 0 {
		t.Errorf("a revoked key's callback made %d connections", len(l.Data))
	}
}
