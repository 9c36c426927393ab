package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"flowservice/pkg/automation"
)

var _ automation.StateStore = (*Store)(nil)

// FlowState reads the flow's state from the read pool.
func (s *Store) FlowState(ctx context.Context, project, flowID string) (map[string]json.RawMessage, error) {
	var doc string
	err := s.readRow(ctx, `SELECT doc FROM flow_state WHERE project = ? AND flow = ?`, project, flowID).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return map[string]json.RawMessage{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: read state of flow %s: %w", flowID, err)
	}
	return decodeState(flowID, doc)
}

// UpdateFlowState reads, changes and writes the state in one write
// transaction: writes are serialised, so change runs once.
func (s *Store) UpdateFlowState(ctx context.Context, project, flowID string, change func(map[string]json.RawMessage) (map[string]json.RawMessage, error)) error {
	return s.write(ctx, "update state of flow "+flowID, func(tx *txn) error {
		if err := flowInProject(ctx, tx, project, flowID); err != nil {
			return err
		}
		return updateDoc(ctx, tx, `SELECT doc FROM flow_state WHERE flow = ?`, flowID, map[string]json.RawMessage{},
			func(doc string) (map[string]json.RawMessage, error) { return decodeState(flowID, doc) }, change,
			func(doc []byte) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO flow_state (flow, project, doc) VALUES (?, ?, ?)
					ON CONFLICT (flow) DO UPDATE SET doc = excluded.doc`, flowID, project, string(doc))
				return err
			})
	})
}

// flowInProject refuses, as not found, a flow that is not project's: the
// documents kept beside a flow (state, poll state) are written for it only.
func flowInProject(ctx context.Context, tx *txn, project, flowID string) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM flows WHERE project = ? AND id = ?`, project, flowID).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return automation.NotFound("flow", flowID)
	}
	return nil
}

// updateDoc is the read, change and write of one JSON document row (a
// flow's state or poll state, a project's variables) inside the write
// transaction tx, which serialises writers: read finds the row by key
// (none: empty), change makes the next document, put writes it.
func updateDoc[T any](ctx context.Context, tx *txn, read string, key any, empty T, decode func(string) (T, error),
	change func(T) (T, error), put func(doc []byte) error) error {
	cur := empty
	var doc string
	err := tx.QueryRowContext(ctx, read, key).Scan(&doc)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return err
	default:
		if cur, err = decode(doc); err != nil {
			return err
		}
	}
	next, err := change(cur)
	if err != nil {
		return err
	}
	b, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	return put(b)
}

func decodeState(flowID, doc string) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		return nil, fmt.Errorf("pgstore: state of flow %s: %w", flowID, err)
	}
	return m, nil
}
