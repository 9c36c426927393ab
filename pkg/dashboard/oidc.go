package dashboard

import (
	"context"
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"flowservice/pkg/automation"
)

// OIDC configures sign-in with an OpenID Connect provider (Google, Entra
// ID, Okta, Keycloak, Dex, …): the authorization code flow with PKCE, a
// nonce in the ID token and the state in a cookie, people matched by a
// verified email (docs/access.md#people).
type OIDC struct {
	Issuer, ClientID, ClientSecret string
	// AllowedDomains let people of those email domains in without an
	// invitation, as viewers of ViewerProject (a project name).
	AllowedDomains []string
	ViewerProject  string
	// Client makes the calls to the provider; nil: http.DefaultClient.
	Client *http.Client
}

const (
	oidcCookie = "flow_oidc"
	oidcTTL    = 10 * time.Minute
)

// oidcProvider discovers the provider once, at the first sign-in, so that
// a provider down at start-up does not stop the dashboard.
type oidcProvider struct {
	mu       sync.Mutex
	provider *oidc.Provider
}

func (d *Dashboard) oidcContext(ctx context.Context) context.Context {
	if c := d.opts.OIDC.Client; c != nil {
		return oidc.ClientContext(ctx, c)
	}
	return ctx
}

func (d *Dashboard) oidcConfig(r *http.Request) (*oidc.Provider, oauth2.Config, error) {
	d.oidc.mu.Lock()
	defer d.oidc.mu.Unlock()
	if d.oidc.provider == nil {
		p, err := oidc.NewProvider(d.oidcContext(r.Context()), d.opts.OIDC.Issuer)
		if err != nil {
			return nil, oauth2.Config{}, err
		}
		d.oidc.provider = p
	}
	scheme := "http"
	if d.https(r) {
		scheme = "https"
	}
	return d.oidc.provider, oauth2.Config{
		ClientID: d.opts.OIDC.ClientID, ClientSecret: d.opts.OIDC.ClientSecret,
		Endpoint:    d.oidc.provider.Endpoint(),
		RedirectURL: scheme + "://" + r.Host + d.base(r) + "/oidc/callback",
		Scopes:      []string{oidc.ScopeOpenID, "email", "profile"},
	}, nil
}

// sealOIDC signs the state, nonce, PKCE verifier and destination of a
// sign-in in progress, for its cookie.
func (d *Dashboard) sealOIDC(parts []string) string {
	enc := make([]string, len(parts))
	for i, p := range parts {
		enc[i] = base64.RawURLEncoding.EncodeToString([]byte(p))
	}
	payload := strings.Join(enc, ".")
	return payload + "." + base64.RawURLEncoding.EncodeToString(mac(d.sessionKey, "oidc\x00"+payload))
}

func (d *Dashboard) openOIDC(v string) (state, nonce, verifier, next string, ok bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return "", "", "", "", false
	}
	got, err := base64.RawURLEncoding.DecodeString(v[i+1:])
	if err != nil || !hmac.Equal(got, mac(d.sessionKey, "oidc\x00"+v[:i])) {
		return "", "", "", "", false
	}
	parts := strings.Split(v[:i], ".")
	if len(parts) != 5 {
		return "", "", "", "", false
	}
	for j, p := range parts {
		b, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil {
			return "", "", "", "", false
		}
		parts[j] = string(b)
	}
	exp, err := strconv.ParseInt(parts[4], 10, 64)
	if err != nil || !d.opts.Clock().Before(time.Unix(exp, 0)) {
		return "", "", "", "", false
	}
	return parts[0], parts[1], parts[2], parts[3], true
}

// oidcStart sends the browser to the provider.
func (d *Dashboard) oidcStart(w http.ResponseWriter, r *http.Request) {
	_, cfg, err := d.oidcConfig(r)
	if err != nil {
		d.log.ErrorContext(r.Context(), "OpenID provider discovery failed", "err", err)
		d.renderSignin(w, r, http.StatusBadGateway, "The identity provider cannot be reached now. Try again later.")
		return
	}
	state, nonce, verifier := newRequestID()+newRequestID(), newRequestID()+newRequestID(), oauth2.GenerateVerifier()
	exp := d.opts.Clock().Add(oidcTTL)
	http.SetCookie(w, &http.Cookie{
		Name: oidcCookie, Value: d.sealOIDC([]string{state, nonce, verifier, safeNext(r.URL.Query().Get("next")), strconv.FormatInt(exp.Unix(), 10)}),
		// Lax: the callback is a top-level navigation from the provider's
		// site, which a Strict cookie would not come with.
		Path: d.base(r) + "/oidc", MaxAge: int(oidcTTL.Seconds()), HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: d.https(r),
	})
	http.Redirect(w, r, cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)), http.StatusFound)
}

