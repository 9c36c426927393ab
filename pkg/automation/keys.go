package automation

import (
	"context"
	"slices"
)

// Keys of one project, managed by its admins (the dashboard's keys page).
// Operators make keys with flowctl on any project (CreateAPIKeyWithRole,
// RevokeAPIKey); these take the project of the caller, so a key of another
// project is a 404, never touched.

// ProjectKeys lists the project's keys, revoked ones included, oldest
// first. Only hashes are kept: no key can be shown again.
func (s *ProjectService) ProjectKeys(ctx context.Context, p Project) ([]APIKey, error) {
	return s.APIKeys(ctx, p.ID)
}

// CreateProjectKey issues a key with role for the project and returns it,
// the only time it is readable. An unknown role is a 400 naming "role".
// The request's audit entry (key.create) names the new key.
func (s *ProjectService) CreateProjectKey(ctx context.Context, p Project, role string) (string, APIKey, error) {
	r, err := ParseRole("role", role)
	if err != nil {
		return "", APIKey{}, err
	}
	secret, k, err := s.createAPIKey(ctx, p.ID, r)
	if err != nil {
		return "", APIKey{}, err
	}
	auditCreated(ctx, k.ID)
	s.auditAfter(ctx, "create key")
	return secret, k, nil
}

// RevokeProjectKey revokes one of the project's keys at once. The last
// live admin key is refused (409 LAST_ADMIN_KEY): without it nobody could
// manage the project's keys but an operator with flowctl.
func (s *ProjectService) RevokeProjectKey(ctx context.Context, p Project, keyID string) error {
	ks, err := s.APIKeys(ctx, p.ID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(ks, func(k APIKey) bool { return k.ID == keyID })
	if i < 0 {
		return NotFound("api key", keyID)
	}
	k := ks[i]
	if k.Revoked != nil {
		return Conflict("KEY_REVOKED", "key %s was revoked already", k.ID)
	}
	if keyRole(k) == RoleAdmin {
		admins := 0
		for _, o := range ks {
			if o.Revoked == nil && keyRole(o) == RoleAdmin {
				admins++
			}
		}
		if admins <= 1 {
			return Conflict("LAST_ADMIN_KEY", "key %s is the project's last admin key: create another admin key before revoking it", k.ID)
		}
	}
	if err := s.RevokeAPIKey(ctx, k.ID); err != nil {
		return err
	}
	s.auditAfter(ctx, "revoke key")
	return nil
}

// keyRole is a key's role, admin for a key made before roles existed.
func keyRole(k APIKey) Role {
	if k.Role == "" {
		return RoleAdmin
	}
	return k.Role
}

// auditAfter writes the request's audit entry for a change whose store
// write does not carry it (keys are written on their own), once the
// change is made.
func (s *ProjectService) auditAfter(ctx context.Context, what string) {
	e, ok := AuditFrom(ctx)
	if !ok {
		return
	}
	if err := s.RecordAudit(context.WithoutCancel(ctx), e); err != nil {
		s.log.ErrorContext(ctx, "audit entry not written", "change", what, "err", err)
	}
}
