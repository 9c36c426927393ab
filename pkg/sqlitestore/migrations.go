package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
)

// migrations is the schema, in order: migration i brings the database to
// version i+1. Each runs once, in its own write transaction, and is never
// edited once released; a later change (runs, the run queue) is one more
// entry at the end.
var migrations = []string{
	schemaV1,
	schemaV2,
	schemaV3,
	schemaV4,
	schemaOAuthApps, // oauthapps.go
	schemaFlowState, // state.go
	schemaRunSummary,
	schemaProjectLimits,   // limits.go
	schemaVariables,       // variables.go
	schemaAlerts,          // alerts.go
	schemaKeyRoles,        // access.go
	schemaAudit,           // access.go
	schemaAllowedHosts,    // access.go
	schemaRunJournal,      // journal.go
	schemaVersions,        // versions.go
	schemaCallWake,        // callwake.go
	schemaRunSlots,        // slots.go
	schemaPollState,       // poll.go
	schemaVersionsProject, // versions.go
	schemaInsights,        // insights.go
	schemaUsers,           // users.go
	schemaWaitpoints,      // waitpoints.go
	schemaBaseURL,         // connections.go
	schemaAITokens,        // aitokens.go
}

// SchemaVersion is the version Open brings a database to.
var SchemaVersion = len(migrations)

// schemaV1: projects, keys, flows with their routes, connections, blobs.
//
// Every listed table has seq (creation order) and an index on (project, seq),
// so a page is an index range scan that starts after the last seq the caller
// saw. Flows keep their definition as a JSON document and, as columns, what
// queries filter on (project, status, version) and the run stats, which runs
// update without rewriting the document.
const schemaV1 = `
CREATE TABLE projects (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	id      TEXT NOT NULL UNIQUE,
	name    TEXT NOT NULL UNIQUE,
	plan    TEXT NOT NULL,
	created TEXT NOT NULL
);

CREATE TABLE api_keys (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	id      TEXT NOT NULL UNIQUE,
	project TEXT NOT NULL,
	hash    TEXT NOT NULL UNIQUE,
	prefix  TEXT NOT NULL,
	created TEXT NOT NULL,
	revoked TEXT
);
CREATE INDEX api_keys_project ON api_keys (project, seq);

CREATE TABLE flows (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	id          TEXT NOT NULL UNIQUE,
	project     TEXT NOT NULL,
	status      TEXT NOT NULL,
	version     INTEGER NOT NULL,
	doc         TEXT NOT NULL,
	allowed_ips TEXT,
	finished    INTEGER NOT NULL DEFAULT 0,
	succeeded   INTEGER NOT NULL DEFAULT 0,
	last_run    TEXT
);
CREATE INDEX flows_project ON flows (project, seq);
CREATE INDEX flows_project_status ON flows (project, status, seq);

-- A route belongs to one flow whatever its status; the primary key is what
-- makes two flows on one (path, method) impossible.
CREATE TABLE routes (
	path   TEXT NOT NULL,
	method TEXT NOT NULL,
	flow   TEXT NOT NULL REFERENCES flows (id) ON DELETE CASCADE,
	PRIMARY KEY (path, method)
) WITHOUT ROWID;
CREATE INDEX routes_flow ON routes (flow);

CREATE TABLE connections (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	id      TEXT NOT NULL UNIQUE,
	project TEXT NOT NULL,
	name    TEXT NOT NULL,
	app     TEXT NOT NULL,
	type    TEXT NOT NULL,
	status  TEXT NOT NULL,
	created TEXT NOT NULL,
	updated TEXT NOT NULL
);
CREATE INDEX connections_project ON connections (project, seq);

-- Sealed secrets: the value is ciphertext made by sealedsecrets.
CREATE TABLE blobs (
	project TEXT NOT NULL,
	name    TEXT NOT NULL,
	value   BLOB NOT NULL,
	PRIMARY KEY (project, name)
) WITHOUT ROWID;
`

