package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"flowservice/pkg/automation"
)

var _ automation.UserStore = (*Store)(nil)

func userExists(email string) *automation.Error {
	return automation.Conflict("USER_EXISTS", "a user with the email %s exists already", email)
}

// CreateUser stores a new user; a taken email is USER_EXISTS.
func (s *Store) CreateUser(ctx context.Context, u automation.User) error {
	return s.write(ctx, "create user "+u.ID, func(tx *txn) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO users (id, email, password_hash, created, session_epoch) VALUES (?, ?, ?, ?, ?)`,
			u.ID, u.Email, u.PasswordHash, formatTime(u.Created), u.SessionEpoch)
		if isUnique(err) {
			return userExists(u.Email)
		}
		return err
	})
}

const userColumns = `id, email, password_hash, created, session_epoch`

func scanUser(row rowScanner, what string) (automation.User, error) {
	var u automation.User
	var created string
	err := row.Scan(&u.ID, &u.Email, &u.PasswordHash, &created, &u.SessionEpoch)
	if errors.Is(err, sql.ErrNoRows) {
		return u, automation.NotFound("user", what)
	} else if err != nil {
		return u, fmt.Errorf("pgstore: read user: %w", err)
	}
	u.Created, err = parseTime(created)
	return u, err
}

// User returns a user by ID.
func (s *Store) User(ctx context.Context, id string) (automation.User, error) {
	return scanUser(s.readRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = ?`, id), id)
}

// UserByEmail returns a user by email.
func (s *Store) UserByEmail(ctx context.Context, email string) (automation.User, error) {
	return scanUser(s.readRow(ctx, `SELECT `+userColumns+` FROM users WHERE email = ?`, email), email)
}

// updateUser runs one UPDATE of a user's row; no row is ErrNotFound.
func (s *Store) updateUser(ctx context.Context, op, id, stmt string, args ...any) error {
	return s.write(ctx, op+" "+id, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, stmt, args...)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return automation.NotFound("user", id)
		}
		return nil
	})
}

// SetPassword replaces a user's password hash.
func (s *Store) SetPassword(ctx context.Context, id, hash string) error {
	return s.updateUser(ctx, "set password", id, `UPDATE users SET password_hash = ? WHERE id = ?`, hash, id)
}

// EndSessions moves the user's session epoch on and drops their stored
// sessions, which no longer count.
func (s *Store) EndSessions(ctx context.Context, id string) error {
	return s.write(ctx, "end sessions "+id, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE users SET session_epoch = session_epoch + 1 WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return automation.NotFound("user", id)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_id = ?`, id)
		return err
	})
}

// PutMembership creates or replaces a membership; a replaced one keeps its
// place in the lists.
func (s *Store) PutMembership(ctx context.Context, m automation.Membership) error {
	return s.writeAudited(ctx, "put membership "+m.User, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO memberships (project, user_id, role, created, seq)
			VALUES (?, ?, ?, ?, (SELECT coalesce(max(seq), 0) + 1 FROM memberships))
			ON CONFLICT (project, user_id) DO UPDATE SET role = excluded.role`,
			m.Project, m.User, string(m.Role), formatTime(m.Created))
		return err
	})
}

const membershipColumns = `project, user_id, role, created`

func scanMembership(row rowScanner) (automation.Membership, error) {
	var m automation.Membership
	var role, created string
	if err := row.Scan(&m.Project, &m.User, &role, &created); err != nil {
		return m, err
	}
	m.Role = automation.Role(role)
	var err error
	m.Created, err = parseTime(created)
	return m, err
}

// Membership returns the user's membership in the project.
func (s *Store) Membership(ctx context.Context, project, user string) (automation.Membership, error) {
	m, err := scanMembership(s.readRow(ctx,
		`SELECT `+membershipColumns+` FROM memberships WHERE project = ? AND user_id = ?`, project, user))
	if errors.Is(err, sql.ErrNoRows) {
		return m, automation.NotFound("user", user)
	} else if err != nil {
		return m, fmt.Errorf("pgstore: read membership: %w", err)
	}
	return m, nil
}

