package pgstore

import (
	"context"
	"fmt"
)

// migrations is the schema, in order: migration i brings the database to
// version i+1. Each runs once, in its own transaction, and is never edited
// once released; a later change is one more entry at the end. Documents
// are JSON columns, so a field added to a Run or a Flow needs no migration.
var migrations = []string{
	schemaV1,
	schemaUsers, // users.go
	schemaQueueOrder,
	schemaWaitpoints,  // waitpoints.go
	schemaBaseURL,     // connections.go
	schemaRateBuckets, // ratebuckets.go
	schemaAITokens,    // aitokens.go
}

// SchemaVersion is the version Open brings a database to.
var SchemaVersion = len(migrations)

// migrateLock is the advisory lock key migrations run under: nodes
// starting together queue on it, and each after the first finds every
// version recorded.
const migrateLock = 0x666c6f77646d // "flowdm"

// schemaV1 is sqlitestore's schema at its version 20, table for table.
//
// Configuration documents (flows, subscriptions, variables, slots, poll
// and flow state, drafts, versions, audit entries) are jsonb. A run's
// document and a webhook sample are json: they carry what senders posted,
// byte for byte, and jsonb refuses a "\u0000" that JSON allows. A run's
// summary is text: run pages return it as stored, byte for byte what
// json.Marshal made of it. Times that are compared are integer
// milliseconds; the others are RFC 3339 text, as in sqlitestore.
const schemaV1 = `
CREATE TABLE projects (
	seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id      TEXT NOT NULL UNIQUE,
	name    TEXT NOT NULL UNIQUE,
	plan    TEXT NOT NULL,
	created TEXT NOT NULL,
	limits  TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE api_keys (
	seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id      TEXT NOT NULL UNIQUE,
	project TEXT NOT NULL,
	hash    TEXT NOT NULL UNIQUE,
	prefix  TEXT NOT NULL,
	created TEXT NOT NULL,
	revoked TEXT,
	role    TEXT NOT NULL DEFAULT 'admin'
);
CREATE INDEX api_keys_project ON api_keys (project, seq);

CREATE TABLE flows (
	seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id          TEXT NOT NULL UNIQUE,
	project     TEXT NOT NULL,
	status      TEXT NOT NULL,
	version     BIGINT NOT NULL,
	doc         JSONB NOT NULL,
	allowed_ips TEXT,
	finished    BIGINT NOT NULL DEFAULT 0,
	succeeded   BIGINT NOT NULL DEFAULT 0,
	last_run    TEXT
);
CREATE INDEX flows_project ON flows (project, seq);
CREATE INDEX flows_project_status ON flows (project, status, seq);

CREATE TABLE routes (
	path   TEXT NOT NULL,
	method TEXT NOT NULL,
	flow   TEXT NOT NULL REFERENCES flows (id) ON DELETE CASCADE,
	PRIMARY KEY (path, method)
);
CREATE INDEX routes_flow ON routes (flow);

CREATE TABLE connections (
	seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id            TEXT NOT NULL UNIQUE,
	project       TEXT NOT NULL,
	name          TEXT NOT NULL,
	app           TEXT NOT NULL,
	type          TEXT NOT NULL,
	status        TEXT NOT NULL,
	created       TEXT NOT NULL,
	updated       TEXT NOT NULL,
	allowed_hosts TEXT NOT NULL DEFAULT ''
);
CREATE INDEX connections_project ON connections (project, seq);

CREATE TABLE blobs (
	project TEXT NOT NULL,
	name    TEXT NOT NULL,
	value   BYTEA NOT NULL,
	PRIMARY KEY (project, name)
);

CREATE TABLE runs (
	seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id          TEXT NOT NULL UNIQUE,
	project     TEXT NOT NULL,
	flow        TEXT NOT NULL,
	status      TEXT NOT NULL,
	attempts    BIGINT NOT NULL DEFAULT 0,
	lease_until BIGINT,
	created_ms  BIGINT NOT NULL,
	doc         JSON NOT NULL,
	lease_token TEXT,
	ended       BIGINT NOT NULL DEFAULT 0,
	summary     TEXT
);
CREATE INDEX runs_flow ON runs (project, flow, seq);
CREATE INDEX runs_flow_status ON runs (project, flow, status, seq);
CREATE INDEX runs_created ON runs (created_ms);
CREATE INDEX runs_project ON runs (project, seq);
CREATE INDEX runs_project_status ON runs (project, status, seq);

CREATE TABLE run_queue (
	run         TEXT PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
	project     TEXT NOT NULL,
	due_ms      BIGINT NOT NULL,
	lease_until BIGINT,
	attempts    BIGINT NOT NULL DEFAULT 0,
	parked      TEXT,
	woken       BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX run_queue_due ON run_queue (parked, due_ms);

CREATE TABLE webhook_samples (
	flow        TEXT PRIMARY KEY REFERENCES flows (id) ON DELETE CASCADE,
	project     TEXT NOT NULL,
	armed_until BIGINT,
	sample      JSON
);

CREATE TABLE oauth_apps (
	name          TEXT PRIMARY KEY,
	client_id     TEXT NOT NULL,
	authorize_url TEXT NOT NULL,
	token_url     TEXT NOT NULL,
	scopes        TEXT NOT NULL,
	created       TEXT NOT NULL
);

CREATE TABLE flow_state (
	flow    TEXT PRIMARY KEY REFERENCES flows (id) ON DELETE CASCADE,
	project TEXT NOT NULL,
	doc     JSONB NOT NULL
);

CREATE TABLE project_variables (
	project TEXT PRIMARY KEY,
	doc     JSONB NOT NULL
);

CREATE TABLE alert_subscriptions (
	seq     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id      TEXT NOT NULL UNIQUE,
	project TEXT NOT NULL,
	doc     JSONB NOT NULL
);
CREATE INDEX alert_subscriptions_project ON alert_subscriptions (project, seq);
CREATE TABLE alert_events (
	id         TEXT PRIMARY KEY,
	project    TEXT NOT NULL,
	type       TEXT NOT NULL,
	created_ms BIGINT NOT NULL,
	payload    TEXT NOT NULL
);
CREATE TABLE alert_deliveries (
	seq            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id             TEXT NOT NULL UNIQUE,
	project        TEXT NOT NULL,
	subscription   TEXT NOT NULL,
	event          TEXT NOT NULL,
	status         TEXT NOT NULL,
	next_ms        BIGINT,
	claim_until_ms BIGINT,
	doc            JSONB NOT NULL,
	UNIQUE (event, subscription)
);
CREATE INDEX alert_deliveries_due ON alert_deliveries (next_ms) WHERE status = 'PENDING';
CREATE INDEX alert_deliveries_subscription ON alert_deliveries (subscription, seq);

CREATE TABLE audit_log (
	id       TEXT PRIMARY KEY,
	project  TEXT NOT NULL,
	sort_key TEXT NOT NULL,
	time_ms  BIGINT NOT NULL,
	doc      JSONB NOT NULL
);
CREATE INDEX audit_log_project ON audit_log (project, sort_key);
CREATE INDEX audit_log_time ON audit_log (time_ms);

CREATE TABLE run_journal (
	run     TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	seq     BIGINT NOT NULL,
	patches TEXT NOT NULL,
	PRIMARY KEY (run, seq)
);

CREATE TABLE flow_versions (
	flow       TEXT NOT NULL,
	project    TEXT NOT NULL,
	version    BIGINT NOT NULL,
	created    TEXT NOT NULL,
	message    TEXT NOT NULL,
	created_by TEXT NOT NULL,
	definition JSONB NOT NULL,
	PRIMARY KEY (flow, version)
);
CREATE INDEX flow_versions_project ON flow_versions (project);
CREATE TABLE flow_drafts (
	flow    TEXT PRIMARY KEY,
	project TEXT NOT NULL,
	doc     JSONB NOT NULL
);

CREATE TABLE run_slots (
	scope   TEXT PRIMARY KEY,
	project TEXT NOT NULL,
	doc     JSONB NOT NULL
);

CREATE TABLE poll_state (
	flow    TEXT PRIMARY KEY REFERENCES flows (id) ON DELETE CASCADE,
	project TEXT NOT NULL,
	doc     JSONB NOT NULL
);

CREATE TABLE flow_insights (
	flow      TEXT NOT NULL REFERENCES flows (id) ON DELETE CASCADE,
	hour      BIGINT NOT NULL,
	succeeded BIGINT NOT NULL DEFAULT 0,
	failed    BIGINT NOT NULL DEFAULT 0,
	timeout   BIGINT NOT NULL DEFAULT 0,
	b0 BIGINT NOT NULL DEFAULT 0, b1 BIGINT NOT NULL DEFAULT 0, b2 BIGINT NOT NULL DEFAULT 0, b3 BIGINT NOT NULL DEFAULT 0,
	b4 BIGINT NOT NULL DEFAULT 0, b5 BIGINT NOT NULL DEFAULT 0, b6 BIGINT NOT NULL DEFAULT 0, b7 BIGINT NOT NULL DEFAULT 0,
	b8 BIGINT NOT NULL DEFAULT 0, b9 BIGINT NOT NULL DEFAULT 0, b10 BIGINT NOT NULL DEFAULT 0, b11 BIGINT NOT NULL DEFAULT 0,
	b12 BIGINT NOT NULL DEFAULT 0, b13 BIGINT NOT NULL DEFAULT 0, b14 BIGINT NOT NULL DEFAULT 0, b15 BIGINT NOT NULL DEFAULT 0,
	b16 BIGINT NOT NULL DEFAULT 0, b17 BIGINT NOT NULL DEFAULT 0, b18 BIGINT NOT NULL DEFAULT 0, b19 BIGINT NOT NULL DEFAULT 0,
	b20 BIGINT NOT NULL DEFAULT 0, b21 BIGINT NOT NULL DEFAULT 0, b22 BIGINT NOT NULL DEFAULT 0, b23 BIGINT NOT NULL DEFAULT 0,
	b24 BIGINT NOT NULL DEFAULT 0, b25 BIGINT NOT NULL DEFAULT 0, b26 BIGINT NOT NULL DEFAULT 0, b27 BIGINT NOT NULL DEFAULT 0,
	b28 BIGINT NOT NULL DEFAULT 0, b29 BIGINT NOT NULL DEFAULT 0, b30 BIGINT NOT NULL DEFAULT 0, b31 BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (flow, hour)
);

-- Cluster duties (cron, POLL, alert and sweep timers): one row per duty,
-- held by one node until its lease runs out (duties.go).
CREATE TABLE duty_leases (
	name        TEXT PRIMARY KEY,
	holder      TEXT NOT NULL,
	lease_until BIGINT NOT NULL
);

-- Settings shared by the nodes: the check value of FLOWD_SECRET_KEY.
CREATE TABLE cluster_settings (
	name  TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
`

