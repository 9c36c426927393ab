package pgstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// QueueState is the state of the run queue at one moment, for monitoring.
type QueueState struct {
	// Depth counts entries waiting or being executed; parked ones are not
	// counted.
	Depth int
	// Parked counts entries parked after their last attempt.
	Parked int
	// OldestDue is when the longest-due unparked entry became due; zero
	// when there is none.
	OldestDue time.Time
}

// QueueState reads the queue's depth and its oldest due entry in one query
// over the (parked, due_ms) index.
func (s *Store) QueueState(ctx context.Context) (QueueState, error) {
	var (
		st     QueueState
		depth  sql.NullInt64
		parked sql.NullInt64
		oldest sql.NullInt64
	)
	err := s.r.QueryRowContext(ctx, `SELECT
			sum(CASE WHEN parked IS NULL THEN 1 ELSE 0 END),
			sum(CASE WHEN parked IS NULL THEN 0 ELSE 1 END),
			min(CASE WHEN parked IS NULL THEN due_ms END)
		FROM run_queue`).Scan(&depth, &parked, &oldest)
	if err != nil {
		return st, fmt.Errorf("pgstore: queue state: %w", err)
	}
	st.Depth, st.Parked = int(depth.Int64), int(parked.Int64)
	if oldest.Valid {
		st.OldestDue = time.UnixMilli(oldest.Int64).UTC()
	}
	return st, nil
}