// oidcCallback finishes a sign-in: the state must be the cookie's, the code
// is exchanged with the PKCE verifier, the ID token must be signed by the
// provider for this client and carry the cookie's nonce, and the email must
// be verified.
func (d *Dashboard) oidcCallback(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: d.base(r) + "/oidc", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: d.https(r)}) // one use
	refuse := func(status int, msg string) { d.renderSignin(w, r, status, msg) }
	c, err := r.Cookie(oidcCookie)
	if err != nil {
		refuse(http.StatusBadRequest, "This sign-in did not start in this browser or has expired (10 minutes). Sign in again.")
		return
	}
	state, nonce, verifier, next, ok := d.openOIDC(c.Value)
	q := r.URL.Query()
	if !ok || q.Get("state") == "" || !hmac.Equal([]byte(q.Get("state")), []byte(state)) {
		refuse(http.StatusBadRequest, "This sign-in did not start in this browser or has expired (10 minutes). Sign in again.")
		return
	}
	if q.Get("error") != "" {
		refuse(http.StatusUnauthorized, "The identity provider refused the sign-in.")
		return
	}
	p, cfg, err := d.oidcConfig(r)
	if err != nil {
		refuse(http.StatusBadGateway, "The identity provider cannot be reached now. Try again later.")
		return
	}
	ctx := d.oidcContext(r.Context())
	tok, err := cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		d.log.WarnContext(r.Context(), "OpenID code exchange failed", "err", err)
		refuse(http.StatusUnauthorized, "The identity provider did not accept this sign-in. Sign in again.")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := p.Verifier(&oidc.Config{ClientID: d.opts.OIDC.ClientID}).Verify(ctx, raw)
	if err != nil {
		d.log.WarnContext(r.Context(), "OpenID ID token refused", "err", err)
		refuse(http.StatusUnauthorized, "The identity provider's answer could not be verified. Sign in again.")
		return
	}
	if !hmac.Equal([]byte(idt.Nonce), []byte(nonce)) {
		refuse(http.StatusUnauthorized, "The identity provider's answer is not for this sign-in (nonce). Sign in again.")
		return
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified any    `json:"email_verified"` // a boolean, or "true" from some providers
	}
	if err := idt.Claims(&claims); err != nil {
		refuse(http.StatusUnauthorized, "The identity provider's answer could not be read.")
		return
	}
	verified := claims.EmailVerified == true || claims.EmailVerified == "true"
	if claims.Email == "" {
		// Providers that keep profile claims out of the ID token (ZITADEL,
		// Entra ID without optional claims) give them at the UserInfo
		// endpoint, for the access token just issued; the answer counts
		// only for the subject the ID token names.
		ui, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		if err != nil || ui.Subject != idt.Subject {
			d.log.WarnContext(r.Context(), "OpenID UserInfo unusable", "err", err)
			refuse(http.StatusUnauthorized, "The identity provider did not say who signed in (no email). Sign in again.")
			return
		}
		claims.Email, verified = ui.Email, ui.EmailVerified
	}
	viewerProject := ""
	if name := d.opts.OIDC.ViewerProject; name != "" && len(d.opts.OIDC.AllowedDomains) > 0 {
		if vp, err := d.svc.ProjectByName(r.Context(), name); err == nil {
			viewerProject = vp.ID
		}
	}
	id := newRequestID()
	w.Header().Set("X-Request-Id", id)
	token, _, err := d.svc.ExternalSignIn(r.Context(), claims.Email, verified, d.opts.OIDC.AllowedDomains, viewerProject, id, d.sourceIP(r))
	if errors.Is(err, automation.ErrUnauthorized) {
		refuse(http.StatusUnauthorized, err.Error())
		return
	} else if err != nil {
		st, msg := d.problem(r, err)
		refuse(st, msg)
		return
	}
	d.setCookie(w, r, sessionCookie, token, automation.UserSessionTTL)
	d.redirect(w, r, next)
}
