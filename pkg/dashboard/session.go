package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

// Cookie names. The session cookie holds a signed token, never the key.
const (
	sessionCookie = "flow_session"
	signinCookie  = "flow_signin"  // binds the sign-in form's CSRF token
	projectCookie = "flow_project" // a person's current project (the switcher); the membership decides
)

// session is a signed-in request's state.
type session struct {
	project   automation.Project
	principal automation.Principal // the key's ID and role, with project
	csrf      string
	keyHash   string // of the API key signed in with, or a person's credential (personCredential); an OAuth2 start carries it to the callback
	userToken string // a person's session token ("" for a key's session)
	projects  []automation.ProjectRole
}

// personCredential is what an OAuth2 start carries to its callback for a
// person: the session token and the project, so that the callback checks
// the session again (the pending cookie is sealed and HttpOnly, in the
// browser that holds the session cookie anyway).
func personCredential(token, project string) string {
	return token + "\x00" + project
}

// principalFor checks a credential carried by an OAuth2 start: a person's
// session or a key's hash.
func (d *Dashboard) principalFor(ctx context.Context, cred string) (automation.Principal, error) {
	if token, project, ok := strings.Cut(cred, "\x00"); ok {
		return d.svc.SessionPrincipal(ctx, token, project)
	}
	return d.svc.PrincipalByKeyHash(ctx, cred)
}

type sessionKeyType struct{}

func sessionOf(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKeyType{}).(*session)
	return s
}

// newToken returns a session token for the key whose hash is keyHash:
// "v1.<expiry unix>.<nonce>.<key hash>.<mac>". The nonce makes each
// sign-in's token, and so its CSRF token, unique.
func (d *Dashboard) newToken(keyHash string, exp time.Time) string {
	nonce := make([]byte, 16)
	_, _ = rand.Read(nonce) // never fails (crypto/rand)
	payload := "v1." + strconv.FormatInt(exp.Unix(), 10) + "." +
		base64.RawURLEncoding.EncodeToString(nonce) + "." + keyHash
	return payload + "." + base64.RawURLEncoding.EncodeToString(mac(d.sessionKey, payload))
}

// openToken checks a token's MAC and expiry and returns the key hash in it.
func (d *Dashboard) openToken(token string) (string, bool) {
	i := strings.LastIndexByte(token, '.')
	if i < 0 {
		return "", false
	}
	payload, sig := token[:i], token[i+1:]
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(d.sessionKey, payload)) {
		return "", false
	}
	parts := strings.Split(payload, ".")
	if len(parts) != 4 || parts[0] != "v1" {
		return "", false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || !d.opts.Clock().Before(time.Unix(exp, 0)) {
		return "", false
	}
	return parts[3], true
}

// csrfFor is the CSRF token of a session (or sign-in) token.
func (d *Dashboard) csrfFor(scope, token string) string {
	return base64.RawURLEncoding.EncodeToString(mac(d.csrfKey, scope+"\x00"+token))
}

func mac(key []byte, msg string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return m.Sum(nil)
}

// validCSRF compares the form's token with the expected one in constant time.
func validCSRF(r *http.Request, want string) bool {
	got := r.PostFormValue("csrf")
	return got != "" && hmac.Equal([]byte(got), []byte(want))
}

