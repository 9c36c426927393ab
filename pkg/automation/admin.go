package automation

import (
	"context"
	"crypto/subtle"
	"errors"
	"regexp"
	"slices"
	"strings"
)

var projectNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// CreateProject makes a project. Names are unique, lower-case letters, digits
// and dashes, because the CLI addresses projects by name.
func (s *ProjectService) CreateProject(ctx context.Context, name string, plan Plan) (Project, error) {
	if !projectNameRE.MatchString(name) {
		return Project{}, Invalid("project name %q: use 1 to 63 lower-case letters, digits and dashes, starting with a letter or digit", name)
	}
	if !slices.Contains(Plans, plan) {
		return Project{}, Invalid("plan %q: allowed values are %s", plan, join(Plans))
	}
	p := Project{ID: s.newID(PrefixProject), Name: name, Plan: plan, Created: s.clock()}
	if err := s.store.CreateProject(ctx, p); err != nil {
		return Project{}, wrap("create project", err)
	}
	return p, nil
}

// Projects lists all projects.
func (s *ProjectService) Projects(ctx context.Context) ([]Project, error) {
	ps, err := s.store.Projects(ctx)
	return ps, wrap("list projects", err)
}

// ProjectByName finds a project by name.
func (s *ProjectService) ProjectByName(ctx context.Context, name string) (Project, error) {
	p, err := s.store.ProjectByName(ctx, name)
	if err != nil {
		return Project{}, wrap("find project", err)
	}
	return p, nil
}

// CreateAPIKey issues a key for a project. The key is returned once and only
// its hash is kept.
func (s *ProjectService) CreateAPIKey(ctx context.Context, projectID string) (string, APIKey, error) {
	return s.createAPIKey(ctx, projectID, RoleAdmin)
}

func (s *ProjectService) createAPIKey(ctx context.Context, projectID string, role Role) (string, APIKey, error) {
	if _, err := s.store.Project(ctx, projectID); err != nil {
		return "", APIKey{}, wrap("create key", err)
	}
	secret := newAPIKey()
	k := APIKey{
		ID: s.newID(PrefixKey), Project: projectID, Hash: HashAPIKey(secret),
		Prefix: secret[:len(PrefixAPIKey)+6], Created: s.clock(), Role: role,
	}
	if err := s.store.CreateKey(ctx, k); err != nil {
		return "", APIKey{}, wrap("create key", err)
	}
	return secret, k, nil
}

// APIKeys lists the keys of a project, or of all projects for "".
func (s *ProjectService) APIKeys(ctx context.Context, projectID string) ([]APIKey, error) {
	ks, err := s.store.Keys(ctx, projectID)
	return ks, wrap("list keys", err)
}

// RevokeAPIKey revokes a key at once: the next request with it is a 401.
func (s *ProjectService) RevokeAPIKey(ctx context.Context, keyID string) error {
	return wrap("revoke key", s.store.RevokeKey(ctx, keyID, s.clock()))
}

// Authenticate returns the project of a bearer key. Every failure is the same
// 401, so a caller learns nothing about which keys exist.
func (s *ProjectService) Authenticate(ctx context.Context, key string) (Project, error) {
	if !validKeyShape(key) {
		return Project{}, deniedKey()
	}
	return s.AuthenticateKeyHash(ctx, HashAPIKey(key))
}

// validKeyShape rejects what cannot be a key before any hashing or lookup.
func validKeyShape(key string) bool {
	return strings.HasPrefix(key, PrefixAPIKey) && len(key) <= 128
}

// AuthenticateKeyHash is Authenticate for a caller that keeps only the hash
// of a key (HashAPIKey), such as a dashboard session: it checks the key
// again on every call, so a revoked key stops working at once.
func (s *ProjectService) AuthenticateKeyHash(ctx context.Context, hash string) (Project, error) {
	_, p, err := s.keyByHash(ctx, hash)
	return p, err
}

// keyByHash finds a live key by its hash, with its project.
func (s *ProjectService) keyByHash(ctx context.Context, hash string) (APIKey, Project, error) {
	if len(hash) != 64 {
		return APIKey{}, Project{}, deniedKey()
	}
	k, err := s.store.KeyByHash(ctx, hash)
	if errors.Is(err, ErrNotFound) {
		return APIKey{}, Project{}, deniedKey()
	} else if err != nil {
		return APIKey{}, Project{}, wrap("authenticate", err)
	}
	// The lookup was by hash; compare again in constant time so that no
	// store's index comparison decides alone.
	if subtle.ConstantTimeCompare([]byte(k.Hash), []byte(hash)) != 1 || k.Revoked != nil {
		return APIKey{}, Project{}, deniedKey()
	}
	p, err := s.store.Project(ctx, k.Project)
	if errors.Is(err, ErrNotFound) {
		return APIKey{}, Project{}, deniedKey()
	} else if err != nil {
		return APIKey{}, Project{}, wrap("authenticate", err)
	}
	if k.Role == "" {
		k.Role = RoleAdmin
	}
	if k.User != "" {
		// A personal key works while its person is a member, with at most
		// the role they have now: a removal or a demotion holds from the
		// next request even before (or without) the key's revocation.
		if s.users == nil {
			return APIKey{}, Project{}, deniedKey()
		}
		m, err := s.users.Membership(ctx, k.Project, k.User)
		if errors.Is(err, ErrNotFound) {
			return APIKey{}, Project{}, deniedKey()
		} else if err != nil {
			return APIKey{}, Project{}, wrap("authenticate", err)
		}
		k.Role = lesserRole(k.Role, m.Role)
	}
	return k, p, nil
}

func deniedKey() *Error {
	return Unauthorized("UNAUTHORIZED", "missing or invalid API key: send Authorization: Bearer <API key>")
}

func join[T ~string](vs []T) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = string(v)
	}
	return strings.Join(parts, ", ")
}

// DefaultProject is the project flowd creates on its first start.
const DefaultProject = "default"

// Bootstrap gives an empty installation its first project, "default" on the
// ENTERPRISE plan, and one API key for it, which it returns. When a project
// exists already it does nothing and returns "".
func (s *ProjectService) Bootstrap(ctx context.Context) (string, error) {
	ps, err := s.store.Projects(ctx)
	if err != nil {
		return "", wrap("bootstrap", err)
	}
	if len(ps) > 0 {
		return "", nil
	}
	p, err := s.CreateProject(ctx, DefaultProject, PlanEnterprise)
	if err != nil {
		return "", err
	}
	key, _, err := s.CreateAPIKey(ctx, p.ID)
	return key, err
}
