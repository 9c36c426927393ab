package dashboard

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"

	"flowservice/pkg/automation"
)

// pagePermissions is the permission each signed-in dashboard route needs,
// by its ServeMux pattern, as the management API's routes do
// (docs/access.md). A GET missing here needs PermRead; any other method
// missing here is admin-only, so a new form is closed until someone
// decides (TestDashboardRoutesHavePermissions fails until then).
var pagePermissions = map[string]automation.Permission{
	"POST /ui/signout": automation.PermRead,
	// People (people.go): the People page is the admins'; a person's own
	// keys and the switcher are everyone's (a key may not exceed its
	// person's role, which CreatePersonalKey checks).
	"GET /ui/users":                              automation.PermAdmin,
	"POST /ui/users":                             automation.PermAdmin,
	"POST /ui/users/{userId}/role":               automation.PermAdmin,
	"POST /ui/users/{userId}/remove":             automation.PermAdmin,
	"POST /ui/account/keys":                      automation.PermRead,
	"POST /ui/account/keys/{keyId}/revoke":       automation.PermRead,
	"POST /ui/switch":                            automation.PermRead,
	"GET /ui/flows/new":                          automation.PermEdit,
	"POST /ui/flows":                             automation.PermEdit,
	"POST /ui/templates/{templateId}":            automation.PermEdit,
	"POST /ui/step-test":                         automation.PermEdit,
	"GET /ui/flows/{flowId}/edit":                automation.PermEdit,
	"POST /ui/flows/{flowId}/edit":               automation.PermEdit,
	"GET /ui/flows/{flowId}/delete":              automation.PermEdit,
	"POST /ui/flows/{flowId}/delete":             automation.PermEdit,
	"POST /ui/flows/{flowId}/runs/{runId}/retry": automation.PermOperate,
	"POST /ui/flows/{flowId}/enable":             automation.PermOperate,
	"POST /ui/flows/{flowId}/disable":            automation.PermOperate,
	"POST /ui/flows/{flowId}/allowlist":          automation.PermEdit,
	"POST /ui/flows/{flowId}/test":               automation.PermEdit,
	"POST /ui/connections":                       automation.PermEdit,
	"POST /ui/connections/{connectionId}/delete": automation.PermEdit,
	// Connect (and a connection's delete page) share this pattern; both
	// lead to a change of connections.
	"GET /ui/connections/{first}/{second}": automation.PermEdit,
	"POST /ui/flows/{flowId}/send-test":    automation.PermEdit,
	"POST /ui/variables":                   automation.PermEdit,
	"POST /ui/variables/{name}/delete":     automation.PermEdit,
	// Versions and drafts (versions.go).
	"POST /ui/flows/{flowId}/publish":                    automation.PermEdit,
	"POST /ui/flows/{flowId}/draft/discard":              automation.PermEdit,
	"POST /ui/flows/{flowId}/versions/{version}/restore": automation.PermEdit,
	"GET /ui/flows/{flowId}/versions/{version}/restore":  automation.PermEdit,
	// Keys (keys.go): their GETs show what only an admin may change.
	"GET /ui/keys":                                automation.PermAdmin,
	"POST /ui/keys":                               automation.PermAdmin,
	"GET /ui/keys/{keyId}/revoke":                 automation.PermAdmin,
	"POST /ui/keys/{keyId}/revoke":                automation.PermAdmin,
	"GET /ui/flows/{flowId}/runs/{runId}/cancel":  automation.PermOperate,
	"POST /ui/flows/{flowId}/runs/{runId}/cancel": automation.PermOperate,
	// The approvals inbox (approvals.go): shown to those who may decide.
	"GET /ui/approvals":                 automation.PermOperate,
	"POST /ui/approvals/{runId}/{step}": automation.PermOperate,
}

