// Package httpapi serves the flow service over HTTP: the management API
// (NewAPI) with its OpenAPI document, and the two webhook receivers
// (NewWebhook for the flow builder, NewWorkflowHook for the workflow
// builder). Handlers are plain net/http, so the
// same code runs in flowd and, wrapped by aws-lambda-go-api-proxy, on Lambda;
// they read no environment and keep no globals.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"path"
	"time"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/respbudget"
)

// API is the management API: routes, authentication and the cross-cutting
// behaviour every response shares (request IDs, error envelope, access log).
type API struct {
	svc *automation.Service
	log *slog.Logger
	mux *http.ServeMux
	// patterns holds the registered patterns, to tell a route's match from
	// the redirect ServeMux answers for unclean paths.
	patterns map[string]bool
	// limits is the per-project rate limit; nil for none.
	limits *limiter
	// ping checks the store for GET /healthz; nil: no check.
	ping func(context.Context) error
	// metrics serves GET /metrics; nil: 404.
	metrics http.Handler
	// alerts serves the subscription routes (subscriptions.go); nil: none.
	alerts *alerts.Service
	// mcp serves /mcp (mcp.go); nil: none.
	mcp MCP
	// clientIP finds the client address for the audit log; nil: the peer.
	clientIP func(*http.Request) (netip.Addr, bool)
	// budget is what an authenticated route's answer is cut to (parts.go).
	budget respbudget.Budget
	// publicPrefix is the path in front of /api and /ui for a request (an
	// API Gateway stage), for the set-up links of invitations.
	publicPrefix func(*http.Request) string
}

// WithPublicPrefix sets the public path in front of the routes (API
// Gateway's stage, "/prod"), which set-up links carry. Default: none.
func WithPublicPrefix(f func(*http.Request) string) APIOption {
	return func(a *API) { a.publicPrefix = f }
}

// route is one entry of the routing table. Public routes skip
// authentication; every other route needs a bearer key.
type route struct {
	pattern string
	handler http.HandlerFunc
	public  bool
	// protocol: the answer is another protocol's (MCP's JSON-RPC), whole
	// or not at all, never cut to the answer budget.
	protocol bool
}

// routes is the routing table: adding an endpoint is one line here.
func (a *API) routes() []route {
	return append([]route{
		{pattern: "GET /api/v1/openapi.json", handler: a.openAPI, public: true},
		{pattern: "GET /healthz", handler: a.healthz, public: true},
		{pattern: "GET /metrics", handler: a.serveMetrics, public: true},

		{pattern: "GET /api/v1/flows", handler: a.listFlows},
		{pattern: "POST /api/v1/flows", handler: a.createFlow},
		{pattern: "GET /api/v1/flows/{flowId}", handler: a.getFlow},
		{pattern: "POST /api/v1/flows/{flowId}", handler: a.updateFlow},
		{pattern: "DELETE /api/v1/flows/{flowId}", handler: a.deleteFlow},
		{pattern: "POST /api/v1/flows/{flowId}/enable", handler: a.enableFlow},
		{pattern: "POST /api/v1/flows/{flowId}/disable", handler: a.disableFlow},
		{pattern: "GET /api/v1/flows/{flowId}/webhook", handler: a.getWebhook},
		{pattern: "GET /api/v1/flows/{flowId}/webhook/security", handler: a.getWebhookSecurity},
		{pattern: "POST /api/v1/flows/{flowId}/webhook/security", handler: a.setWebhookSecurity},
		{pattern: "POST /api/v1/flows/{flowId}/webhook/test", handler: a.armWebhookTest},
		{pattern: "GET /api/v1/flows/{flowId}/webhook/sample", handler: a.getWebhookSample},
		{pattern: "GET /api/v1/flows/{flowId}/runs", handler: a.listRuns},
		{pattern: "GET /api/v1/flows/{flowId}/runs/{runId}", handler: a.getRun},
		{pattern: "GET /api/v1/flows/{flowId}/insights", handler: a.getInsights},
		{pattern: "POST /api/v1/flows/{flowId}/runs/{runId}/retry", handler: a.retryRun},
		{pattern: "POST /api/v1/flows/{flowId}/runs/{runId}/cancel", handler: a.cancelRun},
		{pattern: "GET /api/v1/runs", handler: a.searchRuns},
		{pattern: "POST /api/v1/runs/replay", handler: a.replayRuns},

		{pattern: "GET /api/v1/connections", handler: a.listConnections},
		{pattern: "POST /api/v1/connections", handler: a.createConnection},
		{pattern: "GET /api/v1/connections/{connectionId}", handler: a.getConnection},
		{pattern: "DELETE /api/v1/connections/{connectionId}", handler: a.deleteConnection},
		{pattern: "GET /api/v1/apps", handler: a.listApps},

		{pattern: "GET /api/v1/project", handler: a.getProject},
		{pattern: "GET /api/v1/variables", handler: a.listVariables},
		{pattern: "GET /api/v1/variables/{name}", handler: a.getVariable},
		{pattern: "PUT /api/v1/variables/{name}", handler: a.putVariable},
		{pattern: "DELETE /api/v1/variables/{name}", handler: a.deleteVariable},
		{pattern: "GET /api/v1/flows/{flowId}/export", handler: a.exportFlow},
		{pattern: "POST /api/v1/flows/import", handler: a.importFlow},
		{pattern: "POST /api/v1/flows/{flowId}/compare", handler: a.compareFlow},
		{pattern: "GET /api/v1/audit", handler: a.auditLog},

		{pattern: "GET /api/v1/users", handler: a.listUsers},
		{pattern: "POST /api/v1/users", handler: a.inviteUser},
		{pattern: "GET /api/v1/users/{userId}", handler: a.getUser},
		{pattern: "DELETE /api/v1/users/{userId}", handler: a.removeUser},
		{pattern: "POST /api/v1/users/{userId}/role", handler: a.setUserRole},

		{pattern: "POST /mcp", handler: a.serveMCP, protocol: true},
	}, append(append(a.alertRoutes(), a.versionRoutes()...), a.approvalRoutes()...)...)
}