func (s *Store) memberships(ctx context.Context, q string, arg string) ([]automation.Membership, error) {
	rows, err := s.r.QueryContext(ctx, q, arg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list memberships: %w", err)
	}
	defer rows.Close()
	var out []automation.Membership
	for rows.Next() {
		m, err := scanMembership(rows)
		if err != nil {
			return nil, fmt.Errorf("pgstore: list memberships: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list memberships: %w", err)
	}
	return out, nil
}

// Memberships lists a user's memberships, oldest first.
func (s *Store) Memberships(ctx context.Context, user string) ([]automation.Membership, error) {
	return s.memberships(ctx, `SELECT `+membershipColumns+` FROM memberships WHERE user_id = ? ORDER BY seq`, user)
}

// Members lists a project's memberships, oldest first.
func (s *Store) Members(ctx context.Context, project string) ([]automation.Membership, error) {
	return s.memberships(ctx, `SELECT `+membershipColumns+` FROM memberships WHERE project = ? ORDER BY seq`, project)
}

// DeleteMembership removes a membership and revokes the user's keys in the
// project, in one transaction.
func (s *Store) DeleteMembership(ctx context.Context, project, user string, at time.Time) error {
	return s.writeAudited(ctx, "delete membership "+user, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM memberships WHERE project = ? AND user_id = ?`, project, user)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return automation.NotFound("user", user)
		}
		_, err = tx.ExecContext(ctx, `UPDATE api_keys SET revoked = ? WHERE project = ? AND user_id = ? AND revoked IS NULL`,
			formatTime(at), project, user)
		return err
	})
}

// CreateInvitation stores a set-up link by its hash.
func (s *Store) CreateInvitation(ctx context.Context, inv automation.Invitation) error {
	return s.write(ctx, "create invitation", func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO invitations (hash, user_id, project, created, expires, used) VALUES (?, ?, ?, ?, ?, ?)`,
			inv.Hash, inv.User, inv.Project, formatTime(inv.Created), formatTime(inv.Expires), formatTimePtr(inv.Used))
		return err
	})
}

func setupLinkNotFound() *automation.Error {
	// Not NotFound("set-up link", hash): the hash has no business in a message.
	return &automation.Error{Kind: automation.ErrNotFound, Code: "SETUP_LINK_NOT_FOUND", Message: "set-up link not found"}
}

// Invitation returns a set-up link by its hash.
func (s *Store) Invitation(ctx context.Context, hash string) (automation.Invitation, error) {
	var inv automation.Invitation
	var created, expires string
	var used sql.NullString
	err := s.readRow(ctx, `SELECT hash, user_id, project, created, expires, used FROM invitations WHERE hash = ?`, hash).
		Scan(&inv.Hash, &inv.User, &inv.Project, &created, &expires, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return inv, setupLinkNotFound()
	} else if err != nil {
		return inv, fmt.Errorf("pgstore: read invitation: %w", err)
	}
	if inv.Created, err = parseTime(created); err != nil {
		return inv, err
	}
	if inv.Expires, err = parseTime(expires); err != nil {
		return inv, err
	}
	inv.Used, err = parseTimePtr(used)
	return inv, err
}

// UseInvitation marks a set-up link used, once.
func (s *Store) UseInvitation(ctx context.Context, hash string, at time.Time) error {
	return s.write(ctx, "use invitation", func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE invitations SET used = ? WHERE hash = ? AND used IS NULL`, formatTime(at), hash)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM invitations WHERE hash = ?`, hash).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return setupLinkNotFound()
		}
		return automation.Conflict("SETUP_LINK_USED", "this set-up link has been used already; ask an admin for a new one")
	})
}

// CreateSession stores a session by its hash, and drops a few expired
// ones so that the table does not grow with every sign-in ever made.
func (s *Store) CreateSession(ctx context.Context, sess automation.Session) error {
	return s.write(ctx, "create session", func(tx *txn) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions (hash, user_id, epoch, created, expires) VALUES (?, ?, ?, ?, ?)`,
			sess.Hash, sess.User, sess.Epoch, formatTime(sess.Created), sess.Expires.UnixMilli()); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE hash IN
			(SELECT hash FROM sessions WHERE expires < ? ORDER BY expires LIMIT 10)`, sess.Created.UnixMilli())
		return err
	})
}

// Session returns a session by its hash.
func (s *Store) Session(ctx context.Context, hash string) (automation.Session, error) {
	var sess automation.Session
	var created string
	var expires int64
	err := s.readRow(ctx, `SELECT hash, user_id, epoch, created, expires FROM sessions WHERE hash = ?`, hash).
		Scan(&sess.Hash, &sess.User, &sess.Epoch, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return sess, &automation.Error{Kind: automation.ErrNotFound, Code: "SESSION_NOT_FOUND", Message: "session not found"}
	} else if err != nil {
		return sess, fmt.Errorf("pgstore: read session: %w", err)
	}
	if sess.Created, err = parseTime(created); err != nil {
		return sess, err
	}
	sess.Expires = time.UnixMilli(expires).UTC()
	return sess, nil
}

// DeleteSession removes a session.
func (s *Store) DeleteSession(ctx context.Context, hash string) error {
	return s.write(ctx, "delete session", func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE hash = ?`, hash)
		return err
	})
}
