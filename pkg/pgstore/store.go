// Package pgstore is flowd's store on PostgreSQL, for several flowd nodes
// on one database: projects, API keys, flows and their routes,
// connections, sealed secret blobs, runs and the run queue, the alert
// outbox, slots, poll state, versions, audit and variables, through
// github.com/jackc/pgx/v5 (its database/sql driver, so that the store's
// statements read as sqlitestore's do).
//
// Semantics are sqlitestore's, statement for statement: documents are
// stored as JSON (jsonb) beside the columns that queries and conditional
// writes use, and every write transaction first takes one transaction-
// scoped advisory lock (writeLock), which serialises writers across every
// node as SQLite's one writer does. The read-check-write steps of the
// domain (quotas, versions, fencing by lease token, slots) therefore hold
// across nodes without a retry loop; reads never take the lock. Run claims
// take due entries with FOR UPDATE SKIP LOCKED, and an enqueue notifies
// the other nodes' workers (LISTEN/NOTIFY, wake.go).
package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"flowservice/pkg/automation"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// writeLock is the advisory lock key every write transaction takes: the
// store's writes are serialised database-wide, as SQLite serialises them
// file-wide. Its figure is in docs/reliability.md.
const writeLock = 0x666c6f7764 // "flowd"

// Store implements automation.Store over one PostgreSQL database (the
// schema named by the URL's search_path, or public). It is safe for
// concurrent use, by many nodes at once.
type Store struct {
	// w is the pool write transactions run on, r the pool of reads: a
	// burst of long reads (run pages) never holds up a write.
	w, r *pdb
	// url is the connection URL, for the listener (wake.go).
	url string
	// cache holds flows and routes for the receivers (CacheFlows); nil
	// when off.
	cache *flowCache
	// claim bounds what a claim of queue entries loads (claimload.go).
	claim claimLimits
	// stops records when flows were disabled, for AppendSteps (flowstop.go).
	stops flowStops
	// alerts caches subscriptions for the run path (alerts.go).
	alerts alertState
	// wake is the listener: it tells workers that a run is due and keeps
	// the caches above coherent with the other nodes' writes (wake.go).
	wake wakeState
}

var _ automation.Store = (*Store)(nil)

// Option changes how Open opens a store.
type Option func(*options)

type options struct {
	cacheTTL time.Duration // CacheFlows
	claim    claimLimits   // ClaimLimits
	pool     PoolSizes     // Pools
}

// PoolSizes bounds the connections one store holds: Writers for write
// transactions (they queue on writeLock anyway, so a few suffice), Readers
// for reads.
type PoolSizes struct{ Writers, Readers int }

// DefaultPools are the pool sizes unless Pools says otherwise: 4 + 8 + the
// listener's one is 13 connections per node (docs/reliability.md).
var DefaultPools = PoolSizes{Writers: 4, Readers: 8}

// Pools sets the pool sizes (a zero field keeps its default).
func Pools(p PoolSizes) Option { return func(o *options) { o.pool = p } }

// Open connects to the database at url (a postgres:// URL or a libpq
// key=value string) and brings its schema up to date under an advisory
// lock, so that nodes starting together migrate once.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	o := options{pool: DefaultPools}
	for _, opt := range opts {
		opt(&o)
	}
	if o.pool.Writers <= 0 {
		o.pool.Writers = DefaultPools.Writers
	}
	if o.pool.Readers <= 0 {
		o.pool.Readers = DefaultPools.Readers
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// pgx's message may quote the URL, password included.
		return nil, errors.New("pgstore: the database URL does not parse (want postgres://user:password@host:port/database)")
	}
	open := func(n int) *pdb {
		db := stdlib.OpenDB(*cfg)
		db.SetMaxOpenConns(n)
		db.SetMaxIdleConns(n)
		db.SetConnMaxIdleTime(5 * time.Minute)
		return &pdb{db}
	}
	w, r := open(o.pool.Writers), open(o.pool.Readers)
	if err := migrate(ctx, w); err != nil {
		_ = w.Close()
		_ = r.Close()
		return nil, fmt.Errorf("pgstore: open: %w", err)
	}
	s := &Store{w: w, r: r, url: url, cache: newFlowCache(o.cacheTTL), claim: o.claim.withDefaults()}
	if s.cache != nil {
		s.cache.up = &s.wake.up
	}
	s.startListener()
	return s, nil
}

// Close stops the listener and closes the pools.
func (s *Store) Close() error {
	s.wake.stop()
	return errors.Join(s.r.Close(), s.w.Close())
}

// unavailable reports whether err means the database cannot take the write
// now, whatever was written: the connection failed, the server is short of
// resources (disk full, too many connections), shutting down, or read-only
// (a standby). Clients get a 503 with Retry-After for these, not a 500.
func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"), // insufficient resources
			strings.HasPrefix(pe.Code, "57"), // operator intervention (shutdown)
			pe.Code == "25006":               // read-only transaction (a standby)
			return true
		}
		return false
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || pgconn.SafeToRetry(err) || errors.Is(err, sql.ErrConnDone)
}