// NewAPI returns the management API handler. log receives one access line per
// request and the details of internal errors; nil discards them.
func NewAPI(svc *automation.Service, log *slog.Logger, opts ...APIOption) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &API{svc: svc, log: log, mux: http.NewServeMux(), patterns: map[string]bool{}, budget: respbudget.Default(),
		publicPrefix: func(*http.Request) string { return "" }}
	for _, o := range opts {
		o(a)
	}
	for _, rt := range a.routes() {
		h := http.Handler(rt.handler)
		switch {
		case rt.protocol:
			h = a.authenticate(a.authorize(rt.pattern, a.limit(h)))
		case !rt.public:
			h = a.authenticate(a.authorize(rt.pattern, a.limit(a.budgeted(h))))
		}
		a.mux.Handle(rt.pattern, h)
		a.patterns[rt.pattern] = true
	}
	return a
}

// ServeHTTP runs the middleware chain, outermost first: request ID, access
// log, panic recovery, common headers, routing.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &requestInfo{id: requestIDFrom(r)}
	r = r.WithContext(withInfo(r.Context(), info))
	w.Header().Set("X-Request-Id", info.id)
	rec := &recorder{ResponseWriter: w}
	defer logAccess(a.log, r, rec, info, start)
	defer recoverPanic(a.log, rec, r)

	// Management answers carry keys' data: no cache may keep them.
	rec.Header().Set("Cache-Control", "no-store")
	a.dispatch(rec, r)
}

// dispatch routes r, answering unmatched requests with JSON 404 or 405
// before any authentication: the route table is public (it is in the OpenAPI
// document), so this reveals nothing about resources.
func (a *API) dispatch(w http.ResponseWriter, r *http.Request) {
	h, pattern := a.mux.Handler(r)
	// ServeMux redirects unclean paths ("//", "..", a trailing slash) to
	// their clean form, as text/html; no route has such a path, so they are
	// unknown routes.
	if path.Clean(r.URL.Path) != r.URL.Path {
		pattern = ""
	}
	if pattern != "" && a.patterns[pattern] {
		infoOf(r.Context()).route = pattern
		// ServeHTTP sets the path values the handler reads.
		a.mux.ServeHTTP(w, r)
		return
	}
	// ServeMux knows whether the path matched with another method; its own
	// answer is plain text, so read status and Allow from a scratch writer.
	probe := &probeWriter{header: http.Header{}}
	h.ServeHTTP(probe, r)
	if probe.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", probe.header.Get("Allow"))
		writeError(w, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED",
			clip(r.Method)+" is not allowed on "+clip(r.URL.Path)+"; allowed: "+probe.header.Get("Allow"))
		return
	}
	if r.URL.Path == "/" {
		// A script or curl opening the bare address learns where things are
		// (a browser is sent to the dashboard before it gets here).
		writeError(w, r, http.StatusNotFound, "NOT_FOUND", rootHint)
		return
	}
	writeError(w, r, http.StatusNotFound, "NOT_FOUND", "no such route: "+clip(r.Method)+" "+clip(r.URL.Path))
}

// rootHint is the answer to GET /: what this address serves.
const rootHint = "this is the flow service's management API: its routes are under /api/v1/ " +
	"(document: GET /api/v1/openapi.json, health: GET /healthz), the dashboard is at /ui/"

// probeWriter captures what ServeMux would answer to an unmatched request.
type probeWriter struct {
	header http.Header
	status int
}

func (p *probeWriter) Header() http.Header { return p.header }
func (p *probeWriter) Write(b []byte) (int, error) {
	if p.status == 0 {
		p.status = http.StatusOK
	}
	return len(b), nil
}
func (p *probeWriter) WriteHeader(status int) {
	if p.status == 0 {
		p.status = status
	}
}
