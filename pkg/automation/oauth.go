package automation

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// OAuthApp is an OAuth2 client the operator configured (flowctl oauth-apps
// add): the provider's endpoints and this service's client ID there. Apps
// are operator-wide: every project may connect through them. The client
// secret lives in the Secrets store under OAuthAppSecretName(Name), never
// in this struct.
type OAuthApp struct {
	Name         string    `json:"name"`
	ClientID     string    `json:"clientId"`
	AuthorizeURL string    `json:"authorizeUrl"`
	TokenURL     string    `json:"tokenUrl"`
	Scopes       []string  `json:"scopes"`
	Created      time.Time `json:"created"`
}

// OAuthAppInput is what the operator gives to add an app.
type OAuthAppInput struct {
	Name, ClientID, ClientSecret, AuthorizeURL, TokenURL string
	Scopes                                               []string
}

// OAuthToken is what a provider's token endpoint granted.
type OAuthToken struct {
	AccessToken  Secret
	RefreshToken Secret    // empty when the provider gave none
	TokenType    string    // "Bearer" when the provider says nothing else
	Expiry       time.Time // zero: the access token does not expire
}

// OAuthAppStore keeps the operator's OAuth2 apps, shared by all projects.
type OAuthAppStore interface {
	// PutOAuthApp creates the app a.Name, or fails with ErrConflict if an
	// app of that name exists.
	PutOAuthApp(ctx context.Context, a OAuthApp) error
	// OAuthApp returns an error wrapping ErrNotFound if there is no such app.
	OAuthApp(ctx context.Context, name string) (OAuthApp, error)
	// OAuthApps lists every app, by name.
	OAuthApps(ctx context.Context) ([]OAuthApp, error)
	// DeleteOAuthApp fails with an error wrapping ErrNotFound if there is
	// no such app.
	DeleteOAuthApp(ctx context.Context, name string) error
}

// OAuthClient speaks OAuth2 to providers: authorization code with PKCE
// (S256) and refresh. Its errors say how the provider refused, which
// decides the connection's next state (docs/api.md, "Connection states"): ErrGrantRevoked for
// invalid_grant, ErrClientRejected for a 401/403 answer, anything else is
// the provider being unreachable.
type OAuthClient interface {
	// AuthCodeURL is the provider's authorization URL with response_type=code,
	// client_id, redirect_uri, scope, state and code_challenge (S256 of verifier).
	AuthCodeURL(app OAuthApp, redirectURL, state, verifier string) string
	// Exchange trades an authorization code for tokens.
	Exchange(ctx context.Context, app OAuthApp, clientSecret, redirectURL, code, verifier string) (OAuthToken, error)
	// Refresh trades a refresh token for a new access token.
	Refresh(ctx context.Context, app OAuthApp, clientSecret, refreshToken string) (OAuthToken, error)
}

// Provider refusals an OAuthClient reports (wrapped).
var (
	ErrGrantRevoked   = errors.New("oauth2: invalid_grant: the grant was revoked or has expired")
	ErrClientRejected = errors.New("oauth2: the provider rejected the request (401/403)")
)

// oauthOperator is the Secrets "project" of operator-wide secrets: not an
// ID a project can have (those start with prj_).
const oauthOperator = "_operator"

// OAuthAppSecretName is the Secrets name of an app's client secret.
func OAuthAppSecretName(app string) string { return "oauth-apps/" + app }

// refreshMargin: an access token this close to its expiry is refreshed
// before use, so that it does not expire in the middle of a request.
const refreshMargin = time.Minute

