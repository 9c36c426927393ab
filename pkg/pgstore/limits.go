package pgstore

import (
	"context"
	"encoding/json"
	"fmt"

	"flowservice/pkg/automation"
)

// SetProjectLimits replaces the project's limit overrides.
func (s *Store) SetProjectLimits(ctx context.Context, id string, overrides map[string]int64) error {
	raw, err := json.Marshal(overrides)
	if err != nil {
		return fmt.Errorf("pgstore: set limits of project %s: %w", id, err)
	}
	if overrides == nil {
		raw = []byte("{}")
	}
	return s.write(ctx, "set limits of project "+id, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE projects SET limits = ? WHERE id = ?`, string(raw), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return automation.NotFound("project", id)
		}
		return nil
	})
}

// decodeLimits reads the limits column; an empty object is no overrides.
func decodeLimits(raw string) (map[string]int64, error) {
	if raw == "" || raw == "{}" {
		return nil, nil
	}
	var m map[string]int64
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	return m, nil
}
