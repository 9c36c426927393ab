package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"flowservice/pkg/automation"
)

// schemaOAuthApps: the operator's OAuth2 apps, shared by every project.
// Their client secrets are sealed blobs like every other secret.
const schemaOAuthApps = `
CREATE TABLE oauth_apps (
	name          TEXT PRIMARY KEY,
	client_id     TEXT NOT NULL,
	authorize_url TEXT NOT NULL,
	token_url     TEXT NOT NULL,
	scopes        TEXT NOT NULL, -- JSON array
	created       TEXT NOT NULL
) WITHOUT ROWID;
`

var _ automation.OAuthAppStore = (*Store)(nil)

// PutOAuthApp creates an app; a second app of the same name is a conflict.
func (s *Store) PutOAuthApp(ctx context.Context, a automation.OAuthApp) error {
	scopes, err := json.Marshal(a.Scopes)
	if err != nil {
		return fmt.Errorf("sqlitestore: put oauth app %s: %w", a.Name, err)
	}
	err = s.write(ctx, "put oauth app "+a.Name, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO oauth_apps (name, client_id, authorize_url, token_url, scopes, created) VALUES (?, ?, ?, ?, ?, ?)`,
			a.Name, a.ClientID, a.AuthorizeURL, a.TokenURL, string(scopes), formatTime(a.Created))
		return err
	})
	if err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed") {
		return &automation.Error{Kind: automation.ErrConflict, Code: "OAUTH_APP_EXISTS", Message: "an OAuth2 app named " + a.Name + " exists"}
	}
	return err
}

const oauthAppColumns = `name, client_id, authorize_url, token_url, scopes, created`

// OAuthApp returns the app of that name.
func (s *Store) OAuthApp(ctx context.Context, name string) (automation.OAuthApp, error) {
	a, err := scanOAuthApp(s.r.QueryRowContext(ctx, `SELECT `+oauthAppColumns+` FROM oauth_apps WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return automation.OAuthApp{}, automation.NotFound("oauth app", name)
	} else if err != nil {
		return automation.OAuthApp{}, fmt.Errorf("sqlitestore: get oauth app %s: %w", name, err)
	}
	return a, nil
}

// OAuthApps lists every app by name.
func (s *Store) OAuthApps(ctx context.Context) ([]automation.OAuthApp, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+oauthAppColumns+` FROM oauth_apps ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list oauth apps: %w", err)
	}
	defer rows.Close()
	apps := []automation.OAuthApp{}
	for rows.Next() {
		a, err := scanOAuthApp(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: list oauth apps: %w", err)
		}
		apps = append(apps, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: list oauth apps: %w", err)
	}
	return apps, nil
}

// DeleteOAuthApp removes the app of that name.
func (s *Store) DeleteOAuthApp(ctx context.Context, name string) error {
	return s.write(ctx, "delete oauth app "+name, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM oauth_apps WHERE name = ?`, name)
		if err != nil {
			return err
		}
		return notFoundIfNone(res, "oauth app", name)
	})
}

func scanOAuthApp(row rowScanner) (automation.OAuthApp, error) {
	var (
		a               automation.OAuthApp
		scopes, created string
	)
	if err := row.Scan(&a.Name, &a.ClientID, &a.AuthorizeURL, &a.TokenURL, &scopes, &created); err != nil {
		return a, err
	}
	if err := json.Unmarshal([]byte(scopes), &a.Scopes); err != nil {
		return a, fmt.Errorf("decode scopes of %s: %w", a.Name, err)
	}
	t, err := parseTime(created)
	if err != nil {
		return a, err
	}
	a.Created = t
	return a, nil
}
