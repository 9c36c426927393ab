package awsapp_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
)

// fakeOIDC is an OpenID Connect provider on loopback: discovery, JWKS, an
// authorization endpoint that approves at once, and a token endpoint that
// takes only the client secret stored in Secrets Manager and the PKCE
// verifier of the challenge, and answers an RS256 ID token for email.
type fakeOIDC struct {
	*httptest.Server
	key    *rsa.PrivateKey
	secret string
	email  string

	mu        sync.Mutex
	challenge map[string]string // code → code_challenge
	nonce     map[string]string // code → nonce
	exchanges int
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func newFakeOIDC(t *testing.T, clientSecret, email string) *fakeOIDC {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &fakeOIDC{key: key, secret: clientSecret, email: email, challenge: map[string]string{}, nonce: map[string]string{}}
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
			"n": b64url(key.N.Bytes()), "e": b64url(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code := automation.NewID("code_")
		p.mu.Lock()
		p.challenge[code], p.nonce[code] = q.Get("code_challenge"), q.Get("nonce")
		p.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+code+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
		}
		code := r.PostFormValue("code")
		sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
		p.mu.Lock()
		defer p.mu.Unlock()
		p.exchanges++
		if id != "flows" || secret != p.secret || p.challenge[code] == "" || b64url(sum[:]) != p.challenge[code] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
			return
		}
		now := time.Now()
		idToken := p.sign(t, map[string]any{
			"iss": p.URL, "sub": "u-" + p.email, "aud": "flows", "iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
			"nonce": p.nonce[code], "email": p.email, "email_verified": true,
		})
		delete(p.challenge, code)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at", "token_type": "Bearer", "expires_in": 300, "id_token": idToken})
	})
	p.Server = httptest.NewServer(mux)
	t.Cleanup(p.Close)
	return p
}

func (p *fakeOIDC) sign(t *testing.T, claims map[string]any) string {
	head, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"})
	body, _ := json.Marshal(claims)
	in := b64url(head) + "." + b64url(body)
	sum := sha256.Sum256([]byte(in))
	sig, err := rsa.SignPKCS1v15(rand.Reader, p.key, crypto.SHA256, sum[:])
	if err != nil {
		t.Error(err)
	}
	return in + "." + b64url(sig)
}

