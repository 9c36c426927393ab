package sqlitestore

import (
	"context"
	"database/sql"
	"time"

	"flowservice/pkg/automation"
)

// schemaCallWake lets a child run's end wake the run that waits for it
// (docs/flows.md, "CALL_FLOW"). FinishRun of a child makes its caller's
// queue entry due in the same write. The caller may still hold its entry
// then (its attempt is parking it, or looking at another child): woken
// records that, so that the Retry that parks the entry keeps it due now
// instead of putting it off until the caller's next check.
const schemaCallWake = `
ALTER TABLE run_queue ADD COLUMN woken INTEGER NOT NULL DEFAULT 0;
`

// wakeCaller makes the queue entry of the run waiting for r due now, in
// FinishRun's transaction. Runs that no waiting caller started skip it, so
// that it costs the others nothing.
func (s *Store) wakeCaller(ctx context.Context, tx *sql.Tx, r automation.Run) error {
	c := r.Trigger.Caller
	if c == nil || !c.Wait {
		return nil
	}
	now := time.Now().UnixMilli()
	if r.Finished != nil {
		now = r.Finished.UnixMilli()
	}
	_, err := s.exec(ctx, tx, `UPDATE run_queue SET due_ms = min(due_ms, ?),
		woken = (woken OR (lease_until IS NOT NULL AND lease_until > ?)) WHERE run = ?`, now, now, c.RunID)
	return err
}