var appName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// AddOAuthApp stores an app and its client secret.
func (s *ConnectionService) AddOAuthApp(ctx context.Context, in OAuthAppInput) (OAuthApp, error) {
	if s.oauthApps == nil {
		return OAuthApp{}, errors.New("automation: no OAuthAppStore configured")
	}
	if !appName.MatchString(in.Name) {
		return OAuthApp{}, Invalid("app name %q: use 1 to 63 lower-case letters, digits, - and _, starting with a letter or digit", in.Name)
	}
	// An app of the catalog brings its provider's endpoints and the
	// scopes its actions need: the operator gives only the client.
	if a, ok := s.catalogApp(in.Name); ok && a.Connection.OAuth2 != nil {
		o := a.Connection.OAuth2
		in.AuthorizeURL = cmp.Or(in.AuthorizeURL, o.AuthorizeURL)
		in.TokenURL = cmp.Or(in.TokenURL, o.TokenURL)
		if len(in.Scopes) == 0 {
			in.Scopes = o.Scopes
		}
	}
	if err := checkText("client ID", in.ClientID, 500); err != nil {
		return OAuthApp{}, err
	}
	if strings.TrimSpace(in.ClientSecret) == "" {
		return OAuthApp{}, Invalid("the client secret is required (flowctl reads it from stdin)")
	}
	for _, u := range []struct{ field, v string }{{"authorize URL", in.AuthorizeURL}, {"token URL", in.TokenURL}} {
		p, err := url.Parse(u.v)
		if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" || p.User != nil {
			return OAuthApp{}, Invalid("%s %q: want an absolute http(s) URL", u.field, u.v)
		}
	}
	scopes := []string{}
	for _, sc := range in.Scopes {
		scopes = append(scopes, strings.Fields(sc)...)
	}
	a := OAuthApp{
		Name: in.Name, ClientID: in.ClientID, AuthorizeURL: in.AuthorizeURL, TokenURL: in.TokenURL,
		Scopes: scopes, Created: s.clock(),
	}
	if _, err := s.oauthApps.OAuthApp(ctx, a.Name); err == nil {
		return OAuthApp{}, &Error{Kind: ErrConflict, Code: "OAUTH_APP_EXISTS", Message: "an OAuth2 app named " + a.Name + " exists: remove it first"}
	} else if !errors.Is(err, ErrNotFound) {
		return OAuthApp{}, wrap("get oauth app", err)
	}
	if err := s.secrets.PutSecret(ctx, oauthOperator, OAuthAppSecretName(a.Name), []byte(in.ClientSecret)); err != nil {
		return OAuthApp{}, wrap("store oauth app client secret", err)
	}
	if err := s.oauthApps.PutOAuthApp(ctx, a); err != nil {
		_ = s.secrets.DeleteSecret(ctx, oauthOperator, OAuthAppSecretName(a.Name))
		return OAuthApp{}, wrap("put oauth app", err)
	}
	return a, nil
}

// OAuthApps lists the configured apps; none when no store is configured.
func (s *ConnectionService) OAuthApps(ctx context.Context) ([]OAuthApp, error) {
	if s.oauthApps == nil {
		return []OAuthApp{}, nil
	}
	apps, err := s.oauthApps.OAuthApps(ctx)
	if apps == nil {
		apps = []OAuthApp{}
	}
	return apps, wrap("list oauth apps", err)
}

// OAuthApp returns one configured app.
func (s *ConnectionService) OAuthApp(ctx context.Context, name string) (OAuthApp, error) {
	if s.oauthApps == nil {
		return OAuthApp{}, NotFound("oauth app", name)
	}
	a, err := s.oauthApps.OAuthApp(ctx, name)
	return a, wrap("get oauth app", err)
}

// RemoveOAuthApp deletes an app and its client secret. Connections made
// through it stay, but can no longer refresh: they become EXPIRED when
// their access token runs out.
func (s *ConnectionService) RemoveOAuthApp(ctx context.Context, name string) error {
	if s.oauthApps == nil {
		return NotFound("oauth app", name)
	}
	if err := s.oauthApps.DeleteOAuthApp(ctx, name); err != nil {
		return wrap("delete oauth app", err)
	}
	if err := s.secrets.DeleteSecret(ctx, oauthOperator, OAuthAppSecretName(name)); err != nil && !errors.Is(err, ErrNotFound) {
		return wrap("delete oauth app client secret", err)
	}
	return nil
}

// OAuthStart is the beginning of an authorization: the URL to send the
// browser to, and the state and PKCE verifier the callback must present.
type OAuthStart struct {
	URL, State, Verifier string
}

// StartOAuth begins connecting through app: a fresh state and verifier
// (256 random bits each) and the provider's authorization URL.
func (s *ConnectionService) StartOAuth(ctx context.Context, app, redirectURL string) (OAuthStart, error) {
	a, err := s.OAuthApp(ctx, app)
	if err != nil {
		return OAuthStart{}, err
	}
	if s.oauth == nil {
		return OAuthStart{}, errors.New("automation: no OAuthClient configured")
	}
	st := OAuthStart{State: random32(), Verifier: random32()}
	st.URL = s.oauth.AuthCodeURL(a, redirectURL, st.State, st.Verifier)
	return st, nil
}

func random32() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// OAuthCompletion is what the callback brings back to finish connecting.
type OAuthCompletion struct {
	App         string
	Name        string // the new connection's name; default the app's
	Reconnect   string // ID of the connection to re-authorize, "" for a new one
	RedirectURL string // as sent in the authorization request
	Code        string
	Verifier    string
	// AllowedHosts fences a new connection's tokens (Connection.AllowedHosts).
	AllowedHosts []string
}