// schemaUsers is sqlitestore's schemaUsers (its version 21): people
// (automation.UserStore). Emails are unique and stored lower-case by the
// Service; set-up links and sessions are kept by the SHA-256 hash of their
// token. A personal API key names its user in api_keys.user_id ("" for a
// project key), so that removing a member revokes their keys in the same
// transaction. memberships.seq is numbered by the writer (max + 1 under
// writeLock), as in sqlitestore, so that flowctl migrate copies it as is.
const schemaUsers = `
CREATE TABLE users (
	id            TEXT PRIMARY KEY,
	email         TEXT NOT NULL UNIQUE,
	password_hash TEXT NOT NULL DEFAULT '',
	created       TEXT NOT NULL,
	session_epoch BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE memberships (
	project TEXT NOT NULL,
	user_id TEXT NOT NULL,
	role    TEXT NOT NULL,
	created TEXT NOT NULL,
	seq     BIGINT NOT NULL,
	PRIMARY KEY (project, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id, seq);
CREATE TABLE invitations (
	hash    TEXT PRIMARY KEY,
	user_id TEXT NOT NULL,
	project TEXT NOT NULL,
	created TEXT NOT NULL,
	expires TEXT NOT NULL,
	used    TEXT
);
CREATE TABLE sessions (
	hash    TEXT PRIMARY KEY,
	user_id TEXT NOT NULL,
	epoch   BIGINT NOT NULL,
	created TEXT NOT NULL,
	expires BIGINT NOT NULL -- milliseconds since the epoch, compared by the sweep
);
CREATE INDEX sessions_expires ON sessions (expires);
ALTER TABLE api_keys ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
CREATE INDEX api_keys_user ON api_keys (project, user_id);
`