// auth lets signed-in requests through to next, re-checking the key behind
// the session with the Service on every request. GETs without a session go
// to the sign-in page; POSTs need the session's CSRF token (403 otherwise).
func (d *Dashboard) auth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(sessionCookie)
		if err != nil {
			d.toSignin(w, r, "")
			return
		}
		var s *session
		if strings.HasPrefix(c.Value, automation.PrefixSessionToken) {
			// A person: the session and the role are read on every request.
			project := ""
			if pc, err := r.Cookie(projectCookie); err == nil {
				project = pc.Value
			}
			pr, err := d.svc.SessionPrincipal(r.Context(), c.Value, project)
			if errors.Is(err, automation.ErrUnauthorized) {
				d.clearCookie(w, r, sessionCookie)
				d.toSignin(w, r, "expired")
				return
			} else if err != nil {
				d.fail(w, r, err)
				return
			}
			projects, err := d.svc.UserProjects(r.Context(), pr.UserID)
			if err != nil {
				d.fail(w, r, err)
				return
			}
			s = &session{project: pr.Project, principal: pr, csrf: d.csrfFor("session", c.Value),
				keyHash: personCredential(c.Value, pr.Project.ID), userToken: c.Value, projects: projects}
		} else {
			hash, ok := d.openToken(c.Value)
			if !ok {
				d.clearCookie(w, r, sessionCookie)
				d.toSignin(w, r, "expired")
				return
			}
			pr, err := d.svc.PrincipalByKeyHash(r.Context(), hash)
			if errors.Is(err, automation.ErrUnauthorized) {
				d.clearCookie(w, r, sessionCookie)
				d.toSignin(w, r, "revoked")
				return
			} else if err != nil {
				d.fail(w, r, err)
				return
			}
			s = &session{project: pr.Project, principal: pr, csrf: d.csrfFor("session", c.Value), keyHash: hash}
		}
		var tooLarge *http.MaxBytesError
		if r.Method == http.MethodPost && errors.As(r.ParseForm(), &tooLarge) {
			d.render(w, r, http.StatusRequestEntityTooLarge, "error", view{Title: "Too large",
				Error: fmt.Sprintf("This form holds more than the dashboard reads (%d KiB). Use the API or flowctl for larger definitions and events.", maxFormBytes>>10)})
			return
		}
		if r.Method == http.MethodPost && !validCSRF(r, s.csrf) {
			d.render(w, r, http.StatusForbidden, "error", view{Title: "Forbidden",
				Error: "This form has expired or did not come from the dashboard. Reload the page and try again."})
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), sessionKeyType{}, s))
		r, ok := d.authorize(w, r, s)
		if !ok {
			return
		}
		next(w, r)
	})
}

// toSignin redirects to the sign-in page, remembering where a GET was going.
func (d *Dashboard) toSignin(w http.ResponseWriter, r *http.Request, why string) {
	q := []string{}
	if why != "" {
		q = append(q, "why="+why)
	}
	if r.Method == http.MethodGet {
		q = append(q, "next="+url.QueryEscape(r.URL.RequestURI()))
	}
	target := "/ui/signin"
	if len(q) > 0 {
		target += "?" + strings.Join(q, "&")
	}
	d.redirect(w, r, target)
}

// safeNext accepts only dashboard paths as sign-in destinations, so the
// sign-in page is no open redirect.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.Contains(next, "//") || strings.ContainsAny(next, "\\\r\n") ||
		strings.HasPrefix(next, "/ui/signin") {
		return "/ui/flows"
	}
	return next
}

var signinNotes = map[string]string{
	"expired":   "Your session has ended. Sign in again.",
	"revoked":   "The API key of your session is no longer valid. Sign in with another key.",
	"signedout": "You are signed out.",
}

func (d *Dashboard) signinPage(w http.ResponseWriter, r *http.Request) {
	d.renderSignin(w, r, http.StatusOK, "")
}

// renderSignin shows the sign-in form with a fresh nonce cookie, whose
// HMAC is the form's CSRF token: a sign-in cannot be forged from elsewhere.
func (d *Dashboard) renderSignin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	nonce := base64.RawURLEncoding.EncodeToString(b)
	d.setCookie(w, r, signinCookie, nonce, time.Hour)
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q = r.PostForm
	}
	d.render(w, r, status, "signin", view{
		Title: "Sign in", CSRF: d.csrfFor("signin", nonce), Error: msg,
		Notice: signinNotes[q.Get("why")],
		Data:   signinData{Next: safeNext(q.Get("next")), KeyFile: d.opts.InitialKeyFile, OIDC: d.opts.OIDC != nil},
	})
}

// signinData is what the sign-in page shows beside the form.
type signinData struct {
	Next    string // where to go after signing in
	KeyFile string // Options.InitialKeyFile
	OIDC    bool   // sign-in with the identity provider is on
}

