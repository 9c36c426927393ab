package httpapi

import (
	"net/http"

	"flowservice/pkg/automation"
)

// routePermissions is the permission each authenticated route needs; the
// roles that grant it are automation.RolesWith. openapi.json states the same
// as each operation's x-roles, and TestRoleMatrix walks every route of the
// document with every role, so the two cannot drift apart.
var routePermissions = map[string]automation.Permission{
	"GET /api/v1/flows":                                                         automation.PermRead,
	"POST /api/v1/flows":                                                        automation.PermEdit,
	"GET /api/v1/flows/{flowId}":                                                automation.PermRead,
	"POST /api/v1/flows/{flowId}":                                               automation.PermEdit,
	"DELETE /api/v1/flows/{flowId}":                                             automation.PermEdit,
	"POST /api/v1/flows/{flowId}/enable":                                        automation.PermOperate,
	"POST /api/v1/flows/{flowId}/disable":                                       automation.PermOperate,
	"GET /api/v1/flows/{flowId}/webhook":                                        automation.PermRead,
	"GET /api/v1/flows/{flowId}/webhook/security":                               automation.PermRead,
	"POST /api/v1/flows/{flowId}/webhook/security":                              automation.PermEdit,
	"POST /api/v1/flows/{flowId}/webhook/test":                                  automation.PermEdit,
	"GET /api/v1/flows/{flowId}/webhook/sample":                                 automation.PermRead,
	"GET /api/v1/flows/{flowId}/runs":                                           automation.PermRead,
	"GET /api/v1/flows/{flowId}/runs/{runId}":                                   automation.PermRead,
	"GET /api/v1/flows/{flowId}/insights":                                       automation.PermRead,
	"POST /api/v1/flows/{flowId}/runs/{runId}/retry":                            automation.PermOperate,
	"POST /api/v1/flows/{flowId}/runs/{runId}/cancel":                           automation.PermOperate,
	"GET /api/v1/runs":                                                          automation.PermRead,
	"POST /api/v1/runs/replay":                                                  automation.PermOperate,
	"GET /api/v1/connections":                                                   automation.PermRead,
	"GET /api/v1/apps":                                                          automation.PermRead,
	"POST /api/v1/connections":                                                  automation.PermEdit,
	"GET /api/v1/connections/{connectionId}":                                    automation.PermRead,
	"DELETE /api/v1/connections/{connectionId}":                                 automation.PermEdit,
	"GET /api/v1/audit":                                                         automation.PermRead,
	"GET /api/v1/project":                                                       automation.PermRead,
	"GET /api/v1/variables":                                                     automation.PermRead,
	"GET /api/v1/variables/{name}":                                              automation.PermRead,
	"PUT /api/v1/variables/{name}":                                              automation.PermEdit,
	"DELETE /api/v1/variables/{name}":                                           automation.PermEdit,
	"GET /api/v1/flows/{flowId}/export":                                         automation.PermRead,
	"POST /api/v1/flows/import":                                                 automation.PermEdit,
	"POST /api/v1/flows/{flowId}/compare":                                       automation.PermEdit,
	"GET /api/v1/subscriptions":                                                 automation.PermRead,
	"POST /api/v1/subscriptions":                                                automation.PermEdit,
	"GET /api/v1/subscriptions/{subscriptionId}":                                automation.PermRead,
	"DELETE /api/v1/subscriptions/{subscriptionId}":                             automation.PermEdit,
	"POST /api/v1/subscriptions/{subscriptionId}/test":                          automation.PermEdit,
	"POST /api/v1/subscriptions/{subscriptionId}/enable":                        automation.PermEdit,
	"GET /api/v1/subscriptions/{subscriptionId}/deliveries":                     automation.PermRead,
	"POST /api/v1/subscriptions/{subscriptionId}/deliveries/{deliveryId}/retry": automation.PermOperate,
	"GET /api/v1/flows/{flowId}/draft":                                          automation.PermRead,
	"PUT /api/v1/flows/{flowId}/draft":                                          automation.PermEdit,
	"DELETE /api/v1/flows/{flowId}/draft":                                       automation.PermEdit,
	"POST /api/v1/flows/{flowId}/publish":                                       automation.PermEdit,
	"GET /api/v1/flows/{flowId}/versions":                                       automation.PermRead,
	"GET /api/v1/flows/{flowId}/versions/{version}":                             automation.PermRead,
	"POST /api/v1/flows/{flowId}/versions/{version}/restore":                    automation.PermEdit,
	// People are the admins' to manage: even their list names emails.
	"GET /api/v1/users":                          automation.PermAdmin,
	"POST /api/v1/users":                         automation.PermAdmin,
	"GET /api/v1/users/{userId}":                 automation.PermAdmin,
	"DELETE /api/v1/users/{userId}":              automation.PermAdmin,
	"POST /api/v1/users/{userId}/role":           automation.PermAdmin,
	"GET /api/v1/approvals":                      automation.PermRead,
	"POST /api/v1/runs/{runId}/approvals/{step}": automation.PermOperate,
	// tools/list is a read; tools/call asks for PermOperate itself
	// (pkg/mcpserver), in the protocol's answer.
	"POST /mcp": automation.PermRead,
}

// permissionOf is the permission a route needs. A route missing from
// routePermissions is admin-only: a new route is closed until someone
// decides who may call it (and TestRoleMatrix fails until then).
func permissionOf(pattern string) automation.Permission {
	if p, ok := routePermissions[pattern]; ok {
		return p
	}
	return automation.PermAdmin
}

// authorize refuses, with 403 FORBIDDEN naming the role and what it lacks,
// a request whose key's role does not grant what the route needs. It runs
// after authenticate, which found the role.
func (a *API) authorize(pattern string, next http.Handler) http.Handler {
	need := permissionOf(pattern)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := infoOf(r.Context())
		pr := automation.Principal{Project: info.project, KeyID: info.keyID, Role: info.role}
		if err := pr.Authorize(need, pattern); err != nil {
			a.fail(w, r, err)
			return
		}
		r = a.withAudit(r, pattern, pr)
		next.ServeHTTP(w, r)
		a.auditFallback(w, r)
	})
}
