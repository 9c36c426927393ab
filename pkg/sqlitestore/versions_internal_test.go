package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
)

// TestVersionsMigration: a flow stored before versions gets its definition
// recorded as version 1, and its document the live version 1, so that its
// runs pin to a version that exists.
func TestVersionsMigration(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", dsn(path, url.Values{}))
	if err != nil {
		t.Fatal(err)
	}
	// Every migration before this one, wherever later ones are appended.
	at := slices.Index(migrations, schemaVersions)
	if at < 0 {
		t.Fatal("schemaVersions is not among the migrations")
	}
	for i, m := range migrations[:at] {
		if err := applyMigration(ctx, db, i+1, m); err != nil {
			t.Fatal(err)
		}
	}
	doc := `{"id":"flw_old","name":"old","description":"","status":"ACTIVE","engine":"FLOW_BUILDER","triggerType":"WEBHOOK",` +
		`"created":"2026-01-02T03:04:05.000Z","updated":"2026-01-03T03:04:05.000Z",` +
		`"trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST"}},"steps":[{"name":"a","type":"SET","values":{"x":1}}]}`
	if _, err := db.ExecContext(ctx, `INSERT INTO flows (id, project, status, version, doc) VALUES ('flw_old', 'prj_old', 'ACTIVE', 3, ?)`, doc); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	f, err := s.Flow(ctx, "prj_old", "flw_old")
	if err != nil || f.LiveVersion != 1 || f.HasDraft || f.Version != 3 || len(f.Steps) != 1 {
		t.Fatalf("migrated flow: live %d hasDraft %v version %d steps %d, %v", f.LiveVersion, f.HasDraft, f.Version, len(f.Steps), err)
	}
	v, err := s.FlowVersion(ctx, "prj_old", "flw_old", 1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(v.Definition)
	want := `{"trigger":{"type":"WEBHOOK","webhook":{"httpMethod":"POST"}},"steps":[{"name":"a","type":"SET","values":{"x":1}}]}`
	if string(got) != want || v.Created.Format("2006-01-02") != "2026-01-03" {
		t.Fatalf("version 1 = %s created %v, want %s", got, v.Created, want)
	}
}
