package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"flowservice/pkg/automation"
)

var _ automation.FinishedRuns = (*Store)(nil)

// InsertFinishedRun stores a run executed before it was stored, final, with
// its flow's stats, in one lean transaction (automation.FinishedRuns): the
// one commit of an ON_COMPLETION run of a flow without side effects. The
// row is what EnqueueClaimed then FinishRun leave (attempts 1, ended 1, no
// lease), and no queue entry: nothing is left to execute. The flow and the
// run ID are checked before the first change, so that a refusal is an
// unchanged error and the batch keeps its other writes.
func (s *Store) InsertFinishedRun(ctx context.Context, r automation.Run) error {
	if !r.Status.Final() {
		return fmt.Errorf("pgstore: insert finished run %s: status %q is not final", r.ID, r.Status)
	}
	r.Attempts, r.Interrupted, r.LeaseToken = 1, 0, ""
	doc, sum, err := encodeRunAndSummary(r)
	if err != nil {
		return fmt.Errorf("pgstore: insert finished run %s: %w", r.ID, err)
	}
	return s.writeLean(ctx, "insert finished run "+r.ID, func(tx *txn) error {
		var last sql.NullString
		err := s.queryRow(ctx, tx, `SELECT last_run FROM flows WHERE project = ? AND id = ?`, r.Project, r.FlowID).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			// Deleted since the receiver found it: no run may outlive it.
			return unchanged(automation.NotFound("flow", r.FlowID))
		} else if err != nil {
			return err
		}
		if err := s.insertRun(ctx, tx, r.ID,
			`INSERT INTO runs (id, project, flow, status, attempts, ended, created_ms, doc, summary)
			 VALUES (?, ?, ?, ?, 1, 1, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.Project, r.FlowID, string(r.Status), r.Created.UnixMilli(), doc, sum); err != nil {
			return err
		}
		return s.addFinishedToFlow(ctx, tx, r, last)
	})
}

// addFinishedToFlow adds a finished run to its flow's stats (runCount,
// successRate, lastRun) and to its hour's insight counters, last being the flow's last_run as read in the same
// transaction (FinishRun and InsertFinishedRun): lastRun never moves back
// to an older run's creation.
func (s *Store) addFinishedToFlow(ctx context.Context, tx *txn, r automation.Run, last sql.NullString) error {
	lastRun := formatTime(r.Created)
	if prev, err := parseTimePtr(last); err != nil {
		return err
	} else if prev != nil && prev.After(r.Created) {
		lastRun = last.String
	}
	succeeded := 0
	if r.Status == automation.RunSucceeded {
		succeeded = 1
	}
	if _, err := s.exec(ctx, tx,
		`UPDATE flows SET finished = finished + 1, succeeded = succeeded + ?, last_run = ? WHERE id = ?`,
		succeeded, lastRun, r.FlowID); err != nil {
		return err
	}
	if err := s.addInsight(ctx, tx, r); err != nil { // insights.go
		return err
	}
	// The run's event, if a subscription wants it, commits with the finish.
	return s.outboxRun(ctx, tx, r)
}
