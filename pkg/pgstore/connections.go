package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"flowservice/pkg/automation"
)

const connectionColumns = `seq, id, project, name, app, type, status, created, updated, allowed_hosts, base_url`

// schemaBaseURL is sqlitestore's: an app connection's baseUrl, "" for none.
const schemaBaseURL = `
ALTER TABLE connections ADD COLUMN base_url TEXT NOT NULL DEFAULT '';
`

// CreateConnection stores a connection's metadata; its credential lives in
// the secret blobs.
func (s *Store) CreateConnection(ctx context.Context, c automation.Connection) error {
	return s.writeAudited(ctx, "create connection "+c.ID, func(tx *txn) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO connections (id, project, name, app, type, status, created, updated, allowed_hosts, base_url)
			 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.ID, c.Project, c.Name, c.App, string(c.Type), string(c.Status),
			formatTime(c.Created), formatTime(c.Updated), encodeHosts(c.AllowedHosts), c.BaseURL)
		return err
	})
}

// Connection returns a connection of the project.
func (s *Store) Connection(ctx context.Context, project, id string) (automation.Connection, error) {
	c, _, err := scanConnection(s.readRow(ctx,
		`SELECT `+connectionColumns+` FROM connections WHERE project = ? AND id = ?`, project, id))
	if errors.Is(err, sql.ErrNoRows) {
		return automation.Connection{}, automation.NotFound("connection", id)
	} else if err != nil {
		return automation.Connection{}, fmt.Errorf("pgstore: get connection %s: %w", id, err)
	}
	return c, nil
}

const listConnectionsSQL = `SELECT ` + connectionColumns + ` FROM connections
	WHERE project = ? AND seq > ? ORDER BY seq LIMIT ?`

// ListConnections returns the page of the project's connections after
// q.After in creation order, reading at most q.Limit+1 rows. q.Status is
// ignored: connections are not filtered.
func (s *Store) ListConnections(ctx context.Context, project string, q automation.ListQuery) (automation.Page[automation.Connection], error) {
	after, err := parsePosition(q.After)
	if err != nil {
		return automation.Page[automation.Connection]{}, err
	}
	limit := max(q.Limit, 1)
	return readPage(ctx, s.query, "connections", limit, scanConnection, listConnectionsSQL, project, after, limit+1)
}

// DeleteConnection removes a connection of the project.
func (s *Store) DeleteConnection(ctx context.Context, project, id string) error {
	return s.writeAudited(ctx, "delete connection "+id, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM connections WHERE project = ? AND id = ?`, project, id)
		if err != nil {
			return err
		}
		return notFoundIfNone(res, "connection", id)
	})
}

// SetConnectionStatus records a new status and when it changed.
func (s *Store) SetConnectionStatus(ctx context.Context, project, id string, st automation.ConnectionStatus, at time.Time) error {
	return s.writeAudited(ctx, "set status of connection "+id, func(tx *txn) error {
		if err := s.outboxConnection(ctx, tx, project, id, st); err != nil { // alerts.go
			return err
		}
		res, err := tx.ExecContext(ctx,
			`UPDATE connections SET status = ?, updated = ? WHERE project = ? AND id = ?`,
			string(st), formatTime(at), project, id)
		if err != nil {
			return err
		}
		return notFoundIfNone(res, "connection", id)
	})
}

// notFoundIfNone turns a statement that touched no row into NotFound.
func notFoundIfNone(res sql.Result, kind, id string) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return automation.NotFound(kind, id)
	}
	return nil
}

func scanConnection(row rowScanner) (automation.Connection, int64, error) {
	var (
		c                automation.Connection
		seq              int64
		typ, st          string
		created, updated string
		hosts            string
	)
	if err := row.Scan(&seq, &c.ID, &c.Project, &c.Name, &c.App, &typ, &st, &created, &updated, &hosts, &c.BaseURL); err != nil {
		return c, 0, err
	}
	if hosts != "" {
		if err := json.Unmarshal([]byte(hosts), &c.AllowedHosts); err != nil {
			return c, 0, fmt.Errorf("decode allowed hosts of connection %s: %w", c.ID, err)
		}
	}
	c.Type, c.Status = automation.ConnectionType(typ), automation.ConnectionStatus(st)
	var err error
	if c.Created, err = parseTime(created); err != nil {
		return c, 0, err
	}
	if c.Updated, err = parseTime(updated); err != nil {
		return c, 0, err
	}
	return c, seq, nil
}
