package dashboard

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// testProvider is an OpenID Connect provider on loopback: discovery, JWKS,
// an authorization endpoint that approves at once, and a token endpoint
// that checks the PKCE verifier and answers an RS256 ID token.
type testProvider struct {
	*httptest.Server
	key *rsa.PrivateKey
	mu  sync.Mutex
	// what the next ID token says
	email     string
	verified  any
	badNonce  bool
	challenge map[string]string // code → code_challenge
	nonces    map[string]string // code → nonce
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func newTestProvider(t *testing.T) *testProvider {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &testProvider{key: key, challenge: map[string]string{}, nonces: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": p.URL, "authorization_endpoint": p.URL + "/authorize", "token_endpoint": p.URL + "/token",
			"jwks_uri": p.URL + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"},
			"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "k1", "alg": "RS256", "use": "sig",
			"n": b64(key.N.Bytes()), "e": b64(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("client_id") != "flows" {
			http.Error(w, "want PKCE S256, a nonce and the client", http.StatusBadRequest)
			return
		}
		code := automation.NewID("code_")
		p.mu.Lock()
		p.challenge[code], p.nonces[code] = q.Get("code_challenge"), q.Get("nonce")
		p.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+code+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		code := r.PostFormValue("code")
		sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.challenge[code] == "" || b64(sum[:]) != p.challenge[code] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		nonce := p.nonces[code]
		if p.badNonce {
			nonce = "another"
		}
		delete(p.challenge, code)
		now := time.Now()
		claims := map[string]any{"iss": p.URL, "aud": "flows", "sub": "s-" + p.email, "iat": now.Unix(),
			"exp": now.Add(time.Hour).Unix(), "nonce": nonce, "email": p.email, "email_verified": p.verified}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 3600,
			"id_token": p.sign(t, claims)})
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	return p
}

func (p *testProvider) sign(t *testing.T, claims map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"})
	c, _ := json.Marshal(claims)
	input := b64(h) + "." + b64(c)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(rand.Reader, p.key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + b64(sig)
}

func (p *testProvider) next(email string, verified any, badNonce bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.email, p.verified, p.badNonce = email, verified, badNonce
}

// oidcSignin walks a browser through the code flow: the dashboard's start,
// the provider's authorization, the dashboard's callback.
func (b *browser) oidcSignin(t *testing.T, provider *testProvider) page {
	t.Helper()
	start := b.get("/ui/signin/oidc")
	if start.status != http.StatusFound || !strings.HasPrefix(start.header.Get("Location"), provider.URL+"/authorize") {
		t.Fatalf("start: %d %q", start.status, start.header.Get("Location"))
	}
	resp, err := b.hc.Get(start.header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || cb.Path != "/ui/oidc/callback" {
		t.Fatalf("provider answered %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return b.get(cb.RequestURI())
}

// TestOIDCSignIn: the authorization code flow with PKCE against a real
// provider on loopback signs in an invited person by verified email; a
// wrong nonce, an unverified email and a stranger are refused; a stranger
// of an allowed domain joins as a viewer.
func TestOIDCSignIn(t *testing.T) {
	provider := newTestProvider(t)
	fe := flowtest.New(t, flowtest.Options{})
	svc := fe.Svc
	ctx := context.Background()
	acme, err := svc.CreateProject(ctx, "acme", automation.PlanTeam)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.InviteUser(ctx, acme.ID, "ada@example.com", automation.RoleEditor); err != nil {
		t.Fatal(err)
	}
	doc, _ := os.ReadFile("../httpapi/openapi.json")
	srv := httptest.NewServer(New(svc, Options{Key: fe.Dir.CursorKey, OpenAPI: doc, OIDC: &OIDC{
		Issuer: provider.URL, ClientID: "flows", ClientSecret: "s3cret",
		AllowedDomains: []string{"corp.example"}, ViewerProject: "acme",
	}}))
	t.Cleanup(srv.Close)
	e := &env{srv: srv, svc: svc, store: fe.Store, p: acme}

	provider.next("Ada@example.com", true, false)
	b := e.browser(t)
	wantPage(t, b.get("/ui/signin"), http.StatusOK, "Sign in with your company account")
	wantRedirect(t, b.oidcSignin(t, provider), "/ui/flows")
	wantPage(t, b.get("/ui/flows"), http.StatusOK, "ada@example.com", `>editor</span>`)

	provider.next("ada@example.com", true, true)
	wantPage(t, e.browser(t).oidcSignin(t, provider), http.StatusUnauthorized, "nonce")

	provider.next("ada@example.com", false, false)
	wantPage(t, e.browser(t).oidcSignin(t, provider), http.StatusUnauthorized, "not verified")
	provider.next("ada@example.com", nil, false) // no claim at all
	wantPage(t, e.browser(t).oidcSignin(t, provider), http.StatusUnauthorized, "not verified")

	provider.next("eve@elsewhere.example", true, false)
	wantPage(t, e.browser(t).oidcSignin(t, provider), http.StatusUnauthorized, "ask an admin to invite you")

	provider.next("bob@corp.example", "true", false)
	bob := e.browser(t)
	wantRedirect(t, bob.oidcSignin(t, provider), "/ui/flows")
	wantPage(t, bob.get("/ui/flows"), http.StatusOK, "bob@corp.example", `>viewer</span>`)

	// A callback without the start's cookie (another browser) is refused.
	provider.next("ada@example.com", true, false)
	first := e.browser(t)
	start := first.get("/ui/signin/oidc")
	resp, err := first.hc.Get(start.header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cb, _ := url.Parse(resp.Header.Get("Location"))
	wantPage(t, e.browser(t).get(cb.RequestURI()), http.StatusBadRequest, "did not start in this browser")
}
