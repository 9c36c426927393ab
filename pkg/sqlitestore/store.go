// Package sqlitestore is the embedded store of flowd and flowctl: projects,
// API keys, flows, their workflow builder routes, connections and sealed
// secret blobs in one SQLite file, through the pure-Go driver
// modernc.org/sqlite (no cgo, so the binaries cross-compile).
//
// The file may be open in two processes at once (the server flowd and the
// admin CLI flowctl). WAL mode lets readers run beside the one writer,
// every write transaction starts with BEGIN IMMEDIATE so that two writers
// queue on the busy timeout instead of deadlocking on a lock upgrade, and the
// schema is migrated at Open inside those same write transactions.
package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// busyTimeout is how long a statement waits for another connection's (or
// process's) write lock before failing with SQLITE_BUSY. Writes are short, so
// five seconds only runs out when something is badly wrong.
const busyTimeout = 5000 // milliseconds

// Store implements automation.Store over one SQLite file. It is safe for
// concurrent use.
type Store struct {
	// w is the only connection that writes: SQLite admits one writer at a
	// time anyway, and queueing writers in database/sql is cheaper than
	// letting them spin on the busy handler.
	w *sql.DB
	// r is a pool of read-only connections: in WAL mode they read a
	// consistent snapshot while a write is in progress.
	r *sql.DB
	// ping is one read-only connection of its own for Ping, so that a
	// health check never queues behind a burst of large reads in r.
	ping *sql.DB
}

var _ automation.Store = (*Store)(nil)

// Option changes how Open opens a store.
type Option func(*options)

type options struct{ queryOnly bool }

// QueryOnly opens the store so that every write fails as on a read-only
// database (SQLITE_READONLY), after the schema is brought up to date: for
// inspecting a data directory without any risk of changing it, and for
// testing what clients see when the disk refuses writes.
func QueryOnly() Option { return func(o *options) { o.queryOnly = true } }

// Open opens (creating if needed) the database file at path and brings its
// schema up to date. The file and its -wal and -shm companions are
// readable by their owner only (0600): they hold keys' hashes, flows and
// run payloads.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if path == "" || strings.Contains(path, "?") {
		return nil, fmt.Errorf("sqlitestore: open %q: want a file path without '?'", path)
	}
	if err := tightenFiles(path); err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	w, err := sql.Open("sqlite", dsn(path, url.Values{
		// WAL lets readers, here and in the other process, run beside a
		// writer. The mode is stored in the file, so readers need not set it.
		"_journal_mode": {"WAL"},
		// With WAL, NORMAL syncs at checkpoints rather than at every
		// commit: a power loss may drop the last commits but never
		// corrupts the file, and a crash of the process alone loses
		// nothing. That is the usual trade for a local server.
		"_synchronous": {"NORMAL"},
		// BEGIN IMMEDIATE takes the write lock up front, so a transaction
		// never has to upgrade a read lock, which is where two writers
		// would deadlock and one would get SQLITE_BUSY at once.
		"_txlock": {"immediate"},
	}))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	if err := migrateRetrying(ctx, w); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}

	if o.queryOnly {
		// w holds its one connection for the store's life, so the pragma
		// stays in force.
		if _, err := w.ExecContext(ctx, `PRAGMA query_only = true`); err != nil {
			_ = w.Close()
			return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
		}
	}

	// The readers are opened after migrate, so the file is in WAL mode
	// before any of them connects.
	r, err := sql.Open("sqlite", dsn(path, url.Values{"_query_only": {"true"}}))
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	n := max(2, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	ping, err := sql.Open("sqlite", dsn(path, url.Values{"_query_only": {"true"}}))
	if err != nil {
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	ping.SetMaxOpenConns(1)
	ping.SetMaxIdleConns(1)
	return &Store{w: w, r: r, ping: ping}, nil
}

// migrateRetrying migrates, trying again while the file is busy. Two
// processes opening a new file at once race to switch it to WAL mode, and
// SQLite reports that race as SQLITE_BUSY at once, without waiting on the
// busy timeout; the loser only has to try again.
func migrateRetrying(ctx context.Context, db *sql.DB) error {
	var err error
	for attempt := 0; attempt < 100; attempt++ {
		if err = migrate(ctx, db); !isBusy(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(10+attempt) * time.Millisecond):
		}
	}
	return err
}

