package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"flowservice/pkg/automation"
)

// roleKeys makes one key of every role in a new ENTERPRISE project.
func roleKeys(t *testing.T, srv *testServer) map[automation.Role]string {
	t.Helper()
	ctx := context.Background()
	p, err := srv.svc.CreateProject(ctx, "roles-"+strings.ToLower(automation.NewID("")[:8]), automation.PlanEnterprise)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[automation.Role]string{}
	for _, r := range automation.Roles {
		key, k, err := srv.svc.CreateAPIKeyWithRole(ctx, p.ID, r)
		if err != nil {
			t.Fatal(err)
		}
		if k.Role != r {
			t.Fatalf("CreateAPIKeyWithRole(%s) made a %q key", r, k.Role)
		}
		keys[r] = key
	}
	return keys
}

// TestRoleMatrix walks every operation of openapi.json that needs a key,
// with a key of every role, and checks that exactly the roles the
// operation's x-roles names get past authorization. An operation without
// x-roles fails, so a new route cannot ship without deciding who may call it.
// Path parameters are IDs that exist nowhere: an allowed call then ends in
// a 404 or 400 and changes nothing, a refused one is 403 FORBIDDEN.
func TestRoleMatrix(t *testing.T) {
	doc, _ := loadSpec(t)
	srv, _ := newTestServer(t)
	keys := roleKeys(t, srv)
	n := 0
	for path, item := range doc.Paths.Map() {
		if len(item.Servers) > 0 {
			continue // the webhook receivers take no management key
		}
		for method, op := range item.Operations() {
			if !needsKey(op) {
				continue // public, or its own token (/metrics): no role
			}
			n++
			route := method + " " + path
			raw, ok := op.Extensions["x-roles"]
			if !ok {
				roles, _ := json.Marshal(automation.RolesWith(permissionOf(route)))
				t.Errorf("%s: no x-roles in openapi.json; give the route its permission in routePermissions (access.go) "+
					"and the operation \"x-roles\": %s", route, roles)
				continue
			}
			var allowed []automation.Role
			list, _ := raw.([]any)
			for _, v := range list {
				s, _ := v.(string)
				if _, err := automation.ParseRole("x-roles", s); err != nil || s == "" {
					t.Errorf("%s: x-roles names %v: not a role", route, v)
				}
				allowed = append(allowed, automation.Role(s))
			}
			if want := automation.RolesWith(permissionOf(route)); !slices.Equal(allowed, want) {
				t.Errorf("%s: x-roles %v, but the route needs %q, which %v have", route, allowed, permissionOf(route), want)
			}
			url := strings.NewReplacer("{flowId}", "flw_nosuchflow", "{runId}", "run_nosuchrun",
				"{connectionId}", "con_nosuchconnection").Replace(path)
			body := ""
			if method == http.MethodPost || method == http.MethodPut {
				body = `{}`
			}
			for _, role := range automation.Roles {
				res := call(t, srv, method, url, keys[role], body)
				refused := res.status == http.StatusForbidden && res.errorOf(t).Code == "FORBIDDEN"
				if want := slices.Contains(allowed, role); refused == want {
					t.Errorf("%s as %s: %d %s; x-roles %v", route, role, res.status, res.body, allowed)
				} else if refused && !strings.Contains(res.errorOf(t).Message, string(role)) {
					t.Errorf("%s as %s: the 403 does not name the role: %s", route, role, res.body)
				}
			}
		}
	}
	if n < len(routePermissions) {
		t.Errorf("walked %d operations with a key, but %d routes have permissions", n, len(routePermissions))
	}
}

// needsKey reports whether an operation takes the management API key: the
// document's default security, or its own naming bearerAuth.
func needsKey(op *openapi3.Operation) bool {
	if op.Security == nil {
		return true
	}
	for _, req := range *op.Security {
		if _, ok := req["bearerAuth"]; ok {
			return true
		}
	}
	return false
}

// TestEveryRouteHasAPermission: a route served with a key is in
// routePermissions (otherwise it would be admin-only by default).
func TestEveryRouteHasAPermission(t *testing.T) {
	a := NewAPI(nil, nil).(*API)
	for _, rt := range a.routes() {
		if _, ok := routePermissions[rt.pattern]; !ok && !rt.public {
			t.Errorf("route %s has no entry in routePermissions", rt.pattern)
		}
	}
}