// TestOIDCSignInOnLambda signs a person in to the dashboard through the api
// function's handler, built as its cold start builds it from the template's
// OIDC_* settings on moto: the client secret is read from Secrets Manager
// (the provider takes no other), the sign-in starts with a redirect to the
// provider carrying PKCE, a nonce and the stage's callback, and the
// callback exchanges the code, finds the invited person in DynamoDB and
// opens a session the dashboard then serves.
func TestOIDCSignInOnLambda(t *testing.T) {
	ctx := context.Background()
	st := newMotoStage(t, "oidc", awsapp.Config{Stage: "test", LogOutput: io.Discard})
	clientSecret := "oidc-client-" + automation.NewID("s_")
	provider := newFakeOIDC(t, clientSecret, "ada@example.com")

	sec, err := secretsmanager.NewFromConfig(st.AWS).CreateSecret(ctx, &secretsmanager.CreateSecretInput{
		Name: aws.String(st.Prefix + "-oidc-client"), SecretString: aws.String(clientSecret + "\n"), // as typed in a console
	})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OIDC_ISSUER": provider.URL, "OIDC_CLIENT_ID": "flows", "OIDC_CLIENT_SECRET_ARN": *sec.ARN,
		"OIDC_ALLOWED_DOMAINS": "", "OIDC_VIEWER_PROJECT": "acme"}
	oidcCfg, err := awsapp.ConfigFrom(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.Cfg
	cfg.OIDC = oidcCfg.OIDC

	admin, err := awsdev.NewAdminService(st.AWS, st.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	acme, err := admin.ProjectByName(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.InviteUser(ctx, acme.ID, "ada@example.com", automation.RoleEditor); err != nil {
		t.Fatal(err)
	}
	api, err := management.NewHandler(ctx, st.AWS, cfg)
	if err != nil {
		t.Fatal(err)
	}

	const host = "abc123.execute-api.us-east-1.amazonaws.com"
	get := func(path, query, cookie string) events.APIGatewayProxyResponse {
		t.Helper()
		qs := map[string][]string{}
		if query != "" {
			v, _ := url.ParseQuery(query)
			qs = v
		}
		h := map[string][]string{"Host": {host}, "Accept": {"text/html"}}
		if cookie != "" {
			h["Cookie"] = []string{cookie}
		}
		resp, err := api(ctx, events.APIGatewayProxyRequest{HTTPMethod: "GET", Path: path, MultiValueHeaders: h,
			MultiValueQueryStringParameters: qs,
			RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: "GET", Stage: "prod", Path: "/prod" + path, DomainName: host,
				Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}})
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp
	}
	header := func(r events.APIGatewayProxyResponse, k string) []string {
		if v := r.MultiValueHeaders[k]; len(v) > 0 {
			return v
		}
		if v, ok := r.Headers[k]; ok {
			return []string{v}
		}
		return nil
	}
	// cookies keeps the name=value of each Set-Cookie that sets a value.
	cookies := func(r events.APIGatewayProxyResponse) string {
		var out []string
		for _, c := range header(r, "Set-Cookie") {
			nv, _, _ := strings.Cut(c, ";")
			if !strings.HasSuffix(nv, "=") {
				out = append(out, nv)
			}
		}
		return strings.Join(out, "; ")
	}

	signin := get("/ui/signin", "", "")
	if signin.StatusCode != http.StatusOK || !strings.Contains(signin.Body, "/prod/ui/signin/oidc") {
		t.Fatalf("GET /ui/signin = %d; want the sign-in page offering the company account:\n%.2000s", signin.StatusCode, signin.Body)
	}
	start := get("/ui/signin/oidc", "", "")
	loc := header(start, "Location")
	if start.StatusCode != http.StatusFound || len(loc) == 0 || !strings.HasPrefix(loc[0], provider.URL+"/authorize?") {
		t.Fatalf("GET /ui/signin/oidc = %d, Location %v; want a redirect to the provider", start.StatusCode, loc)
	}
	authz, _ := url.Parse(loc[0])
	q := authz.Query()
	if q.Get("client_id") != "flows" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" ||
		q.Get("nonce") == "" || q.Get("state") == "" || q.Get("redirect_uri") != "https://"+host+"/prod/ui/oidc/callback" {
		t.Fatalf("authorization request %v: want the client, PKCE S256, a nonce, a state and the stage's callback", q)
	}
	startCookie := cookies(start)
	if !strings.HasPrefix(startCookie, "flow_oidc=") {
		t.Fatalf("the start set cookies %q, want flow_oidc", startCookie)
	}

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(loc[0])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, _ := url.Parse(resp.Header.Get("Location"))
	if back.Path != "/prod/ui/oidc/callback" {
		t.Fatalf("the provider sent the browser to %s", back)
	}
	cb := get("/ui/oidc/callback", back.RawQuery, startCookie)
	if cb.StatusCode != http.StatusSeeOther || len(header(cb, "Location")) == 0 || header(cb, "Location")[0] != "/prod/ui/flows" {
		t.Fatalf("GET /ui/oidc/callback = %d, Location %v:\n%.2000s", cb.StatusCode, header(cb, "Location"), cb.Body)
	}
	session := cookies(cb)
	if !strings.Contains(session, "=") {
		t.Fatalf("no session cookie after the callback: %v", header(cb, "Set-Cookie"))
	}
	page := get("/ui/flows", "", session)
	if page.StatusCode != http.StatusOK || !strings.Contains(page.Body, "ada@example.com") || !strings.Contains(page.Body, ">editor</span>") {
		t.Fatalf("GET /ui/flows signed in = %d; want Ada as editor:\n%.2000s", page.StatusCode, page.Body)
	}
	provider.mu.Lock()
	exchanges := provider.exchanges
	provider.mu.Unlock()
	if exchanges != 1 {
		t.Errorf("the provider saw %d code exchanges, want 1", exchanges)
	}

	// A client secret missing from Secrets Manager stops the cold start
	// with the secret's name, not the first sign-in.
	cfg.OIDC.ClientSecretARN = strings.Replace(*sec.ARN, "-oidc-client", "-oidc-gone", 1)
	if _, err := management.NewHandler(ctx, st.AWS, cfg); err == nil || !strings.Contains(err.Error(), "OpenID Connect client secret") {
		t.Errorf("a missing client secret: %v, want the cold start refused naming it", err)
	}
}
