package pgstore

import (
	"context"
	"encoding/json"
	"fmt"

	"flowservice/pkg/automation"
)

// encodeHosts is the allowed_hosts column of a connection.
func encodeHosts(hosts []string) string {
	if len(hosts) == 0 {
		return ""
	}
	b, _ := json.Marshal(hosts) // a []string always encodes
	return string(b)
}

var _ automation.AuditStore = (*Store)(nil)

// writeAudited is write for the changes the audit log records: when ctx
// carries an entry (automation.WithAudit), fn's transaction writes it too,
// so the entry commits exactly when the change does.
func (s *Store) writeAudited(ctx context.Context, op string, fn func(tx *txn) error) error {
	e, ok := automation.AuditFrom(ctx)
	if !ok {
		return s.write(ctx, op, fn)
	}
	return s.write(ctx, op, func(tx *txn) error {
		if err := fn(tx); err != nil {
			return err
		}
		return insertAudit(ctx, tx, e)
	})
}

// auditPurgeBatch bounds the expired entries one audit write removes: the
// log's retention is kept by its own writes, a few at a time, so no sweep
// holds the writer long.
const auditPurgeBatch = 100

// insertAudit writes an entry once (a request's later writes carry the same
// entry and leave the first in place), and drops entries past
// automation.AuditRetention.
func insertAudit(ctx context.Context, tx *txn, e automation.AuditEntry) error {
	doc, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode audit entry %s: %w", e.ID, err)
	}
	if _, err = tx.ExecContext(ctx,
		`INSERT INTO audit_log (id, project, sort_key, time_ms, doc) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		e.ID, e.Project, automation.AuditSortKey(e), e.Time.UnixMilli(), doc); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx,
		`DELETE FROM audit_log WHERE id IN (SELECT id FROM audit_log WHERE time_ms < ? LIMIT ?)`,
		e.Time.Add(-automation.AuditRetention).UnixMilli(), auditPurgeBatch)
	return err
}

// AppendAudit writes one entry on its own.
func (s *Store) AppendAudit(ctx context.Context, e automation.AuditEntry) error {
	return s.write(ctx, "append audit entry "+e.ID, func(tx *txn) error {
		return insertAudit(ctx, tx, e)
	})
}

// AuditLog pages through a project's entries, newest first.
func (s *Store) AuditLog(ctx context.Context, project string, q automation.AuditQuery) (automation.Page[automation.AuditEntry], error) {
	var page automation.Page[automation.AuditEntry]
	query := `SELECT sort_key, doc FROM audit_log WHERE project = ?`
	args := []any{project}
	if q.After != "" {
		query += ` AND sort_key < ?`
		args = append(args, q.After)
	}
	if !q.Since.IsZero() {
		query += ` AND time_ms >= ?`
		args = append(args, q.Since.UnixMilli())
	}
	if !q.Until.IsZero() {
		query += ` AND time_ms < ?`
		args = append(args, q.Until.UnixMilli())
	}
	query += ` ORDER BY sort_key DESC LIMIT ?`
	args = append(args, q.Limit+1)
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return page, fmt.Errorf("pgstore: read audit log: %w", err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var key string
		var doc []byte
		if err := rows.Scan(&key, &doc); err != nil {
			return page, fmt.Errorf("pgstore: read audit log: %w", err)
		}
		var e automation.AuditEntry
		if err := json.Unmarshal(doc, &e); err != nil {
			return page, fmt.Errorf("pgstore: decode audit entry: %w", err)
		}
		e.Project = project
		page.Items = append(page.Items, e)
		keys = append(keys, key)
	}
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("pgstore: read audit log: %w", err)
	}
	if len(page.Items) > q.Limit {
		page.Items = page.Items[:q.Limit]
		page.Next = keys[q.Limit-1]
	}
	return page, nil
}
