package oauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/datadir"
	"flowservice/pkg/engine"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/oauth"
	"flowservice/pkg/oauth/oauthtest"
)

const redirectURL = "http://127.0.0.1:9/ui/oauth/callback" // never dialled: the test carries the code over

type env struct {
	svc     *automation.Service
	project automation.Project
	idp     *oauthtest.Server
	dir     *datadir.Dir
}

// newEnv is a Service on a real data directory with one OAuth2 app on a
// real authorization server on loopback.
func newEnv(t *testing.T, accessTokenExp time.Duration, rt http.RoundTripper) *env {
	t.Helper()
	ctx := context.Background()
	idp := oauthtest.Start(oauthtest.Options{RedirectBase: "http://127.0.0.1:9", AccessTokenExp: accessTokenExp})
	t.Cleanup(idp.Close)
	fe := flowtest.New(t, flowtest.Options{OAuth: oauth.New(rt)})
	svc, dir := fe.Svc, fe.Dir
	if _, err := svc.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := svc.ProjectByName(ctx, automation.DefaultProject)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddOAuthApp(ctx, automation.OAuthAppInput{
		Name: "idp", ClientID: oauthtest.ClientID, ClientSecret: oauthtest.ClientSecret,
		AuthorizeURL: idp.AuthorizeURL, TokenURL: idp.TokenURL, Scopes: []string{"read write"},
	}); err != nil {
		t.Fatal(err)
	}
	return &env{svc: svc, project: p, idp: idp, dir: dir}
}

// authorize runs the authorization code flow as the dashboard does, and
// returns the completed connection.
func (e *env) authorize(t *testing.T, reconnect string) automation.Connection {
	t.Helper()
	ctx := context.Background()
	start, err := e.svc.StartOAuth(ctx, "idp", redirectURL)
	if err != nil {
		t.Fatal(err)
	}
	back, err := e.idp.Consent(start.URL)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Query().Get("state"); got != start.State {
		t.Fatalf("the provider sent state %q back, want %q", got, start.State)
	}
	c, err := e.svc.CompleteOAuth(ctx, e.project, automation.OAuthCompletion{
		App: "idp", Reconnect: reconnect, RedirectURL: redirectURL, Code: back.Query().Get("code"), Verifier: start.Verifier,
	})
	if err != nil {
		t.Fatalf("CompleteOAuth: %v", err)
	}
	return c
}

func TestAuthorizeURL(t *testing.T) {
	e := newEnv(t, time.Hour, http.DefaultTransport)
	start, err := e.svc.StartOAuth(context.Background(), "idp", redirectURL)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(start.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	want := map[string]string{
		"response_type": "code", "client_id": oauthtest.ClientID, "redirect_uri": redirectURL,
		"scope": "read write", "state": start.State, "code_challenge_method": "S256",
	}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("authorize URL %s = %q, want %q", k, q.Get(k), v)
		}
	}
	if len(q.Get("code_challenge")) != 43 || q.Get("code_challenge") == start.Verifier {
		t.Errorf("code_challenge = %q: want the S256 of the verifier, never the verifier", q.Get("code_challenge"))
	}
	if !strings.HasPrefix(start.URL, e.idp.AuthorizeURL+"?") || len(start.State) < 43 {
		t.Errorf("start = %+v", start)
	}
}