// TestViewerCannotChangeAnything: a viewer reads, and every write is a 403
// naming the role and what it lacks, with nothing changed; the editor's
// flow is untouched by the viewer's and operator's attempts.
func TestViewerCannotChangeAnything(t *testing.T) {
	srv, _ := newTestServer(t)
	keys := roleKeys(t, srv)
	f := createFlow(t, srv, keys[automation.RoleEditor], flowBuilderBody)

	call(t, srv, "GET", "/api/v1/flows/"+f.ID, keys[automation.RoleViewer], "").into(t, http.StatusOK, &flowView{})
	e := call(t, srv, "POST", "/api/v1/flows/"+f.ID, keys[automation.RoleViewer], `{"name":"Renamed"}`).
		wantError(t, http.StatusForbidden, "FORBIDDEN")
	for _, want := range []string{"viewer", "change flows", "edit", "admin, editor"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("403 message %q does not say %q", e.Message, want)
		}
	}
	call(t, srv, "POST", "/api/v1/flows/"+f.ID+"/enable", keys[automation.RoleViewer], "").
		wantError(t, http.StatusForbidden, "FORBIDDEN")
	call(t, srv, "DELETE", "/api/v1/flows/"+f.ID, keys[automation.RoleOperator], "").
		wantError(t, http.StatusForbidden, "FORBIDDEN")
	// The operator may enable what it may not edit.
	var got flowView
	call(t, srv, "POST", "/api/v1/flows/"+f.ID+"/enable", keys[automation.RoleOperator], "").into(t, http.StatusOK, &got)
	if got.Status != "ACTIVE" || got.Name != "Deploy" {
		t.Errorf("after the refused writes and the operator's enable: %+v, want Deploy ACTIVE", got)
	}
}

// TestCreateKeyBadRole: an unknown role is a 400 naming the field and the
// allowed values.
func TestCreateKeyBadRole(t *testing.T) {
	srv, _ := newTestServer(t)
	p, err := srv.svc.CreateProject(context.Background(), "badrole", automation.PlanFree)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = srv.svc.CreateAPIKeyWithRole(context.Background(), p.ID, "owner")
	var e *automation.Error
	if !errors.As(err, &e) || e.Kind != automation.ErrInvalid || !strings.Contains(e.Message, "role") ||
		!strings.Contains(e.Message, "admin, editor, operator, viewer") {
		t.Errorf("role owner: err = %v, want a 400 naming role and the allowed values", err)
	}
}

// TestTypedConnectionsAgainstTheDocument: BASIC, HEADER and QUERY
// connections and fenced ones are made through the validating client (the
// exchange matches openapi.json), answers never carry the values, and a
// wrong shape is a 400 naming the field.
func TestTypedConnectionsAgainstTheDocument(t *testing.T) {
	srv, key := newTestServer(t)
	for _, tt := range []struct{ typ, value, secret string }{
		{"BASIC", `{"username": "alice", "password": "s3cret-basic"}`, "s3cret-basic"},
		{"HEADER", `{"name": "X-Token", "value": "s3cret-header"}`, "s3cret-header"},
		{"QUERY", `{"name": "key", "value": "s3cret-query"}`, "s3cret-query"},
	} {
		res := call(t, srv, "POST", "/api/v1/connections", key, `{"name": "n", "app": "a", "type": "`+tt.typ+`", "value": `+tt.value+`, "allowedHosts": ["api.example.com"]}`)
		var c struct {
			ID, Type     string
			AllowedHosts []string
		}
		res.into(t, http.StatusCreated, &c)
		got := call(t, srv, "GET", "/api/v1/connections/"+c.ID, key, "")
		list := call(t, srv, "GET", "/api/v1/connections", key, "")
		for _, body := range [][]byte{res.body, got.body, list.body} {
			if strings.Contains(string(body), tt.secret) {
				t.Errorf("%s: an answer shows the value: %s", tt.typ, body)
			}
		}
		if c.Type != tt.typ || len(c.AllowedHosts) != 1 {
			t.Errorf("%s connection = %+v", tt.typ, c)
		}
	}
	e := call(t, srv, "POST", "/api/v1/connections", key, `{"name": "n", "app": "a", "type": "BASIC", "value": {"username": "u", "pass": "p"}}`).
		wantError(t, http.StatusBadRequest, "VALIDATION_ERROR")
	if !strings.Contains(e.Message, "value.pass") {
		t.Errorf("unknown field: %q", e.Message)
	}
	e = call(t, srv, "POST", "/api/v1/connections", key, `{"name": "n", "app": "a", "type": "DIGEST", "value": {}}`).
		wantError(t, http.StatusBadRequest, "VALIDATION_ERROR")
	if !strings.Contains(e.Message, "BASIC, HEADER, QUERY") {
		t.Errorf("unknown type: %q", e.Message)
	}
	e = call(t, srv, "POST", "/api/v1/connections", key, `{"name": "n", "app": "a", "type": "HEADER", "value": {"name": "X-T", "value": "v"}, "allowedHosts": ["*"]}`).
		wantError(t, http.StatusBadRequest, "VALIDATION_ERROR")
	if !strings.Contains(e.Message, "allowedHosts[0]") {
		t.Errorf("allowedHosts [*]: %q", e.Message)
	}
}