// schemaV2: runs and the run queue.
//
// A run is a JSON document plus the columns that queries and conditional
// writes use. Times that are compared (lease, due, created) are integer
// milliseconds since the epoch: RFC 3339 text does not sort when its
// fraction varies in length. A queue entry exists from the moment a run is
// accepted (same transaction) until a worker acknowledges it, or is parked
// for inspection after its last attempt; it goes with its run.
const schemaV2 = `
CREATE TABLE runs (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	id          TEXT NOT NULL UNIQUE,
	project     TEXT NOT NULL,
	flow        TEXT NOT NULL,
	status      TEXT NOT NULL,
	attempts    INTEGER NOT NULL DEFAULT 0,
	lease_until INTEGER,
	created_ms  INTEGER NOT NULL,
	doc         TEXT NOT NULL
);
CREATE INDEX runs_flow ON runs (project, flow, seq);
CREATE INDEX runs_flow_status ON runs (project, flow, status, seq);
CREATE INDEX runs_created ON runs (created_ms);

CREATE TABLE run_queue (
	run         TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
	project     TEXT NOT NULL,
	due_ms      INTEGER NOT NULL,
	lease_until INTEGER,
	attempts    INTEGER NOT NULL DEFAULT 0,
	parked      TEXT
) WITHOUT ROWID;
CREATE INDEX run_queue_due ON run_queue (parked, due_ms);
`

// schemaV3: Test Trigger state, one row per webhook flow ever armed.
//
// It is kept out of the flow's document so that arming and capturing never
// bump the flow's version or race with edits. armed_until is integer
// milliseconds since the epoch (compared in TakeCapture's conditional
// UPDATE), NULL when no capture is armed; sample is the latest captured
// event as JSON, NULL before the first. The row goes with its flow.
const schemaV3 = `
CREATE TABLE webhook_samples (
	flow        TEXT PRIMARY KEY REFERENCES flows (id) ON DELETE CASCADE,
	project     TEXT NOT NULL,
	armed_until INTEGER,
	sample      TEXT
);
`

// schemaV4: fencing and crash counting of run attempts, and the indexes of
// the project-wide run search.
//
// lease_token names the claim an attempt holds; every write of a run's
// attempt is conditional on it (an attempt that lost its lease writes
// nothing). ended counts the attempts that were released or finished, so
// that attempts - ended at a claim is the number of earlier attempts that
// died with their process (automation.Run.Interrupted).
const schemaV4 = `
ALTER TABLE runs ADD COLUMN lease_token TEXT;
ALTER TABLE runs ADD COLUMN ended INTEGER NOT NULL DEFAULT 0;
CREATE INDEX runs_project ON runs (project, seq);
CREATE INDEX runs_project_status ON runs (project, status, seq);
`

// schemaRunSummary: each run's summary as run lists and the run search
// return it (automation.Run.Summary as JSON), written beside its document
// at every write of the run. A page of 100 runs then reads 100 short
// strings instead of parsing and cutting down 100 whole documents in SQL
// (json_remove, json_each) and measuring each again in Go: those were
// most of a page's time at a million runs. Rows written before this
// version hold NULL and are cut down from their document as before
// (summaryDoc): the migration rewrites no rows, so it is instant at any
// size.
const schemaRunSummary = `
ALTER TABLE runs ADD COLUMN summary TEXT;
`

// migrate applies the migrations the database lacks. Each check and apply
// happens inside one BEGIN IMMEDIATE transaction, so two processes opening
// the same new file at once apply each migration exactly once: the second
// waits for the first and then finds the version recorded.
func migrate(ctx context.Context, db *sql.DB) error {
	for i, m := range migrations {
		version := i + 1
		if err := applyMigration(ctx, db, version, m); err != nil {
			return fmt.Errorf("migrate to version %d: %w", version, err)
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, version int, stmts string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY,
		applied TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
	)`); err != nil {
		return err
	}
	var n int
	if err := tx.QueryRowContext(ctx,
		`SELECT count(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return tx.Commit()
	}
	if _, err := tx.ExecContext(ctx, stmts); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version) VALUES (?)`, version); err != nil {
		return err
	}
	return tx.Commit()
}