// TestConnectionLifecycle walks the connection states of
// docs/api.md ("Connection states") against the real server: connect,
// use with refresh, EXPIRED on an outage, ACTIVE on reconnect, ERROR on a
// 401, REVOKED on invalid_grant, ACTIVE again.
func TestConnectionLifecycle(t *testing.T) {
	ctx := context.Background()
	// Access tokens shorter than the refresh margin: every use refreshes.
	e := newEnv(t, 30*time.Second, http.DefaultTransport)
	c := e.authorize(t, "")
	if c.Type != automation.ConnectionOAuth2 || c.App != "idp" || c.Status != automation.ConnectionActive || c.Name != "idp" {
		t.Fatalf("connection = %+v, want an ACTIVE OAUTH2 connection of app idp", c)
	}

	use := func() (automation.ConnectionValue, error) {
		_, v, err := e.svc.ConnectionCredential(ctx, e.project.ID, c.ID)
		return v, err
	}
	status := func() automation.ConnectionStatus {
		got, err := e.svc.Connection(ctx, e.project, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.Status
	}
	callResource := func(v automation.ConnectionValue) int {
		req, _ := http.NewRequest("GET", e.idp.ResourceURL, nil)
		req.Header.Set(v.Header, *v.Prefix+v.APIKey.Reveal())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	before := e.idp.TokenRequests()
	v1, err := use()
	if err != nil {
		t.Fatalf("first use: %v", err)
	}
	v2, err := use()
	if err != nil {
		t.Fatalf("second use: %v", err)
	}
	if e.idp.TokenRequests() != before+2 || v1.APIKey == v2.APIKey {
		t.Errorf("two uses of a nearly expired token made %d token requests (want 2) and tokens equal: %v", e.idp.TokenRequests()-before, v1.APIKey == v2.APIKey)
	}
	if got := callResource(v2); got != http.StatusOK {
		t.Errorf("the refreshed access token gets %d from the resource, want 200", got)
	}
	if got := callResource(v1); got != http.StatusUnauthorized {
		t.Errorf("the replaced access token gets %d, want 401 (the provider removed it)", got)
	}

	steps := []struct {
		name     string
		provider func()
		want     automation.ConnectionStatus
		wantErr  string
	}{
		{"outage", func() { e.idp.FailTokenRequests(http.StatusServiceUnavailable) }, automation.ConnectionExpired, "is EXPIRED"},
		{"client rejected", func() { e.idp.FailTokenRequests(http.StatusUnauthorized) }, automation.ConnectionError, "is ERROR"},
		{"revoked by the user", func() { e.idp.FailTokenRequests(0); e.idp.Revoke() }, automation.ConnectionRevoked, "invalid_grant"},
	}
	for _, st := range steps {
		st.provider()
		_, err := use()
		var ae *automation.Error
		if !errors.As(err, &ae) || !strings.Contains(ae.Message, c.ID) || !strings.Contains(ae.Message, st.wantErr) {
			t.Fatalf("%s: use = %v, want an error naming %s and %q", st.name, err, c.ID, st.wantErr)
		}
		if got := status(); got != st.want {
			t.Fatalf("%s: status %s, want %s", st.name, got, st.want)
		}
		if st.want != automation.ConnectionError { // EXPIRED and REVOKED refuse at once, without the provider
			n := e.idp.TokenRequests()
			if _, err := use(); err == nil || e.idp.TokenRequests() != n {
				t.Errorf("%s: a second use: err %v, %d token requests; want a refusal without asking the provider", st.name, err, e.idp.TokenRequests()-n)
			}
		}
		e.idp.FailTokenRequests(0)
		again := e.authorize(t, c.ID)
		if again.ID != c.ID || again.Status != automation.ConnectionActive {
			t.Fatalf("%s: reconnect = %+v, want %s ACTIVE", st.name, again, c.ID)
		}
		if v, err := use(); err != nil || callResource(v) != http.StatusOK {
			t.Fatalf("%s: after reconnecting: %v", st.name, err)
		}
	}
}

// TestTokenEndpointBehindTheSSRFGuard: with the engine's guarded transport
// a token endpoint on loopback is refused like an HTTP step would be, and
// no connection is made.
func TestTokenEndpointBehindTheSSRFGuard(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, time.Hour, engine.GuardedTransport(false))
	start, err := e.svc.StartOAuth(ctx, "idp", redirectURL)
	if err != nil {
		t.Fatal(err)
	}
	back, err := e.idp.Consent(start.URL) // the browser may reach it; the server may not
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.CompleteOAuth(ctx, e.project, automation.OAuthCompletion{
		App: "idp", RedirectURL: redirectURL, Code: back.Query().Get("code"), Verifier: start.Verifier,
	})
	if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), "could not be reached") {
		t.Fatalf("exchange through the guard: err = %v, want a refusal", err)
	}
	if e.idp.TokenRequests() != 0 {
		t.Errorf("the token endpoint was reached %d times through the guard", e.idp.TokenRequests())
	}
	list, err := e.svc.ListConnections(ctx, e.project, automation.PageRequest{})
	if err != nil || len(list.Data) != 0 {
		t.Errorf("connections after a refused exchange = %+v, %v; want none", list.Data, err)
	}
}