// pageAudit is the audit action of each dashboard form that changes
// something, as the API's routeAudit.
var pageAudit = map[string]struct{ action, resource, idParam string }{
	"POST /ui/flows":                  {"flow.create", "flow", ""},
	"POST /ui/templates/{templateId}": {"flow.create", "flow", ""},
	// A step test may send a request: who tried what is kept.
	"POST /ui/step-test":                         {"flow.test_step", "flow", ""},
	"POST /ui/flows/{flowId}/edit":               {"flow.update", "flow", "flowId"},
	"POST /ui/flows/{flowId}/delete":             {"flow.delete", "flow", "flowId"},
	"POST /ui/flows/{flowId}/runs/{runId}/retry": {"run.retry", "run", "runId"},
	"POST /ui/flows/{flowId}/enable":             {"flow.enable", "flow", "flowId"},
	"POST /ui/flows/{flowId}/disable":            {"flow.disable", "flow", "flowId"},
	"POST /ui/flows/{flowId}/allowlist":          {"flow.set_allowlist", "flow", "flowId"},
	"POST /ui/flows/{flowId}/test":               {"flow.arm_test", "flow", "flowId"},
	"POST /ui/connections":                       {"connection.create", "connection", ""},
	"POST /ui/connections/{connectionId}/delete": {"connection.delete", "connection", "connectionId"},
	"POST /ui/flows/{flowId}/send-test":          {"flow.send_test", "flow", "flowId"},
	"POST /ui/variables":                         {"variable.put", "variable", ""},
	"POST /ui/variables/{name}/delete":           {"variable.delete", "variable", "name"},
	"POST /ui/users":                             {"user.invite", "user", ""},
	"POST /ui/users/{userId}/role":               {"user.set_role", "user", "userId"},
	"POST /ui/users/{userId}/remove":             {"user.remove", "user", "userId"},
	"POST /ui/account/keys":                      {"key.create", "key", ""},
	"POST /ui/account/keys/{keyId}/revoke":       {"key.revoke", "key", "keyId"},
	// Versions and drafts (versions.go).
	"POST /ui/flows/{flowId}/publish":                    {"flow.publish", "flow", "flowId"},
	"POST /ui/flows/{flowId}/draft/discard":              {"flow.draft.discard", "flow", "flowId"},
	"POST /ui/flows/{flowId}/versions/{version}/restore": {"flow.restore", "flow", "flowId"},
	"POST /ui/keys":                               {"key.create", "key", ""},
	"POST /ui/keys/{keyId}/revoke":                {"key.revoke", "key", "keyId"},
	"POST /ui/flows/{flowId}/runs/{runId}/cancel": {"run.cancel", "run", "runId"},
	"POST /ui/approvals/{runId}/{step}":           {"approval.decide", "run", "runId"},
}

// pagePermission is what the route with pattern needs.
func pagePermission(pattern string) automation.Permission {
	if p, ok := pagePermissions[pattern]; ok {
		return p
	}
	if len(pattern) > 4 && pattern[:4] == "GET " {
		return automation.PermRead
	}
	return automation.PermAdmin
}

// authorize refuses a signed-in request its key's role does not allow, with
// the 403 page naming the role and what it lacks; a request it lets
// through that changes something gets its audit entry (see the API's
// withAudit).
func (d *Dashboard) authorize(w http.ResponseWriter, r *http.Request, s *session) (*http.Request, bool) {
	if err := s.principal.Authorize(pagePermission(r.Pattern), r.Pattern); err != nil {
		d.fail(w, r, err)
		return r, false
	}
	act, ok := pageAudit[r.Pattern]
	if !ok {
		return r, true
	}
	res := automation.AuditResource{Type: act.resource}
	if act.idParam != "" {
		res.ID = r.PathValue(act.idParam)
	}
	if act.resource == "run" {
		res.FlowID = r.PathValue("flowId")
	}
	id := newRequestID()
	w.Header().Set("X-Request-Id", id)
	e := d.svc.NewAuditEntry(s.principal, act.action, res, id, d.sourceIP(r))
	// A version the dashboard publishes says so (versions.go).
	ctx := automation.WithPublisher(automation.WithAudit(r.Context(), e), automation.PublisherDashboard)
	return r.WithContext(ctx), true
}

// newRequestID names a dashboard request in the audit log (and in its
// X-Request-Id header), as the API does its own.
func newRequestID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// sourceIP is the client address the audit log records: Options.ClientIP's,
// else the socket peer's.
func (d *Dashboard) sourceIP(r *http.Request) string {
	if d.opts.ClientIP != nil {
		if ip, ok := d.opts.ClientIP(r); ok {
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