func (d *Dashboard) signin(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		d.renderSignin(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	c, err := r.Cookie(signinCookie)
	if err != nil || !validCSRF(r, d.csrfFor("signin", c.Value)) {
		d.render(w, r, http.StatusForbidden, "error", view{Title: "Forbidden",
			Error: "This sign-in form has expired or did not come from the dashboard. Reload the page and try again."})
		return
	}
	key := strings.TrimSpace(r.PostFormValue("apiKey"))
	id := newRequestID()
	w.Header().Set("X-Request-Id", id)
	if email := r.PostFormValue("email"); email != "" || key == "" {
		d.passwordSignin(w, r, email, r.PostFormValue("password"), id)
		return
	}
	if _, err := d.svc.SignIn(r.Context(), key, id, d.sourceIP(r)); errors.Is(err, automation.ErrUnauthorized) {
		d.renderSignin(w, r, http.StatusUnauthorized, "That API key is not valid.")
		return
	} else if err != nil {
		status, msg := d.problem(r, err)
		d.renderSignin(w, r, status, msg)
		return
	}
	token := d.newToken(automation.HashAPIKey(key), d.opts.Clock().Add(d.opts.SessionTTL))
	d.setCookie(w, r, sessionCookie, token, d.opts.SessionTTL)
	d.clearCookie(w, r, signinCookie)
	d.redirect(w, r, safeNext(r.PostFormValue("next")))
}

// passwordSignin signs a person in: a stored session whose token is the
// cookie. A slowed email or address is a 429 page saying how long to wait.
func (d *Dashboard) passwordSignin(w http.ResponseWriter, r *http.Request, email, password, id string) {
	token, _, err := d.svc.PasswordSignIn(r.Context(), email, password, id, d.sourceIP(r))
	var rl *automation.RateLimited
	switch {
	case errors.As(err, &rl):
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(rl.RetryAfter.Seconds()+0.999))))
		d.renderSignin(w, r, http.StatusTooManyRequests, rl.Error())
		return
	case errors.Is(err, automation.ErrUnauthorized):
		d.renderSignin(w, r, http.StatusUnauthorized, "That email and password do not match.")
		return
	case err != nil:
		status, msg := d.problem(r, err)
		d.renderSignin(w, r, status, msg)
		return
	}
	d.setCookie(w, r, sessionCookie, token, automation.UserSessionTTL)
	d.clearCookie(w, r, signinCookie)
	d.redirect(w, r, safeNext(r.PostFormValue("next")))
}

// signout drops the session cookie. A person's session is deleted from the
// store at once; a key's token stays valid until it expires (key sessions
// are stateless) and revoking the key ends it everywhere.
func (d *Dashboard) signout(w http.ResponseWriter, r *http.Request) {
	if s := sessionOf(r.Context()); s != nil && s.userToken != "" {
		if err := d.svc.SignOut(r.Context(), s.userToken); err != nil {
			d.fail(w, r, err)
			return
		}
		d.clearCookie(w, r, projectCookie)
	}
	d.clearCookie(w, r, sessionCookie)
	d.redirect(w, r, "/ui/signin?why=signedout")
}

func (d *Dashboard) setCookie(w http.ResponseWriter, r *http.Request, name, value string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: d.base(r), MaxAge: int(ttl.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: d.https(r),
	})
}

func (d *Dashboard) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: "", Path: d.base(r), MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: d.https(r),
	})
}

// https reports whether r reached us over HTTPS: its own TLS, or a trusted
// proxy's X-Forwarded-Proto.
func (d *Dashboard) https(r *http.Request) bool {
	if d.opts.SecureCookies || r.TLS != nil {
		return true
	}
	if len(d.opts.TrustedProxies) == 0 || r.Header.Get("X-Forwarded-Proto") == "" {
		return false
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	for _, p := range d.opts.TrustedProxies {
		if p.Contains(ip.Unmap()) {
			return strings.EqualFold(strings.TrimSpace(strings.Split(r.Header.Get("X-Forwarded-Proto"), ",")[0]), "https")
		}
	}
	return false
}
