package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"flowservice/pkg/automation"
)

var _ automation.OAuthAppStore = (*Store)(nil)

// PutOAuthApp creates an app; a second app of the same name is a conflict.
func (s *Store) PutOAuthApp(ctx context.Context, a automation.OAuthApp) error {
	scopes, err := json.Marshal(a.Scopes)
	if err != nil {
		return fmt.Errorf("pgstore: put oauth app %s: %w", a.Name, err)
	}
	err = s.write(ctx, "put oauth app "+a.Name, func(tx *txn) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO oauth_apps (name, client_id, authorize_url, token_url, scopes, created) VALUES (?, ?, ?, ?, ?, ?)`,
			a.Name, a.ClientID, a.AuthorizeURL, a.TokenURL, string(scopes), formatTime(a.Created))
		return err
	})
	if err != nil && isUnique(err) {
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
		return automation.OAuthApp{}, fmt.Errorf("pgstore: get oauth app %s: %w", name, err)
	}
	return a, nil
}

// OAuthApps lists every app by name.
func (s *Store) OAuthApps(ctx context.Context) ([]automation.OAuthApp, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+oauthAppColumns+` FROM oauth_apps ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("pgstore: list oauth apps: %w", err)
	}
	defer rows.Close()
	apps := []automation.OAuthApp{}
	for rows.Next() {
		a, err := scanOAuthApp(rows)
		if err != nil {
			return nil, fmt.Errorf("pgstore: list oauth apps: %w", err)
		}
		apps = append(apps, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: list oauth apps: %w", err)
	}
	return apps, nil
}

// DeleteOAuthApp removes the app of that name.
func (s *Store) DeleteOAuthApp(ctx context.Context, name string) error {
	return s.write(ctx, "delete oauth app "+name, func(tx *txn) error {
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
