// Package dashboard serves the flow service's web dashboard under /ui/:
// server-rendered HTML (html/template, embedded files, no front-end build)
// over the same automation.Service as the management API. A user signs in
// with an API key and gets a signed session cookie that holds only the key's
// hash; the key is checked again on every request, so revoking it ends the
// session at once. Every form carries a CSRF token tied to the session.
//
// OAuth2 connections are made here (docs/operations.md): "Connect NAME" sends the
// browser to the provider with state and a PKCE challenge, and the callback
// stores the tokens as an OAUTH2 connection (oauth.go).
package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/httpapi"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Options configure a dashboard.
type Options struct {
	// Key signs sessions and CSRF tokens (the dashboard derives its own keys
	// from it, so the page cursor key may be passed). It must be at least
	// 32 bytes, secret and shared by every instance; with a shorter or nil
	// Key a random one is used, and sessions end when the process does.
	Key []byte
	// SessionTTL is how long a sign-in lasts; default 12 hours.
	SessionTTL time.Duration
	// SecureCookies marks cookies Secure whatever the request looked like:
	// for deployments only reachable over HTTPS (API Gateway).
	SecureCookies bool
	// TrustedProxies are the socket addresses whose X-Forwarded-Proto is
	// believed when deciding whether a request came over HTTPS. Without
	// them only r.TLS counts.
	TrustedProxies []netip.Prefix
	// Prefix returns the public path in front of /ui for a request, such
	// as an API Gateway stage ("/prod"); nil means none. Links, redirects
	// and the cookie path carry it.
	Prefix func(*http.Request) string
	// InitialKeyFile is where flowd left the first API key of a new data
	// directory; the sign-in page names it so a newcomer need not search.
	// Empty where keys only come from flowctl (AWS).
	InitialKeyFile string
	// OpenAPI is the management API's OpenAPI document; the flow editor
	// shows its field descriptions as help. Nil: no help.
	OpenAPI []byte
	// ClientIP finds a request's client address for the audit log (on
	// Lambda: API Gateway's source IP); nil: the socket peer.
	ClientIP func(*http.Request) (netip.Addr, bool)
	// Clock defaults to time.Now.
	Clock func() time.Time
	// Log receives internal errors; nil discards them.
	Log *slog.Logger
	// OIDC turns on sign-in with an OpenID Connect provider (oidc.go);
	// nil: email and password, and API keys.
	OIDC *OIDC
	// Alerts lists event subscriptions on the Alerts page
	// (subscriptions.go); nil: the page says they are not available.
	Alerts *alerts.Service
}

// Dashboard is the /ui/ handler.
type Dashboard struct {
	svc        *automation.Service
	opts       Options
	sessionKey []byte
	csrfKey    []byte
	mux        *http.ServeMux
	pages      map[string]*template.Template
	help       []fieldHelp // of the flow editor, from Options.OpenAPI
	schema     []byte      // GET /ui/flow-schema.json, from Options.OpenAPI
	log        *slog.Logger
	oidc       oidcProvider
}

