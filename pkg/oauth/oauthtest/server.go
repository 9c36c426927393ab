// Package oauthtest runs a real OAuth2 authorization server on loopback for
// tests, built from github.com/go-oauth2/oauth2: authorization code with
// PKCE (required), refresh tokens, a consent page, and a protected
// resource. Only tests import it.
package oauthtest

import (
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"

	"github.com/go-oauth2/oauth2/v4"
	"github.com/go-oauth2/oauth2/v4/manage"
	"github.com/go-oauth2/oauth2/v4/models"
	"github.com/go-oauth2/oauth2/v4/server"
	"github.com/go-oauth2/oauth2/v4/store"
)

// Client credentials the server knows.
const (
	ClientID     = "flow-service"
	ClientSecret = "s3cret-of-the-client"
)

// Server is a started authorization server. Its URLs are on 127.0.0.1.
type Server struct {
	URL          string // base
	AuthorizeURL string // /authorize: the consent page, then the redirect
	TokenURL     string // /token
	ResourceURL  string // /api/me: 200 {"user":…} with a valid access token, else 401

	srv     *server.Server
	manager *manage.Manager
	http    *httptest.Server

	mu       sync.Mutex
	refresh  []string // refresh tokens issued, for Revoke
	failWith int      // status the token endpoint answers with, 0 for none
	tokens   int      // token endpoint requests served
	traces   []string // the traceparent of each token request, "" for none
}

// Options shape a Server.
type Options struct {
	// RedirectBase is the client's registered redirect URL prefix.
	RedirectBase string
	// AccessTokenExp is the life of access tokens (default an hour). Less
	// than a minute makes the flow service refresh before every use.
	AccessTokenExp time.Duration
}

// Start starts a server; Close stops it.
func Start(opts Options) *Server {
	if opts.AccessTokenExp == 0 {
		opts.AccessTokenExp = time.Hour
	}
	s := &Server{}
	m := manage.NewDefaultManager()
	m.SetAuthorizeCodeTokenCfg(&manage.Config{AccessTokenExp: opts.AccessTokenExp, RefreshTokenExp: 24 * time.Hour, IsGenerateRefresh: true})
	m.SetRefreshTokenCfg(&manage.RefreshingConfig{AccessTokenExp: opts.AccessTokenExp, RefreshTokenExp: 24 * time.Hour,
		IsGenerateRefresh: true, IsRemoveAccess: true, IsRemoveRefreshing: true})
	m.MustTokenStorage(store.NewMemoryTokenStore())
	clients := store.NewClientStore()
	_ = clients.Set(ClientID, &models.Client{ID: ClientID, Secret: ClientSecret, Domain: opts.RedirectBase})
	m.MapClientStorage(clients)
	s.manager = m

	srv := server.NewDefaultServer(m)
	srv.Config.ForcePKCE = true
	srv.SetAllowGetAccessRequest(false)
	srv.SetClientInfoHandler(func(r *http.Request) (string, string, error) {
		if _, _, ok := r.BasicAuth(); ok {
			return server.ClientBasicHandler(r)
		}
		return server.ClientFormHandler(r)
	})
	// The consent form posts back here with allow=yes: the user is "alice".
	srv.SetUserAuthorizationHandler(func(w http.ResponseWriter, r *http.Request) (string, error) {
		if r.Method == http.MethodPost && r.FormValue("allow") == "yes" {
			return "alice", nil
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = consent.Execute(w, template.URL("/authorize?"+r.URL.RawQuery)) // this server's own URL
		return "", nil                                                     // no user yet: the page above is the answer
	})
	srv.SetExtensionFieldsHandler(func(ti oauth2.TokenInfo) map[string]any {
		s.mu.Lock()
		defer s.mu.Unlock()
		if r := ti.GetRefresh(); r != "" {
			s.refresh = append(s.refresh, r)
		}
		return nil
	})
	s.srv = srv

	mux := http.NewServeMux()
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		if err := srv.HandleAuthorizeRequest(w, r); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.tokens++
		s.traces = append(s.traces, r.Header.Get("traceparent"))
		fail := s.failWith
		s.mu.Unlock()
		if fail != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(fail)
			_, _ = w.Write([]byte(`{"error":"server_error"}`))
			return
		}
		_ = srv.HandleTokenRequest(w, r)
	})
	mux.HandleFunc("/api/me", func(w http.ResponseWriter, r *http.Request) {
		ti, err := srv.ValidationBearerToken(r)
		if err != nil {
			http.Error(w, `{"error":"invalid_token"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"user": ti.GetUserID(), "scope": ti.GetScope()})
	})
	s.http = httptest.NewServer(mux)
	s.URL = s.http.URL
	s.AuthorizeURL, s.TokenURL, s.ResourceURL = s.URL+"/authorize", s.URL+"/token", s.URL+"/api/me"
	return s
}

var consent = template.Must(template.New("consent").Parse(`<!doctype html>
<html><head><title>Authorize</title></head><body>
<h1>Allow Flow service to use your account?</h1>
<form method="post" action="{{.}}">
<input type="hidden" name="allow" value="yes">
<button type="submit" id="allow">Allow</button>
</form></body></html>`))

// Close stops the server.
func (s *Server) Close() { s.http.Close() }

// Revoke withdraws every grant, as a user revoking access at the provider
// does: refreshing any of them is then invalid_grant.
func (s *Server) Revoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.refresh {
		_ = s.manager.RemoveRefreshToken(context.Background(), r)
	}
}

// FailTokenRequests makes the token endpoint answer status (a 5xx for an
// outage, 401 or 403 for a rejected client); 0 restores it.
func (s *Server) FailTokenRequests(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWith = status
}

// TokenRequests is how many requests the token endpoint has served.
func (s *Server) TokenRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens
}

// IssuedRefreshTokens are the refresh tokens the server has issued, for
// tests that look for them where they must not be.
func (s *Server) IssuedRefreshTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.refresh...)
}

// TokenTraceparents is the traceparent header of each token request
// served, in order ("" where there was none).
func (s *Server) TokenTraceparents() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.traces...)
}

// Consent does what a user who allows access does with an authorization
// URL of this server: opens the consent page and clicks Allow. It returns
// where the server sends the browser back to (the client's redirect URL
// with code and state), without following it.
func (s *Server) Consent(authURL string) (*url.URL, error) {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("consent page: HTTP %d", resp.StatusCode)
	}
	u, err := url.Parse(authURL)
	if err != nil {
		return nil, err
	}
	resp, err = c.PostForm(s.URL+"/authorize?"+u.RawQuery, url.Values{"allow": {"yes"}})
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		return nil, fmt.Errorf("allow: HTTP %d, want a 302 back to the client", resp.StatusCode)
	}
	return url.Parse(resp.Header.Get("Location"))
}
