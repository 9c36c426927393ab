package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
)

// oidcProvider is a real OpenID provider on loopback: ZITADEL's OIDC
// library (github.com/zitadel/oidc, its op package, certified by the
// OpenID Foundation) with its example server's in-memory storage and login
// page, so that the code flow, PKCE, the nonce and the claims are a real
// provider's, not the test's. Its clients are added once flowd's callback
// address is known.
type oidcProvider struct {
	issuer  string
	clients map[string]*storage.Client
}

func startOIDCProvider(t *testing.T, users map[string]*storage.User) *oidcProvider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String() + "/"
	file := filepath.Join(t.TempDir(), "users.json")
	raw, _ := json.Marshal(users)
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := storage.StoreFromFile(file)
	if err != nil {
		t.Fatal(err)
	}
	p := &oidcProvider{issuer: issuer, clients: map[string]*storage.Client{}}
	// A nil logger: the example would make its own the process's default.
	router := exampleop.SetupServer(issuer, storage.NewStorageWithClients(store, p.clients), nil, false)
	srv := &http.Server{Handler: router}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p
}

// TestOIDCSignInWithARealProvider signs people in to flowd's dashboard in
// a real browser through a real OpenID provider: the authorization code
// flow with PKCE (the provider refuses a code exchange without the
// verifier), the provider's own login page, and the email from its
// UserInfo endpoint (this provider keeps it out of the ID token). An
// invited person with a verified email is signed in and named in the
// header; a person whose provider has not verified the email is refused;
// an authorization request whose nonce is not the one flowd sealed in its
// cookie is refused at the callback, though the provider signed its token.
func TestOIDCSignInWithARealProvider(t *testing.T) {
	t.Parallel() // its own flowd, provider and browser
	idp := startOIDCProvider(t, map[string]*storage.User{
		"u1": {ID: "u1", Username: "ada", Password: "correct horse", FirstName: "Ada", LastName: "Lovelace",
			Email: "ada@example.com", EmailVerified: true},
		"u2": {ID: "u2", Username: "grace", Password: "battery staple", FirstName: "Grace", LastName: "Hopper",
			Email: "grace@example.com", EmailVerified: false},
	})
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn", "FLOWD_OIDC_ISSUER="+idp.issuer,
		"FLOWD_OIDC_CLIENT_ID=flowd", "FLOWD_OIDC_CLIENT_SECRET=flowd-secret")
	idp.clients["flowd"] = storage.WebClient("flowd", "flowd-secret", p.base+"/ui/oidc/callback")
	key := initialKey(t, dir)
	for _, email := range []string{"ada@example.com", "grace@example.com"} {
		api(t, p, key, "POST", "/api/v1/users", fmt.Sprintf(`{"email": %q, "role": "editor"}`, email), 201, nil)
	}

	ctx := newBrowser(t)
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		browserDo(t, ctx, p, what, actions...)
	}
	text := func() string {
		t.Helper()
		return browserRun(t, ctx, p, "the page's text", chromedp.Text(chromedp.CSS("body")))
	}
	// login fills the provider's own form.
	login := func(user, password string) chromedp.Action[chromedp.Void] {
		return chromedp.Steps(
			chromedp.WaitVisible(chromedp.ID("username")),
			chromedp.SendKeys(chromedp.ID("username"), user),
			chromedp.SendKeys(chromedp.ID("password"), password),
			loads(chromedp.Submit(chromedp.ID("password"))))
	}
	signOut := func() {
		t.Helper()
		do("sign out", loads(chromedp.Click(chromedp.Search(`//button[normalize-space()="Sign out"]`))),
			chromedp.WaitVisible(chromedp.Search(`//a[contains(., "Sign in with your company account")]`)))
	}

	// An invited person with a verified email.
	do("start at the sign-in page", chromedp.Navigate(p.base+"/ui/signin"),
		loads(chromedp.Click(chromedp.Search(`//a[contains(., "Sign in with your company account")]`))))
	if loc := browserRun(t, ctx, p, "the provider's page", chromedp.Location()); !strings.HasPrefix(loc, idp.issuer+"login/") {
		t.Fatalf("the sign-in went to %s, want the provider's login page under %s", loc, idp.issuer)
	}
	do("sign in at the provider", login("ada", "correct horse"),
		chromedp.WaitVisible(chromedp.Search(`//h1[text()="Flows"]`)))
	if got := text(); !strings.Contains(got, "ada@example.com") {
		t.Fatalf("signed in through the provider, the header does not name the person:\n%s", got)
	}
	signOut()

	// The provider has not verified this person's email: refused.
	do("start again", loads(chromedp.Click(chromedp.Search(`//a[contains(., "Sign in with your company account")]`))))
	do("sign in with an unverified email", login("grace", "battery staple"),
		chromedp.WaitVisible(chromedp.Search(`//*[contains(., "has not verified your email address")]`)))
	if got := text(); strings.Contains(got, "Sign out") {
		t.Fatalf("an unverified email was signed in:\n%s", got)
	}

	// A nonce other than flowd's: flowd's own start sets its cookie (state,
	// nonce, PKCE verifier), the request sent to the provider carries
	// another nonce. The provider signs a token for that nonce; the
	// callback refuses it.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(p.base + "/ui/signin/oidc")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	auth, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound || !strings.HasPrefix(auth.String(), idp.issuer) {
		t.Fatalf("start = %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	q := auth.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" {
		t.Fatalf("the authorization request lacks PKCE, nonce or state: %s", auth)
	}
	q.Set("nonce", q.Get("nonce")+"-not-flowds")
	auth.RawQuery = q.Encode()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "flow_oidc" {
			cookie = c
		}
	}
	if cookie == nil {
		t.Fatalf("the start set no flow_oidc cookie: %v", resp.Header["Set-Cookie"])
	}
	u, _ := url.Parse(p.base)
	httpOnly := true
	do("the browser holds flowd's sign-in cookie", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.SetCookie, network.SetCookieParams{Name: cookie.Name, Value: cookie.Value,
			Domain: u.Hostname(), Path: cookie.Path, HTTPOnly: &httpOnly})
		return err
	}))
	do("sign in with another nonce", chromedp.Navigate(auth.String()), login("ada", "correct horse"),
		chromedp.WaitVisible(chromedp.Search(`//*[contains(., "not for this sign-in (nonce)")]`)))
	if got := text(); strings.Contains(got, "Sign out") {
		t.Fatalf("a token for another nonce was signed in:\n%s", got)
	}
}