// New returns the dashboard handler for paths under /ui/.
func New(svc *automation.Service, opts Options) http.Handler {
	key := opts.Key
	if len(key) < 32 {
		key = make([]byte, 32)
		_, _ = rand.Read(key) // never fails (crypto/rand)
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Prefix == nil {
		opts.Prefix = func(*http.Request) string { return "" }
	}
	d := &Dashboard{
		svc: svc, opts: opts,
		// Separate keys per use: a session MAC can never pass as a CSRF
		// token, nor either as a page cursor.
		sessionKey: derive(key, "flowservice dashboard session v1"),
		csrfKey:    derive(key, "flowservice dashboard csrf v1"),
		mux:        http.NewServeMux(),
		pages:      parsePages(),
		help:       fieldHelpFrom(opts.OpenAPI),
		schema:     flowSchemaJSON(opts.OpenAPI),
		log:        opts.Log,
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	d.routes()
	return d
}

func (d *Dashboard) routes() {
	static, _ := fs.Sub(staticFS, "static")
	d.mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", http.FileServerFS(static)))
	d.mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		d.redirect(w, r, "/ui/flows")
	})
	d.mux.HandleFunc("GET /ui/signin", d.signinPage)
	d.mux.HandleFunc("POST /ui/signin", d.signin)
	if d.opts.OIDC != nil {
		d.mux.HandleFunc("GET /ui/signin/oidc", d.oidcStart)
		d.mux.HandleFunc("GET /ui/oidc/callback", d.oidcCallback) // authenticated by its own cookie
	}
	d.mux.Handle("POST /ui/signout", d.auth(d.signout))

	d.mux.Handle("GET /ui/flows", d.auth(d.flows))
	d.mux.Handle("GET /ui/flows/new", d.auth(d.newFlow))
	d.mux.Handle("POST /ui/flows", d.auth(d.createFlow))
	d.mux.Handle("POST /ui/templates/{templateId}", d.auth(d.createFromTemplate)) // gallery.go
	d.mux.Handle("POST /ui/step-test", d.auth(d.stepTest))                        // builder.go
	d.mux.Handle("GET /ui/flows/{flowId}", d.auth(d.flow))
	d.mux.Handle("GET /ui/flows/{flowId}/edit", d.auth(d.editFlow))
	d.mux.Handle("GET /ui/flow-schema.json", d.auth(d.flowSchema))
	d.mux.Handle("POST /ui/flows/{flowId}/edit", d.auth(d.updateFlow))
	d.mux.Handle("GET /ui/flows/{flowId}/delete", d.auth(d.confirmDeleteFlow))
	d.mux.Handle("POST /ui/flows/{flowId}/delete", d.auth(d.deleteFlow))
	d.mux.Handle("POST /ui/flows/{flowId}/runs/{runId}/retry", d.auth(d.retryRun))
	d.mux.Handle("GET /ui/flows/{flowId}/runs/{runId}/cancel", d.auth(d.confirmCancelRun)) // waiting.go
	d.mux.Handle("POST /ui/flows/{flowId}/runs/{runId}/cancel", d.auth(d.cancelRun))
	d.mux.Handle("POST /ui/flows/{flowId}/enable", d.auth(d.enable))
	d.mux.Handle("POST /ui/flows/{flowId}/disable", d.auth(d.disable))
	d.mux.Handle("POST /ui/flows/{flowId}/allowlist", d.auth(d.setAllowlist))
	d.mux.Handle("POST /ui/flows/{flowId}/test", d.auth(d.armTest))
	d.mux.Handle("POST /ui/flows/{flowId}/send-test", d.auth(d.sendTest))
	d.mux.Handle("GET /ui/flows/{flowId}/runs", d.auth(d.runs))
	d.mux.Handle("GET /ui/flows/{flowId}/runs/{runId}", d.auth(d.run))

	d.mux.Handle("GET /ui/subscriptions", d.auth(d.subscriptions)) // subscriptions.go
	d.mux.Handle("GET /ui/connections", d.auth(d.connections))
	d.mux.Handle("POST /ui/connections", d.auth(d.createConnection))
	d.mux.Handle("POST /ui/connections/{connectionId}/delete", d.auth(d.deleteConnection))
	// GET /ui/connections/connect/{app} (OAuth2) and
	// GET /ui/connections/{connectionId}/delete overlap as patterns; IDs
	// start with con_, so one route tells them apart.
	d.mux.Handle("GET /ui/connections/{first}/{second}", d.auth(func(w http.ResponseWriter, r *http.Request) {
		switch first, second := r.PathValue("first"), r.PathValue("second"); {
		case first == "connect":
			r.SetPathValue("app", second)
			d.connectOAuth(w, r)
		case second == "delete":
			r.SetPathValue("connectionId", first)
			d.confirmDelete(w, r)
		default:
			d.render(w, r, http.StatusNotFound, "error", view{Title: "Not found", Error: "There is no such page."})
		}
	}))
	d.mux.HandleFunc("GET /ui/oauth/callback", d.oauthCallback) // authenticated by its own cookie
	d.mux.Handle("GET /ui/audit", d.auth(d.auditPage))
	d.versionRoutes() // versions.go

	// Variables and flow export (variables.go).
	d.environmentRoutes()
	d.projectRoutes()  // project.go
	d.peopleRoutes()   // people.go
	d.keyRoutes()      // keys.go
	d.approvalRoutes() // approvals.go

	d.mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		d.render(w, r, http.StatusNotFound, "error", view{Title: "Not found", Error: "There is no such page."})
	})
}

// maxFormBytes bounds what the dashboard reads of a form.
const maxFormBytes = 64 << 10

// ServeHTTP sets the headers every answer shares, then routes.
func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// Pages show a project's data: no cache may keep them.
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy",
		"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "+
			"form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'")
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	}
	d.mux.ServeHTTP(w, r)
}

// base is the public path of /ui for r.
func (d *Dashboard) base(r *http.Request) string { return d.opts.Prefix(r) + "/ui" }

// redirect answers 303 to an internal path (starting with /ui/).
func (d *Dashboard) redirect(w http.ResponseWriter, r *http.Request, path string) {
	http.Redirect(w, r, d.opts.Prefix(r)+path, http.StatusSeeOther)
}

// problem returns the status and the message a user may see for err: the
// Service's own message for an *automation.Error, a generic one (and a log
// line) for anything else.
func (d *Dashboard) problem(r *http.Request, err error) (int, string) {
	var e *automation.Error
	if errors.As(err, &e) {
		// The API's table, so that an action refused for the same reason
		// answers the same status on both (a rate limit is a 429 here too).
		if status, ok := httpapi.StatusOf(err); ok {
			return status, e.Message
		}
		return http.StatusBadRequest, e.Message
	}
	d.log.ErrorContext(r.Context(), "dashboard request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	return http.StatusInternalServerError, "Something went wrong on our side. Please try again."
}

// fail renders the error page for err.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := d.problem(r, err)
	title := http.StatusText(status)
	d.render(w, r, status, "error", view{Title: title, Error: msg})
}

func derive(key []byte, purpose string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}
