package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"flowservice/pkg/automation"
)

var _ automation.VariableStore = (*Store)(nil)

// Variables reads the project's variables from the read pool.
func (s *Store) Variables(ctx context.Context, project string) (map[string]automation.Variable, error) {
	var doc string
	err := s.readRow(ctx, `SELECT doc FROM project_variables WHERE project = ?`, project).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return map[string]automation.Variable{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: read variables of %s: %w", project, err)
	}
	return decodeVariables(project, doc)
}

// UpdateVariables reads, changes and writes the variables in one write
// transaction, with the request's audit entry: writes are serialised, so
// change runs once.
func (s *Store) UpdateVariables(ctx context.Context, project string, change func(map[string]automation.Variable) (map[string]automation.Variable, error)) error {
	return s.writeAudited(ctx, "update variables of "+project, func(tx *txn) error {
		return updateDoc(ctx, tx, `SELECT doc FROM project_variables WHERE project = ?`, project, map[string]automation.Variable{},
			func(doc string) (map[string]automation.Variable, error) { return decodeVariables(project, doc) }, change,
			func(doc []byte) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO project_variables (project, doc) VALUES (?, ?)
					ON CONFLICT (project) DO UPDATE SET doc = excluded.doc`, project, string(doc))
				return err
			})
	})
}

func decodeVariables(project, doc string) (map[string]automation.Variable, error) {
	m := map[string]automation.Variable{}
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		return nil, fmt.Errorf("pgstore: variables of %s: %w", project, err)
	}
	return m, nil
}
