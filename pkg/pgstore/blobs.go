package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"flowservice/pkg/automation"
)

// PutBlob stores b under (project, name), replacing what was there. The
// store never looks inside: sealedsecrets hands it ciphertext.
func (s *Store) PutBlob(ctx context.Context, project, name string, b []byte) error {
	if b == nil {
		b = []byte{} // the column is NOT NULL; an empty value is still a value
	}
	return s.write(ctx, "put blob "+name, func(tx *txn) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO blobs (project, name, value) VALUES (?, ?, ?)
			 ON CONFLICT (project, name) DO UPDATE SET value = excluded.value`,
			project, name, b)
		return err
	})
}

// Blob returns the bytes stored under (project, name), or an error wrapping
// automation.ErrNotFound.
func (s *Store) Blob(ctx context.Context, project, name string) ([]byte, error) {
	var b []byte
	err := s.readRow(ctx,
		`SELECT value FROM blobs WHERE project = ? AND name = ?`, project, name).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, automation.NotFound("secret", name)
	} else if err != nil {
		return nil, fmt.Errorf("pgstore: get blob %s: %w", name, err)
	}
	return b, nil
}

// DeleteBlob removes the blob under (project, name); a missing one is not an
// error.
func (s *Store) DeleteBlob(ctx context.Context, project, name string) error {
	return s.write(ctx, "delete blob "+name, func(tx *txn) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE project = ? AND name = ?`, project, name)
		return err
	})
}