// tightenFiles creates the database file with mode 0600 if it is missing
// (SQLite gives its -wal and -shm files the database file's mode) and
// narrows an existing file, and companions left by an older version, to
// 0600.
func tightenFiles(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// unavailable reports whether err means the database cannot take the write
// now, whatever was written: the disk is full, the file or directory is
// read-only, another writer held the lock past the busy timeout, or an I/O
// error. Clients get a 503 with Retry-After for these, not a 500.
func unavailable(err error) bool {
	var e *sqlite.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED,
		sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN:
		return true
	}
	return false
}

// errUnavailable is what a write that failed for one of those reasons
// returns: the *automation.Error for the client, with the cause kept for
// the log.
func errUnavailable(op string, err error) error {
	return fmt.Errorf("sqlitestore: %s: %w (%w)", op, automation.Unavailable("STORE_UNAVAILABLE",
		"the server cannot save changes right now (storage full, read-only or busy); try again later"), err)
}

func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}

// dsn builds the driver's connection string: the settings every connection
// shares, plus extra.
func dsn(path string, extra url.Values) string {
	q := url.Values{
		"_busy_timeout": {fmt.Sprint(busyTimeout)},
		"_foreign_keys": {"true"},
	}
	for k, v := range extra {
		q[k] = v
	}
	// A plain path, not a file: URI: the driver cuts the name at the first
	// "?" and reads its own parameters from the rest.
	return path + "?" + q.Encode()
}

// Close closes the database. The last connection to close checkpoints the
// WAL back into the main file.
func (s *Store) Close() error {
	return errors.Join(s.ping.Close(), s.r.Close(), s.w.Close())
}

// write runs fn in one write transaction (BEGIN IMMEDIATE) and commits it.
// Errors of the domain (*automation.Error) pass through as they are; any
// other is wrapped with op.
// A write the database cannot take now (disk full, read-only, busy past
// the timeout, I/O error) is an ErrUnavailable, so that clients are told to
// try again rather than shown a 500.
func (s *Store) write(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		if unavailable(err) {
			return errUnavailable(op+": begin", err)
		}
		return fmt.Errorf("sqlitestore: %s: begin: %w", op, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		var e *automation.Error
		if errors.As(err, &e) {
			return err
		}
		if unavailable(err) {
			return errUnavailable(op, err)
		}
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	if err := tx.Commit(); err != nil {
		if unavailable(err) {
			return errUnavailable(op+": commit", err)
		}
		return fmt.Errorf("sqlitestore: %s: commit: %w", op, err)
	}
	return nil
}

// Ping reads from the database: the health check's "the store answers".
// It has a connection of its own, so it measures the database, not the
// queue for the read pool.
func (s *Store) Ping(ctx context.Context) error {
	var n int
	if err := s.ping.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		return fmt.Errorf("sqlitestore: ping: %w", err)
	}
	return nil
}

// Times are stored as RFC 3339 text in UTC with all the precision they
// carry, so that a sqlite3 shell shows them readably.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad stored time %q: %w", s, err)
	}
	return t.UTC(), nil
}

func formatTimePtr(t *time.Time) sql.NullString {
	if t == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: formatTime(*t), Valid: true}
}

func parseTimePtr(s sql.NullString) (*time.Time, error) {
	if !s.Valid {
		return nil, nil
	}
	t, err := parseTime(s.String)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// readPage runs a list query that reads limit+1 rows and scans them into a
// page: the extra row only tells that there is a next page, which starts
// after the seq of the last item returned.
func readPage[T any](ctx context.Context, db *sql.DB, what string, limit int, scan func(rowScanner) (T, int64, error), query string, args ...any) (automation.Page[T], error) {
	var page automation.Page[T]
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return page, fmt.Errorf("sqlitestore: list %s: %w", what, err)
	}
	defer rows.Close()
	var lastSeq int64
	for rows.Next() {
		if len(page.Items) == limit {
			page.Next = strconv.FormatInt(lastSeq, 10)
			break
		}
		item, seq, err := scan(rows)
		if err != nil {
			return page, fmt.Errorf("sqlitestore: list %s: %w", what, err)
		}
		page.Items = append(page.Items, item)
		lastSeq = seq
	}
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("sqlitestore: list %s: %w", what, err)
	}
	return page, nil
}
