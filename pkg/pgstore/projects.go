package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"flowservice/pkg/automation"
)

// CreateProject stores a new project; a taken name is ErrConflict
// (PROJECT_EXISTS).
func (s *Store) CreateProject(ctx context.Context, p automation.Project) error {
	return s.write(ctx, "create project "+p.ID, func(tx *txn) error {
		// The write transaction holds the lock, so nothing can take the
		// name between this check and the insert.
		var n int
		if err := tx.QueryRowContext(ctx,
			`SELECT count(*) FROM projects WHERE name = ?`, p.Name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return automation.Conflict("PROJECT_EXISTS", "project %q already exists", p.Name)
		}
		_, err := tx.ExecContext(ctx,
			`INSERT INTO projects (id, name, plan, created) VALUES (?, ?, ?, ?)`,
			p.ID, p.Name, string(p.Plan), formatTime(p.Created))
		return err
	})
}

const projectColumns = `id, name, plan, created, limits`

// Project returns the project with that ID.
func (s *Store) Project(ctx context.Context, id string) (automation.Project, error) {
	p, err := scanProject(s.readRow(ctx,
		`SELECT `+projectColumns+` FROM projects WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return automation.Project{}, automation.NotFound("project", id)
	} else if err != nil {
		return automation.Project{}, fmt.Errorf("pgstore: get project %s: %w", id, err)
	}
	return p, nil
}

// ProjectByName returns the project with that name.
func (s *Store) ProjectByName(ctx context.Context, name string) (automation.Project, error) {
	p, err := scanProject(s.r.QueryRowContext(ctx,
		`SELECT `+projectColumns+` FROM projects WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return automation.Project{}, automation.NotFound("project", name)
	} else if err != nil {
		return automation.Project{}, fmt.Errorf("pgstore: get project %q: %w", name, err)
	}
	return p, nil
}

// Projects lists all projects in creation order. Projects are few (one per
// team), so the list is not paged.
func (s *Store) Projects(ctx context.Context) ([]automation.Project, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+projectColumns+` FROM projects ORDER BY seq`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list projects: %w", err)
	}
	defer rows.Close()
	var out []automation.Project
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, fmt.Errorf("pgstore: list projects: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list projects: %w", err)
	}
	return out, nil
}

func scanProject(row rowScanner) (automation.Project, error) {
	var p automation.Project
	var plan, created, limits string
	if err := row.Scan(&p.ID, &p.Name, &plan, &created, &limits); err != nil {
		return p, err
	}
	p.Plan = automation.Plan(plan)
	var err error
	if p.LimitOverrides, err = decodeLimits(limits); err != nil {
		return p, err
	}
	p.Created, err = parseTime(created)
	return p, err
}

// CreateKey stores a new API key (its hash, never the key).
func (s *Store) CreateKey(ctx context.Context, k automation.APIKey) error {
	return s.write(ctx, "create key "+k.ID, func(tx *txn) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO api_keys (id, project, hash, prefix, created, revoked, role, user_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			k.ID, k.Project, k.Hash, k.Prefix, formatTime(k.Created), formatTimePtr(k.Revoked), keyRole(k.Role), k.User)
		return err
	})
}

const keyColumns = `id, project, hash, prefix, created, revoked, role, user_id`

// keyRole is the role stored for a key: a key made without one is admin,
// as every key was before roles existed.
func keyRole(r automation.Role) string {
	if r == "" {
		return string(automation.RoleAdmin)
	}
	return string(r)
}

// KeyByHash returns the key with that hash, revoked or not.
func (s *Store) KeyByHash(ctx context.Context, hash string) (automation.APIKey, error) {
	k, err := scanKey(s.readRow(ctx,
		`SELECT `+keyColumns+` FROM api_keys WHERE hash = ?`, hash))
	if errors.Is(err, sql.ErrNoRows) {
		// Not NotFound("api key", hash): the hash is no ID and has no
		// business in a message.
		return automation.APIKey{}, &automation.Error{
			Kind: automation.ErrNotFound, Code: "API_KEY_NOT_FOUND", Message: "api key not found"}
	} else if err != nil {
		return automation.APIKey{}, fmt.Errorf("pgstore: get key by hash: %w", err)
	}
	return k, nil
}

// Keys lists the keys of a project, or of all projects for "", in creation
// order.
func (s *Store) Keys(ctx context.Context, project string) ([]automation.APIKey, error) {
	q, args := `SELECT `+keyColumns+` FROM api_keys ORDER BY seq`, []any(nil)
	if project != "" {
		q, args = `SELECT `+keyColumns+` FROM api_keys WHERE project = ? ORDER BY seq`, []any{project}
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list keys: %w", err)
	}
	defer rows.Close()
	var out []automation.APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("pgstore: list keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list keys: %w", err)
	}
	return out, nil
}

// RevokeKey sets the key's revoked time; a key revoked before keeps its
// first revoked time.
func (s *Store) RevokeKey(ctx context.Context, id string, at time.Time) error {
	return s.write(ctx, "revoke key "+id, func(tx *txn) error {
		res, err := tx.ExecContext(ctx,
			`UPDATE api_keys SET revoked = ? WHERE id = ? AND revoked IS NULL`, formatTime(at), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM api_keys WHERE id = ?`, id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return automation.NotFound("api key", id)
		}
		return nil
	})
}

func scanKey(row rowScanner) (automation.APIKey, error) {
	var k automation.APIKey
	var created string
	var revoked sql.NullString
	if err := row.Scan(&k.ID, &k.Project, &k.Hash, &k.Prefix, &created, &revoked, &k.Role, &k.User); err != nil {
		return k, err
	}
	var err error
	if k.Created, err = parseTime(created); err != nil {
		return k, err
	}
	k.Revoked, err = parseTimePtr(revoked)
	return k, err
}
