package httpapi

import (
	"context"
	"net"
	"net/http"
	"net/netip"

	"flowservice/pkg/automation"
)

// auditAction is what the audit log records for a write route: the action
// and the type of resource, whose ID is the path parameter idParam (or,
// for a create, the ID the Service makes).
type auditAction struct {
	action, resource, idParam string
}

// routeAudit is the audit action of every route that changes anything.
// TestEveryWriteRouteIsAudited fails for a write route missing here.
var routeAudit = map[string]auditAction{
	"POST /api/v1/flows":                                                        {"flow.create", "flow", ""},
	"POST /api/v1/flows/{flowId}":                                               {"flow.update", "flow", "flowId"},
	"POST /api/v1/flows/{flowId}/compare":                                       {"flow.compare", "flow", "flowId"},
	"DELETE /api/v1/flows/{flowId}":                                             {"flow.delete", "flow", "flowId"},
	"POST /api/v1/flows/{flowId}/enable":                                        {"flow.enable", "flow", "flowId"},
	"POST /api/v1/flows/{flowId}/disable":                                       {"flow.disable", "flow", "flowId"},
	"POST /api/v1/flows/{flowId}/webhook/security":                              {"flow.set_allowlist", "flow", "flowId"},
	"POST /api/v1/flows/{flowId}/webhook/test":                                  {"flow.arm_test", "flow", "flowId"},
	"POST /api/v1/flows/{flowId}/runs/{runId}/retry":                            {"run.retry", "run", "runId"},
	"POST /api/v1/flows/{flowId}/runs/{runId}/cancel":                           {"run.cancel", "run", "runId"},
	"POST /api/v1/runs/replay":                                                  {"run.replay", "project", ""},
	"POST /api/v1/runs/{runId}/approvals/{step}":                                {"approval.decide", "run", "runId"},
	"POST /api/v1/connections":                                                  {"connection.create", "connection", ""},
	"DELETE /api/v1/connections/{connectionId}":                                 {"connection.delete", "connection", "connectionId"},
	"PUT /api/v1/variables/{name}":                                              {"variable.put", "variable", "name"},
	"DELETE /api/v1/variables/{name}":                                           {"variable.delete", "variable", "name"},
	"POST /api/v1/flows/import":                                                 {"flow.import", "flow", ""},
	"POST /api/v1/subscriptions":                                                {"subscription.create", "subscription", ""},
	"DELETE /api/v1/subscriptions/{subscriptionId}":                             {"subscription.delete", "subscription", "subscriptionId"},
	"POST /api/v1/subscriptions/{subscriptionId}/test":                          {"subscription.test", "subscription", "subscriptionId"},
	"POST /api/v1/subscriptions/{subscriptionId}/enable":                        {"subscription.enable", "subscription", "subscriptionId"},
	"POST /api/v1/subscriptions/{subscriptionId}/deliveries/{deliveryId}/retry": {"delivery.retry", "subscription", "subscriptionId"},
	"PUT /api/v1/flows/{flowId}/draft":                                          {"flow.draft.save", "flow", "flowId"},
	"DELETE /api/v1/flows/{flowId}/draft":                                       {"flow.draft.discard", "flow", "flowId"},
	"POST /api/v1/flows/{flowId}/publish":                                       {"flow.publish", "flow", "flowId"},
	"POST /api/v1/flows/{flowId}/versions/{version}/restore":                    {"flow.restore", "flow", "flowId"},
	"POST /api/v1/users":                                                        {"user.invite", "user", ""},
	"DELETE /api/v1/users/{userId}":                                             {"user.remove", "user", "userId"},
	"POST /api/v1/users/{userId}/role":                                          {"user.set_role", "user", "userId"},
}

// WithClientIP sets how the API finds a request's client address for the
// audit log (on Lambda: API Gateway's source IP). Default: the socket peer.
func WithClientIP(f func(*http.Request) (netip.Addr, bool)) APIOption {
	return func(a *API) { a.clientIP = f }
}

// TrustedClientIP finds a client address as the webhook receivers do:
// the socket peer, or, from a peer in trusted, the right-most
// X-Forwarded-For entry that is not a trusted proxy. flowd passes it to
// WithClientIP and the dashboard, so that the audit log names clients, not
// the proxy in front of them.
func TrustedClientIP(trusted []netip.Prefix) func(*http.Request) (netip.Addr, bool) {
	rc := &receiver{cfg: HookConfig{TrustedProxies: trusted}}
	return rc.clientIP
}

// sourceIP is the client address the audit log records, "" when unknown.
func (a *API) sourceIP(r *http.Request) string {
	if a.clientIP != nil {
		if ip, ok := a.clientIP(r); ok {
			return ip.String()
		}
		return ""
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return ""
	}
	return host
}

// withAudit gives a write request its audit entry, which the store writes
// in the transaction of the change (automation.WithAudit). A request that
// changes nothing (refused, invalid, not found) leaves no entry.
func (a *API) withAudit(r *http.Request, pattern string, pr automation.Principal) *http.Request {
	act, ok := routeAudit[pattern]
	if !ok {
		return r
	}
	res := automation.AuditResource{Type: act.resource}
	switch {
	case act.idParam != "":
		res.ID = r.PathValue(act.idParam)
	case act.resource == "project":
		res.ID = pr.Project.ID
	}
	if act.resource == "run" {
		res.FlowID = r.PathValue("flowId")
	}
	e := a.svc.NewAuditEntry(pr, act.action, res, RequestID(r.Context()), a.sourceIP(r))
	return r.WithContext(automation.WithAudit(r.Context(), e))
}

// auditFallback writes the entry of a write that succeeded without any
// audited store write taking it (a store method that does not record
// entries yet), so that no change is missing from the log; it is logged as
// an error, since the entry is then not in the change's own commit.
func (a *API) auditFallback(w http.ResponseWriter, r *http.Request) {
	rec, ok := w.(*recorder)
	if !ok || rec.status < 200 || rec.status > 299 {
		return
	}
	e, ok := automation.AuditUntaken(r.Context())
	if !ok {
		return
	}
	a.log.ErrorContext(r.Context(), "audit entry written after its change: the route's store write does not record it",
		"action", e.Action, "requestId", e.RequestID)
	if err := a.svc.RecordAudit(context.WithoutCancel(r.Context()), e); err != nil {
		a.log.ErrorContext(r.Context(), "audit entry not written", "action", e.Action, "requestId", e.RequestID, "err", err)
	}
}

func (a *API) auditLog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, err := a.svc.AuditLog(r.Context(), projectOf(r), automation.AuditSearch{
		PageRequest: pageRequest(r), Since: q.Get("since"), Until: q.Get("until"),
		Action: q.Get("action"), Actor: q.Get("actor"),
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}
