package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"flowservice/pkg/automation"
)

var _ automation.PollStore = (*Store)(nil)

// PollState reads the flow's poll state from the read pool.
func (s *Store) PollState(ctx context.Context, project, flowID string) (automation.PollState, error) {
	var doc string
	err := s.readRow(ctx, `SELECT doc FROM poll_state WHERE project = ? AND flow = ?`, project, flowID).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return automation.PollState{}, nil
	}
	if err != nil {
		return automation.PollState{}, fmt.Errorf("pgstore: read poll state of flow %s: %w", flowID, err)
	}
	return decodePollState(flowID, doc)
}

// UpdatePollState reads, changes and writes the poll state in one write
// transaction: writes are serialised, so change runs once.
func (s *Store) UpdatePollState(ctx context.Context, project, flowID string, change func(automation.PollState) (automation.PollState, error)) error {
	return s.write(ctx, "update poll state of flow "+flowID, func(tx *txn) error {
		if err := flowInProject(ctx, tx, project, flowID); err != nil {
			return err
		}
		return updateDoc(ctx, tx, `SELECT doc FROM poll_state WHERE flow = ?`, flowID, automation.PollState{},
			func(doc string) (automation.PollState, error) { return decodePollState(flowID, doc) }, change,
			func(doc []byte) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO poll_state (flow, project, doc) VALUES (?, ?, ?)
					ON CONFLICT (flow) DO UPDATE SET doc = excluded.doc`, flowID, project, string(doc))
				return err
			})
	})
}

func decodePollState(flowID, doc string) (automation.PollState, error) {
	var st automation.PollState
	if err := json.Unmarshal([]byte(doc), &st); err != nil {
		return st, fmt.Errorf("pgstore: poll state of flow %s: %w", flowID, err)
	}
	return st, nil
}
