package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

var (
	_ automation.SlotStore = (*Store)(nil)
	_ automation.SlotWaker = (*Store)(nil)
)

// UpdateSlots reads, changes and writes the scope's slots in one write
// transaction: writes are serialised, so change runs once.
func (s *Store) UpdateSlots(ctx context.Context, project, scope string, change func(automation.Slots) (automation.Slots, error)) error {
	return s.write(ctx, "update slots "+scope, func(tx *txn) error {
		var (
			cur automation.Slots
			doc string
		)
		err := tx.QueryRowContext(ctx, `SELECT doc FROM run_slots WHERE scope = ? AND project = ?`, scope, project).Scan(&doc)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			if err := json.Unmarshal([]byte(doc), &cur); err != nil {
				return fmt.Errorf("pgstore: slots %s: %w", scope, err)
			}
		}
		next, err := change(cur)
		if err != nil {
			return err
		}
		if next.Empty() {
			_, err := tx.ExecContext(ctx, `DELETE FROM run_slots WHERE scope = ? AND project = ?`, scope, project)
			return err
		}
		b, err := json.Marshal(next)
		if err != nil {
			return fmt.Errorf("pgstore: encode slots %s: %w", scope, err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO run_slots (scope, project, doc) VALUES (?, ?, ?)
			ON CONFLICT (scope) DO UPDATE SET doc = excluded.doc, project = excluded.project`, scope, project, string(b))
		return err
	})
}

// Wake makes the queue entries of the given runs due now, unless an
// attempt holds one (its lease is live) or it is due already or parked.
func (s *Store) Wake(ctx context.Context, runIDs []string, now time.Time) error {
	if len(runIDs) == 0 {
		return nil
	}
	ms := now.UnixMilli()
	args := []any{ms, ms, ms}
	for _, id := range runIDs {
		args = append(args, id)
	}
	q := `UPDATE run_queue SET due_ms = ? WHERE due_ms > ? AND parked IS NULL
		AND (lease_until IS NULL OR lease_until <= ?) AND run IN (?` + strings.Repeat(", ?", len(runIDs)-1) + `)`
	return s.write(ctx, "wake runs", func(tx *txn) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
}
