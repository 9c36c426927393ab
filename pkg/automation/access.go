package automation

import (
	"context"
	"slices"
)

// Role is what an API key may do in its project (docs/access.md).
type Role string

// Roles, from most to least powerful. Keys made before roles existed are
// admin keys: a store that finds no role reports RoleAdmin.
const (
	RoleAdmin    Role = "admin"    // everything
	RoleEditor   Role = "editor"   // flows, drafts, connections, variables, subscriptions, runs
	RoleOperator Role = "operator" // enable, disable, retry, replay; read everything
	RoleViewer   Role = "viewer"   // read only
)

// Roles lists the roles in the order error messages name them.
var Roles = []Role{RoleAdmin, RoleEditor, RoleOperator, RoleViewer}

// Permission is one kind of request a role may or may not make. Every
// management route needs exactly one.
type Permission string

// Permissions, each granted to a set of roles (Role.Can).
const (
	// PermRead reads anything of the project.
	PermRead Permission = "read"
	// PermOperate starts and stops what exists: enable, disable, retry, replay.
	PermOperate Permission = "operate"
	// PermEdit changes definitions: flows, drafts, connections, variables,
	// subscriptions.
	PermEdit Permission = "edit"
	// PermAdmin administers the project itself.
	PermAdmin Permission = "admin"
)

// Permissions lists every permission.
var Permissions = []Permission{PermRead, PermOperate, PermEdit, PermAdmin}

// grants is the one table of who may do what.
var grants = map[Role][]Permission{
	RoleAdmin:    {PermRead, PermOperate, PermEdit, PermAdmin},
	RoleEditor:   {PermRead, PermOperate, PermEdit},
	RoleOperator: {PermRead, PermOperate},
	RoleViewer:   {PermRead},
}

// Can reports whether r grants p. An unknown role grants nothing.
func (r Role) Can(p Permission) bool { return slices.Contains(grants[r], p) }

// RolesWith lists the roles that grant p, in Roles order.
func RolesWith(p Permission) []Role {
	var out []Role
	for _, r := range Roles {
		if r.Can(p) {
			out = append(out, r)
		}
	}
	return out
}

// permissionText says in words what a permission allows, for the 403.
var permissionText = map[Permission]string{
	PermRead:    "read the project",
	PermOperate: "enable, disable, retry or replay",
	PermEdit:    "change flows, connections and other definitions",
	PermAdmin:   "administer the project",
}

// ParseRole checks a role named by a client or an operator; "" is admin, the
// default of flowctl keys create. field names the input in the message.
func ParseRole(field, s string) (Role, error) {
	if s == "" {
		return RoleAdmin, nil
	}
	if r := Role(s); slices.Contains(Roles, r) {
		return r, nil
	}
	return "", Invalid("%s %q: allowed values are %s", field, ClipID(s), join(Roles))
}

// Principal is who makes a management request: the project, and the key
// or the person (a dashboard session), with the role.
type Principal struct {
	Project Project
	KeyID   string
	Role    Role
	// UserID and Email name a person signed in to the dashboard (users.go);
	// "" for an API key.
	UserID string
	Email  string
}

// Authorize returns nil when the principal's role grants p, and otherwise
// the 403 FORBIDDEN that names the role, what it lacks and, as what, the
// request (for example "POST /api/v1/flows").
func (pr Principal) Authorize(p Permission, what string) error {
	if pr.Role.Can(p) {
		return nil
	}
	return Forbidden("FORBIDDEN", "the %s role may not %s (%s needs the %q permission, granted to: %s)",
		pr.Role, permissionText[p], what, p, join(RolesWith(p)))
}

// CreateAPIKeyWithRole issues a key with a role for a project; see
// CreateAPIKey. An unknown role is a 400 naming the field "role".
func (s *ProjectService) CreateAPIKeyWithRole(ctx context.Context, projectID string, role Role) (string, APIKey, error) {
	r, err := ParseRole("role", string(role))
	if err != nil {
		return "", APIKey{}, err
	}
	return s.createAPIKey(ctx, projectID, r)
}

// AuthenticatePrincipal is Authenticate that also returns the key's ID and
// role, for the management API's authorization and audit.
func (s *ProjectService) AuthenticatePrincipal(ctx context.Context, key string) (Principal, error) {
	if !validKeyShape(key) {
		return Principal{}, deniedKey()
	}
	return s.PrincipalByKeyHash(ctx, HashAPIKey(key))
}

// personOfKey names the person whose personal key keyID is ("", "" for a
// project key): an approval counts a person once, whichever of their
// keys answers. Read at a decision only, not on every request.
func (s *ProjectService) personOfKey(ctx context.Context, project, keyID string) (userID, email string, err error) {
	if keyID == "" || s.users == nil {
		return "", "", nil
	}
	keys, err := s.store.Keys(ctx, project)
	if err != nil {
		return "", "", wrap("read keys", err)
	}
	for _, k := range keys {
		if k.ID != keyID || k.User == "" {
			continue
		}
		u, err := s.users.User(ctx, k.User)
		if err != nil {
			return "", "", wrap("read the key's person", err)
		}
		return u.ID, u.Email, nil
	}
	return "", "", nil
}

// PrincipalByKeyHash is AuthenticateKeyHash that also returns the key's ID
// and role, for the dashboard's sessions.
func (s *ProjectService) PrincipalByKeyHash(ctx context.Context, hash string) (Principal, error) {
	k, p, err := s.keyByHash(ctx, hash)
	if err != nil {
		return Principal{}, err
	}
	return Principal{Project: p, KeyID: k.ID, Role: k.Role}, nil
}