// schemaQueueOrder gives each queue entry its run's seq, and the ready
// entries an index in claim order (due, then seq), so that a claim picks
// its batch from run_queue alone (claimSQL) instead of joining every due
// entry to its run to sort them by the run's seq: over a backlog of 2,000
// that claim took 35 ms, under the write lock every node's writes wait on
// (docs/benchmarks.md). An entry written by a node
// of an older version gets seq 0, which only moves it ahead of the entries
// due in the same millisecond.
const schemaQueueOrder = `
ALTER TABLE run_queue ADD COLUMN seq BIGINT NOT NULL DEFAULT 0;
UPDATE run_queue q SET seq = r.seq FROM runs r WHERE r.id = q.run;
CREATE INDEX run_queue_ready ON run_queue (due_ms, seq) WHERE parked IS NULL;
-- The claim's plan reads the index in order only when the statistics know
-- the queue is long: a queue that grows from empty is analysed again
-- after every 1,000 changes rather than after 10 % of its rows.
ALTER TABLE run_queue SET (autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 1000);
`

// migrate applies the migrations the database lacks, all under
// migrateLock in one transaction: PostgreSQL's DDL is transactional, so a
// node that dies part way leaves the schema as it was.
func migrate(ctx context.Context, db *pdb) error {
	tx, err := db.DB.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version BIGINT PRIMARY KEY,
		applied TIMESTAMPTZ NOT NULL DEFAULT now()
	)`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if have > len(migrations) {
		// A newer node migrated the database: this older binary may not
		// know its tables, and says so rather than corrupt them.
		return fmt.Errorf("migrate: the database is at schema version %d, newer than this flowd's %d: upgrade this node", have, len(migrations))
	}
	for i := have; i < len(migrations); i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migrate to version %d: %w", i+1, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, i+1); err != nil {
			return fmt.Errorf("migrate to version %d: %w", i+1, err)
		}
	}
	return tx.Commit()
}