// isUnique reports a unique constraint violation.
func isUnique(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// errUnavailable is what a write that failed for one of those reasons
// returns: the *automation.Error for the client, with the cause kept for
// the log.
func errUnavailable(op string, err error) error {
	return fmt.Errorf("pgstore: %s: %w (%w)", op, automation.Unavailable("STORE_UNAVAILABLE",
		"the server cannot save changes right now (database unreachable, full or read-only); try again later"), err)
}

// unchangedError marks an error returned before any change; in
// sqlitestore it keeps a batch, here every write is its own transaction
// and it only carries the error.
type unchangedError struct{ err error }

func (e *unchangedError) Error() string { return e.err.Error() }
func (e *unchangedError) Unwrap() error { return e.err }

func unchanged(err error) error { return &unchangedError{err} }

// write runs fn inside a write transaction holding writeLock and returns
// once it committed, or fn's error (then nothing of it is written).
// Errors of the domain (*automation.Error) pass through as they are; any
// other is wrapped with op, and one the database cannot take now is an
// ErrUnavailable.
func (s *Store) write(ctx context.Context, op string, fn func(tx *txn) error) error {
	// Not the caller's context once begun: a caller that gives up must not
	// leave the commit's outcome unknown to the store.
	wctx := context.WithoutCancel(ctx)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	tx, err := s.w.DB.BeginTx(wctx, nil)
	if err != nil {
		return wrapWriteErr(op, "begin", err)
	}
	if _, err := tx.ExecContext(wctx, `SELECT pg_advisory_xact_lock($1)`, int64(writeLock)); err != nil {
		_ = tx.Rollback()
		return wrapWriteErr(op, "lock", err)
	}
	t := &txn{tx}
	if err := fn(t); err != nil {
		_ = tx.Rollback()
		var u *unchangedError
		if errors.As(err, &u) {
			err = u.err
		}
		return wrapWriteErr(op, "", err)
	}
	if err := tx.Commit(); err != nil {
		return wrapWriteErr(op, "commit", err)
	}
	return nil
}

// writeLean is write: sqlitestore's distinction (no savepoint) has no
// cost to save here.
func (s *Store) writeLean(ctx context.Context, op string, fn func(tx *txn) error) error {
	return s.write(ctx, op, fn)
}

// exec runs a statement inside a write function.
func (s *Store) exec(ctx context.Context, tx *txn, query string, args ...any) (sql.Result, error) {
	return tx.ExecContext(ctx, query, args...)
}

// queryRow is exec for a query of one row.
func (s *Store) queryRow(ctx context.Context, tx *txn, query string, args ...any) *sql.Row {
	return tx.QueryRowContext(ctx, query, args...)
}

// queryTx is exec for a query of many rows.
func (s *Store) queryTx(ctx context.Context, tx *txn, query string, args ...any) (*sql.Rows, error) {
	return tx.QueryContext(ctx, query, args...)
}

// query runs a read query of many rows on the read pool. pgx prepares and
// caches each statement per connection by itself.
func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return s.r.QueryContext(ctx, query, args...)
}

// readRow is query for a query of one row.
func (s *Store) readRow(ctx context.Context, query string, args ...any) rowScanner {
	return s.r.QueryRowContext(ctx, query, args...)
}

// The statements are sqlitestore's, written with ? and ?N placeholders;
// rebind turns them into PostgreSQL's $N once per statement text.
var (
	rebound   sync.Map // string -> string
	placeHold = regexp.MustCompile(`\?([0-9]*)`)
)

func rebind(q string) string {
	if v, ok := rebound.Load(q); ok {
		return v.(string)
	}
	n := 0
	out := placeHold.ReplaceAllStringFunc(q, func(m string) string {
		if len(m) > 1 {
			return "$" + m[1:]
		}
		n++
		return "$" + strconv.Itoa(n)
	})
	rebound.Store(q, out)
	return out
}

// pdb is a pool whose statements are rebound.
type pdb struct{ *sql.DB }

func (d *pdb) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return d.DB.QueryContext(ctx, rebind(q), args...)
}

func (d *pdb) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return d.DB.QueryRowContext(ctx, rebind(q), args...)
}

func (d *pdb) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return d.DB.ExecContext(ctx, rebind(q), args...)
}

// txn is a write transaction whose statements are rebound.
type txn struct{ *sql.Tx }

func (t *txn) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.Tx.QueryContext(ctx, rebind(q), args...)
}

func (t *txn) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.Tx.QueryRowContext(ctx, rebind(q), args...)
}

func (t *txn) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.Tx.ExecContext(ctx, rebind(q), args...)
}

// wrapWriteErr gives a write's error its context: domain errors pass as
// they are, storage conditions become ErrUnavailable.
func wrapWriteErr(op, stage string, err error) error {
	var e *automation.Error
	if errors.As(err, &e) {
		return err
	}
	if stage != "" {
		op += ": " + stage
	}
	if unavailable(err) {
		return errUnavailable(op, err)
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

// Ping reads from the database: the health check's "the store answers".
// It has a connection of its own, so it measures the database, not the
// queue for the read pool.
func (s *Store) Ping(ctx context.Context) error {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		return fmt.Errorf("pgstore: ping: %w", err)
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
// after the seq of the last item returned. run runs the query (Store.query,
// prepared on the read pool).
func readPage[T any](ctx context.Context, run func(ctx context.Context, query string, args ...any) (*sql.Rows, error), what string, limit int, scan func(rowScanner) (T, int64, error), query string, args ...any) (automation.Page[T], error) {
	var page automation.Page[T]
	rows, err := run(ctx, query, args...)
	if err != nil {
		return page, fmt.Errorf("pgstore: list %s: %w", what, err)
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
			return page, fmt.Errorf("pgstore: list %s: %w", what, err)
		}
		page.Items = append(page.Items, item)
		lastSeq = seq
	}
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("pgstore: list %s: %w", what, err)
	}
	return page, nil
}

// URL is the connection URL the store was opened with (another store of
// the same database, in tests and flowctl).
func (s *Store) URL() string { return s.url }