// TestWrongVerifierOrCode: the provider refuses a code with another
// verifier (PKCE), and a code used twice.
func TestWrongVerifierOrCode(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, time.Hour, http.DefaultTransport)
	start, _ := e.svc.StartOAuth(ctx, "idp", redirectURL)
	back, err := e.idp.Consent(start.URL)
	if err != nil {
		t.Fatal(err)
	}
	in := automation.OAuthCompletion{App: "idp", RedirectURL: redirectURL, Code: back.Query().Get("code"), Verifier: "x" + start.Verifier[1:]}
	if _, err := e.svc.CompleteOAuth(ctx, e.project, in); !errors.Is(err, automation.ErrInvalid) {
		t.Errorf("wrong verifier: err = %v, want a refusal", err)
	}
	in.Verifier = start.Verifier
	if _, err := e.svc.CompleteOAuth(ctx, e.project, in); err != nil {
		// go-oauth2 removes a code once it was presented, even with a bad verifier.
		if !strings.Contains(err.Error(), "invalid_grant") {
			t.Errorf("code after a failed attempt: %v", err)
		}
	}
}

func TestOAuthApps(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, time.Hour, http.DefaultTransport)
	tests := []struct {
		name string
		in   automation.OAuthAppInput
		want string
	}{
		{"taken", automation.OAuthAppInput{Name: "idp", ClientID: "c", ClientSecret: "s", AuthorizeURL: "https://a", TokenURL: "https://t"}, "exists"},
		{"bad name", automation.OAuthAppInput{Name: "Git Hub", ClientID: "c", ClientSecret: "s", AuthorizeURL: "https://a", TokenURL: "https://t"}, "lower-case"},
		{"no secret", automation.OAuthAppInput{Name: "gh", ClientID: "c", AuthorizeURL: "https://a", TokenURL: "https://t"}, "client secret"},
		{"relative URL", automation.OAuthAppInput{Name: "gh", ClientID: "c", ClientSecret: "s", AuthorizeURL: "/authorize", TokenURL: "https://t"}, "authorize URL"},
		{"ftp token URL", automation.OAuthAppInput{Name: "gh", ClientID: "c", ClientSecret: "s", AuthorizeURL: "https://a", TokenURL: "ftp://t"}, "token URL"},
	}
	for _, tt := range tests {
		if _, err := e.svc.AddOAuthApp(ctx, tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
	apps, err := e.svc.OAuthApps(ctx)
	if err != nil || len(apps) != 1 || apps[0].Name != "idp" || strings.Join(apps[0].Scopes, ",") != "read,write" {
		t.Fatalf("OAuthApps = %+v, %v", apps, err)
	}
	if _, err := e.dir.Secrets.Secret(ctx, "_operator", automation.OAuthAppSecretName("idp")); err != nil {
		t.Errorf("client secret not in the secret store: %v", err)
	}
	if err := e.svc.RemoveOAuthApp(ctx, "idp"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dir.Secrets.Secret(ctx, "_operator", automation.OAuthAppSecretName("idp")); !errors.Is(err, automation.ErrNotFound) {
		t.Errorf("client secret after remove: err = %v, want ErrNotFound", err)
	}
	if err := e.svc.RemoveOAuthApp(ctx, "idp"); !errors.Is(err, automation.ErrNotFound) {
		t.Errorf("second remove: err = %v, want ErrNotFound", err)
	}
}

// TestConcurrentRefreshes: runs that use one connection at once refresh it
// one after the other, so a provider that rotates refresh tokens (this one
// does) never sees one used twice, and the connection stays ACTIVE.
func TestConcurrentRefreshes(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, 30*time.Second, http.DefaultTransport)
	c := e.authorize(t, "")
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			_, _, err := e.svc.ConnectionCredential(ctx, e.project.ID, c.ID)
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Errorf("concurrent use: %v", err)
		}
	}
	if got, _ := e.svc.Connection(ctx, e.project, c.ID); got.Status != automation.ConnectionActive {
		t.Errorf("after concurrent refreshes: %s, want ACTIVE", got.Status)
	}
}
