package dashboard

import (
	"crypto/hmac"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

// oauthCookie carries an authorization in progress from "Connect" to the
// callback: state, PKCE verifier, app, the connection to re-authorize and
// the hash of the signed-in key, signed with the session key. It is
// SameSite=Lax: the callback is a top-level navigation from the provider's
// site, on which the Strict session cookie is not sent.
const (
	oauthCookie = "flow_oauth"
	oauthTTL    = 10 * time.Minute
)

// oauthPending is the content of the oauth cookie.
type oauthPending struct {
	state, verifier, app, reconnect, keyHash string
	hosts                                    string // allowedHosts of a new connection, comma-separated
}

func (d *Dashboard) sealPending(p oauthPending, exp time.Time) string {
	parts := []string{"v1", strconv.FormatInt(exp.Unix(), 10), p.state, p.verifier, p.app, p.reconnect, p.keyHash, p.hosts}
	for i, s := range parts {
		parts[i] = base64.RawURLEncoding.EncodeToString([]byte(s))
	}
	payload := strings.Join(parts, ".")
	return payload + "." + base64.RawURLEncoding.EncodeToString(mac(d.sessionKey, "oauth\x00"+payload))
}

func (d *Dashboard) openPending(v string) (oauthPending, bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return oauthPending{}, false
	}
	payload, sig := v[:i], v[i+1:]
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, mac(d.sessionKey, "oauth\x00"+payload)) {
		return oauthPending{}, false
	}
	parts := strings.Split(payload, ".")
	if len(parts) != 8 {
		return oauthPending{}, false
	}
	for i, p := range parts {
		b, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil {
			return oauthPending{}, false
		}
		parts[i] = string(b)
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if parts[0] != "v1" || err != nil || !d.opts.Clock().Before(time.Unix(exp, 0)) {
		return oauthPending{}, false
	}
	return oauthPending{state: parts[2], verifier: parts[3], app: parts[4], reconnect: parts[5], keyHash: parts[6], hosts: parts[7]}, true
}

// callbackURL is {base_url}/ui/oauth/callback as the browser reaches us.
func (d *Dashboard) callbackURL(r *http.Request) string {
	scheme := "http"
	if d.https(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host + d.base(r) + "/oauth/callback"
}

// connectOAuth is "Connect NAME" (and "Reconnect" with ?connection=ID): a
// 302 to the provider's authorization URL.
func (d *Dashboard) connectOAuth(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r.Context())
	app, reconnect := r.PathValue("app"), r.URL.Query().Get("connection")
	if reconnect != "" {
		c, err := d.svc.Connection(r.Context(), s.project, reconnect)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		if c.Type != automation.ConnectionOAuth2 || c.App != app {
			d.fail(w, r, automation.Invalid("connection %s is not an OAUTH2 connection of app %s", c.ID, app))
			return
		}
	}
	// ?allowedHosts=a.example.com,*.b.example fences the new connection
	// (docs/access.md); checked now, before the provider is involved.
	hosts, err := automation.ParseAllowedHosts("allowedHosts", splitHosts(r.URL.Query().Get("allowedHosts")))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	start, err := d.svc.StartOAuth(r.Context(), app, d.callbackURL(r))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: oauthCookie, Value: d.sealPending(oauthPending{start.State, start.Verifier, app, reconnect, s.keyHash, strings.Join(hosts, ",")}, d.opts.Clock().Add(oauthTTL)),
		Path: d.base(r) + "/oauth", MaxAge: int(oauthTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: d.https(r),
	})
	http.Redirect(w, r, start.URL, http.StatusFound)
}

// oauthCallback finishes an authorization: the state must match the one
// the cookie carries, the key behind it must still be valid, and the code
// is exchanged with the verifier.
func (d *Dashboard) oauthCallback(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: oauthCookie, Value: "", Path: d.base(r) + "/oauth", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: d.https(r)}) // one use
	q := r.URL.Query()
	c, err := r.Cookie(oauthCookie)
	var p oauthPending
	ok := err == nil
	if ok {
		p, ok = d.openPending(c.Value)
	}
	if !ok || q.Get("state") == "" || !hmac.Equal([]byte(q.Get("state")), []byte(p.state)) {
		d.render(w, r, http.StatusBadRequest, "error", view{Title: "Connection not made",
			Error: "This authorization did not start in this browser or has expired (10 minutes). Start again with Connect on the Connections page."})
		return
	}
	pr, err := d.principalFor(r.Context(), p.keyHash)
	if errors.Is(err, automation.ErrUnauthorized) {
		d.toSignin(w, r, "revoked")
		return
	} else if err != nil {
		d.fail(w, r, err)
		return
	}
	project := pr.Project
	if err := pr.Authorize(automation.PermEdit, "connecting "+p.app); err != nil {
		d.fail(w, r, err)
		return
	}
	action, res := "connection.create", automation.AuditResource{Type: "connection", ID: p.reconnect}
	if p.reconnect != "" {
		action = "connection.reconnect"
	}
	r = r.WithContext(automation.WithAudit(r.Context(),
		d.svc.NewAuditEntry(pr, action, res, newRequestID(), d.sourceIP(r))))
	if e := q.Get("error"); e != "" {
		d.render(w, r, http.StatusBadRequest, "error", view{Title: "Connection not made",
			Error: "The provider did not grant access to " + p.app + ": " + clipText(e+" "+q.Get("error_description"), 200)})
		return
	}
	conn, err := d.svc.CompleteOAuth(r.Context(), project, automation.OAuthCompletion{
		App: p.app, Reconnect: p.reconnect, RedirectURL: d.callbackURL(r), Code: q.Get("code"), Verifier: p.verifier,
		AllowedHosts: splitHosts(p.hosts),
	})
	if err != nil {
		d.fail(w, r, err)
		return
	}
	// A page, not a redirect: the navigation that brought us here came from
	// the provider's site, and a redirect in it would still not carry the
	// Strict session cookie. The page's own refresh does.
	next := d.base(r) + "/connections?done=connected&connection=" + url.QueryEscape(conn.ID)
	d.render(w, r, http.StatusOK, "oauth_done", view{Title: "Connected", Refresh: next, Data: struct {
		Connection automation.Connection
		Next       string
	}{conn, next}})
}

// splitHosts reads a list of host patterns separated by commas or spaces,
// as a form field or query parameter carries it.
func splitHosts(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' || r == '\r' })
}

func clipText(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
