package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// schemaAITokens keeps each project's model tokens per UTC day
// (automation/aitokens.go): one small row per project and day with AI
// steps, added to by an upsert in the one writer, so no add is lost.
const schemaAITokens = `
CREATE TABLE ai_tokens (
	project TEXT NOT NULL,
	day     TEXT NOT NULL,
	tokens  INTEGER NOT NULL,
	PRIMARY KEY (project, day)
) WITHOUT ROWID;
`

// AddAITokens adds n to the project's count of day and returns the count.
func (s *Store) AddAITokens(ctx context.Context, project, day string, n int64) (int64, error) {
	var total int64
	err := s.write(ctx, "add model tokens of project "+project, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO ai_tokens (project, day, tokens) VALUES (?, ?, ?)
			ON CONFLICT (project, day) DO UPDATE SET tokens = tokens + excluded.tokens RETURNING tokens`,
			project, day, n).Scan(&total)
	})
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: add model tokens of project %s: %w", project, err)
	}
	return total, nil
}

// AITokens is the project's count of day.
func (s *Store) AITokens(ctx context.Context, project, day string) (int64, error) {
	var n int64
	err := s.readRow(ctx, `SELECT tokens FROM ai_tokens WHERE project = ? AND day = ?`, project, day).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: model tokens of project %s: %w", project, err)
	}
	return n, nil
}