// CompleteOAuth exchanges the authorization code and stores the tokens: a
// new ACTIVE OAUTH2 connection whose app is the app's name, or, for a
// reconnect, the same connection made ACTIVE again.
func (s *ConnectionService) CompleteOAuth(ctx context.Context, p Project, in OAuthCompletion) (Connection, error) {
	hosts, err := ParseAllowedHosts("allowedHosts", in.AllowedHosts)
	if err != nil {
		return Connection{}, err
	}
	a, secret, err := s.appWithSecret(ctx, in.App)
	if err != nil {
		return Connection{}, err
	}
	var old Connection
	if in.Reconnect != "" {
		if old, err = s.store.Connection(ctx, p.ID, in.Reconnect); err != nil {
			return Connection{}, wrap("get connection", err)
		}
		if old.Type != ConnectionOAuth2 || old.App != a.Name {
			return Connection{}, Invalid("connection %s is not an OAUTH2 connection of app %s", old.ID, a.Name)
		}
	}
	if strings.TrimSpace(in.Code) == "" {
		return Connection{}, Invalid("the provider sent no authorization code")
	}
	tok, err := s.oauth.Exchange(ctx, a, secret, in.RedirectURL, in.Code, in.Verifier)
	if err != nil {
		return Connection{}, &Error{Kind: ErrInvalid, Code: "OAUTH_EXCHANGE_FAILED",
			Message: "the provider did not grant access to " + a.Name + ": " + providerReason(err)}
	}
	raw, err := encodeToken(tok)
	if err != nil {
		return Connection{}, wrap("encode oauth token", err)
	}
	if in.Reconnect != "" {
		if err := s.secrets.PutSecret(ctx, p.ID, ConnectionSecretName(old.ID), raw); err != nil {
			return Connection{}, wrap("store connection credential", err)
		}
		if err := s.store.SetConnectionStatus(ctx, p.ID, old.ID, ConnectionActive, s.clock()); err != nil {
			return Connection{}, wrap("set connection status", err)
		}
		return s.Connection(ctx, p, old.ID)
	}
	name := in.Name
	if name == "" {
		name = a.Name
	}
	if err := checkText("name", name, 200); err != nil {
		return Connection{}, err
	}
	return s.storeConnection(ctx, p, name, a.Name, ConnectionOAuth2, raw, appHosts(s.apps, a.Name, ConnectionOAuth2, hosts, ""), "")
}

func (s *ConnectionService) appWithSecret(ctx context.Context, name string) (OAuthApp, string, error) {
	a, err := s.OAuthApp(ctx, name)
	if err != nil {
		return OAuthApp{}, "", err
	}
	if s.oauth == nil {
		return OAuthApp{}, "", errors.New("automation: no OAuthClient configured")
	}
	secret, err := s.secrets.Secret(ctx, oauthOperator, OAuthAppSecretName(name))
	if err != nil {
		return OAuthApp{}, "", wrap("read oauth app client secret", err)
	}
	return a, string(secret), nil
}

// providerReason is what a user may read of a provider's refusal: the
// kind, never a token or the provider's whole answer.
func providerReason(err error) string {
	switch {
	case errors.Is(err, ErrGrantRevoked):
		return "invalid_grant (the code was used, expired or revoked)"
	case errors.Is(err, ErrClientRejected):
		return "the provider rejected the client credentials"
	}
	return "the token endpoint could not be reached or failed"
}

// storedToken is an OAUTH2 connection's credential as kept in Secrets.
type storedToken struct {
	OAuth2       bool      `json:"oauth2"`
	AccessToken  string    `json:"accessToken"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	TokenType    string    `json:"tokenType,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
}

func encodeToken(t OAuthToken) ([]byte, error) {
	return json.Marshal(storedToken{OAuth2: true, AccessToken: t.AccessToken.Reveal(),
		RefreshToken: t.RefreshToken.Reveal(), TokenType: t.TokenType, Expiry: t.Expiry})
}

// oauthCredential returns the access token of an OAUTH2 connection,
// refreshing it first when it has expired or is about to. A refused
// refresh moves the connection to its next state: REVOKED on invalid_grant,
// ERROR on 401/403, EXPIRED when the provider cannot be reached or fails.
func (s *ConnectionService) oauthCredential(ctx context.Context, c Connection, raw []byte) (Connection, ConnectionValue, error) {
	t, err := decodeToken(raw)
	if err != nil {
		return c, ConnectionValue{}, wrap("read connection credential", err)
	}
	if s.needsRefresh(t) {
		// One refresh at a time per connection: providers that rotate
		// refresh tokens refuse the second use of one with invalid_grant.
		mu, _ := s.refreshing.LoadOrStore(c.ID, &sync.Mutex{})
		mu.(*sync.Mutex).Lock()
		defer mu.(*sync.Mutex).Unlock()
		// Another run may have refreshed it while this one waited.
		if latest, err := s.storedToken(ctx, c); err != nil {
			return c, ConnectionValue{}, err
		} else if !s.needsRefresh(latest) {
			t = latest
		} else if t, err = s.refresh(ctx, c, latest); err != nil {
			return c, ConnectionValue{}, err
		}
	}
	prefix := "Bearer "
	if t.TokenType != "" && !strings.EqualFold(t.TokenType, "bearer") {
		prefix = t.TokenType + " "
	}
	return c, ConnectionValue{APIKey: Secret(t.AccessToken), Header: "Authorization", Prefix: &prefix}, nil
}

