package pgstore

import (
	"context"
	"time"

	"flowservice/pkg/automation"
)

// wakeCaller makes the queue entry of the run waiting for r due now, in
// FinishRun's transaction. Runs that no waiting caller started skip it, so
// that it costs the others nothing.
func (s *Store) wakeCaller(ctx context.Context, tx *txn, r automation.Run) error {
	c := r.Trigger.Caller
	if c == nil || !c.Wait {
		return nil
	}
	now := time.Now().UnixMilli()
	if r.Finished != nil {
		now = r.Finished.UnixMilli()
	}
	_, err := s.exec(ctx, tx, `UPDATE run_queue SET due_ms = least(due_ms, ?::bigint),
		woken = (woken OR (lease_until IS NOT NULL AND lease_until > ?)) WHERE run = ?`, now, now, c.RunID)
	return err
}
