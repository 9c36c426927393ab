package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"flowservice/pkg/automation"
)

// AppendSteps adds entry r.JournalLen+1 to the journal of r's claimed
// attempt (see automation.RunStore). The fence is a read of the run's
// status and claim in the write transaction: the row is not rewritten.
func (s *Store) AppendSteps(ctx context.Context, r automation.Run, patches []automation.StepPatch) error {
	if s.stops.stops(r) { // disabled since the run began: flowstop.go
		return automation.FlowStopped(r.ID)
	}
	b, err := json.Marshal(patches)
	if err != nil {
		return fmt.Errorf("pgstore: journal steps of run %s: %w", r.ID, err)
	}
	return s.writeLean(ctx, "journal steps of run "+r.ID, func(tx *txn) error {
		var (
			status string
			token  sql.NullString
		)
		err := s.queryRow(ctx, tx, `SELECT status, lease_token FROM runs WHERE project = ? AND id = ?`, r.Project, r.ID).
			Scan(&status, &token)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return unchanged(automation.NotFound("run", r.ID))
		case err != nil:
			return err
		case automation.RunStatus(status).Final():
			return unchanged(automation.RunFinished(r.ID, automation.RunStatus(status)))
		case automation.RunStatus(status) != automation.RunRunning || token.String != r.LeaseToken:
			return unchanged(automation.RunLeaseLost(r.ID))
		}
		_, err = s.exec(ctx, tx, `INSERT INTO run_journal (run, seq, patches) VALUES (?, ?, ?)`, r.ID, r.JournalLen+1, string(b))
		return err
	})
}

// dropJournal empties run id's journal, inside the write of its whole
// document that folded it in.
func (s *Store) dropJournal(ctx context.Context, tx *txn, id string) error {
	_, err := s.exec(ctx, tx, `DELETE FROM run_journal WHERE run = ?`, id)
	return err
}

// journalReader is what foldJournal reads with: the read pool, or a write
// transaction.
type journalReader interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// foldJournal applies run r's journal entries, read with q, to r, and
// sets r.JournalLen.
func foldJournal(ctx context.Context, q journalReader, r *automation.Run) error {
	rows, err := q.QueryContext(ctx, `SELECT seq, patches FROM run_journal WHERE run = ? ORDER BY seq`, r.ID)
	if err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			seq int
			doc string
		)
		if err := rows.Scan(&seq, &doc); err != nil {
			return fmt.Errorf("read journal: %w", err)
		}
		var patches []automation.StepPatch
		if err := json.Unmarshal([]byte(doc), &patches); err != nil {
			return fmt.Errorf("decode journal entry %d: %w", seq, err)
		}
		if err := automation.ApplyStepPatches(r, patches); err != nil {
			return fmt.Errorf("journal entry %d: %w", seq, err)
		}
		n = seq
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	r.JournalLen = n
	return nil
}