func (s *ConnectionService) needsRefresh(t storedToken) bool {
	return !t.Expiry.IsZero() && !s.now().Add(refreshMargin).Before(t.Expiry)
}

func decodeToken(raw []byte) (storedToken, error) {
	var t storedToken
	if err := json.Unmarshal(raw, &t); err != nil || !t.OAuth2 {
		return storedToken{}, errors.New("not an OAuth2 token")
	}
	return t, nil
}

func (s *ConnectionService) storedToken(ctx context.Context, c Connection) (storedToken, error) {
	raw, err := s.secrets.Secret(ctx, c.Project, ConnectionSecretName(c.ID))
	if err != nil {
		return storedToken{}, wrap("read connection credential", err)
	}
	t, err := decodeToken(raw)
	return t, wrap("read connection credential", err)
}

// refresh trades t's refresh token for a new access token and stores it. A
// refusal moves the connection to its next state (ConnectionStatus) and is
// the error returned. An invalid_grant after another process stored a newer
// token (it refreshed first, and the provider rotated the refresh token) is
// no revocation: the newer token is used.
func (s *ConnectionService) refresh(ctx context.Context, c Connection, t storedToken) (storedToken, error) {
	if t.RefreshToken == "" {
		_, _, err := s.moveConnection(ctx, c, ConnectionExpired, "its access token expired and the provider gave no refresh token")
		return t, err
	}
	a, secret, err := s.appWithSecret(ctx, c.App)
	if errors.Is(err, ErrNotFound) {
		_, _, err := s.moveConnection(ctx, c, ConnectionExpired, "its OAuth2 app "+c.App+" was removed")
		return t, err
	} else if err != nil {
		return t, err
	}
	tok, err := s.oauth.Refresh(ctx, a, secret, t.RefreshToken)
	if errors.Is(err, ErrGrantRevoked) {
		if latest, lerr := s.storedToken(ctx, c); lerr == nil && latest.RefreshToken != t.RefreshToken && !s.needsRefresh(latest) {
			return latest, nil
		}
	}
	switch {
	case errors.Is(err, ErrGrantRevoked):
		_, _, err := s.moveConnection(ctx, c, ConnectionRevoked, "the provider revoked its access (invalid_grant)")
		return t, err
	case errors.Is(err, ErrClientRejected):
		_, _, err := s.moveConnection(ctx, c, ConnectionError, "the provider rejected the refresh (401/403)")
		return t, err
	case err != nil:
		s.log.WarnContext(ctx, "oauth2 refresh failed", "connection", c.ID, "app", c.App, "err", err)
		_, _, err := s.moveConnection(ctx, c, ConnectionExpired, "its access token expired and the refresh failed")
		return t, err
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = Secret(t.RefreshToken) // providers may keep the old one valid
	}
	raw, err := encodeToken(tok)
	if err != nil {
		return t, wrap("encode oauth token", err)
	}
	if err := s.secrets.PutSecret(ctx, c.Project, ConnectionSecretName(c.ID), raw); err != nil {
		return t, wrap("store refreshed token", err)
	}
	return storedToken{OAuth2: true, AccessToken: tok.AccessToken.Reveal(), RefreshToken: tok.RefreshToken.Reveal(),
		TokenType: tok.TokenType, Expiry: tok.Expiry}, nil
}

// moveConnection records a state change (docs/api.md, "Connection states")
// and returns the error a run fails with, naming the connection and its new
// state.
func (s *ConnectionService) moveConnection(ctx context.Context, c Connection, to ConnectionStatus, why string) (Connection, ConnectionValue, error) {
	if err := s.store.SetConnectionStatus(ctx, c.Project, c.ID, to, s.clock()); err != nil {
		return c, ConnectionValue{}, wrap("set connection status", err)
	}
	c.Status = to
	kind := ErrConflict
	if to == ConnectionError {
		kind = ErrForbidden
	}
	return c, ConnectionValue{}, &Error{Kind: kind, Code: "CONNECTION_" + string(to),
		Message: "connection " + c.ID + " (" + c.Name + ") is " + string(to) + ": " + why + "; reconnect it in the dashboard"}
}
