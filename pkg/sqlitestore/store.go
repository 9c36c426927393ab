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
	"sync"
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

	// writes hands write requests to the writer goroutine (group commit,
	// see write); closed stops it and writerDone tells it has stopped.
	writes     chan *writeReq
	closed     chan struct{}
	closeOnce  sync.Once
	writerDone chan struct{}
	// savepoint, release and rollbackTo are prepared once on the writer's
	// connection: every write in a batch runs two of them, and parsing
	// them again each time was a measurable share of the writer's time.
	savepoint, release, rollbackTo *sql.Stmt
	// prepared holds the statements of write functions (exec, queryRow)
	// prepared once on the writer's connection, nil for one that could
	// not be; toPrepare the statements met since the last batch, prepared
	// between batches (the one connection is busy during one). Only the
	// writer goroutine touches either.
	prepared  map[string]*sql.Stmt
	toPrepare map[string]bool
	// reads holds the hot read queries prepared on r (reads.go).
	reads readStmts
	// claim bounds what a claim of queue entries loads (claimload.go).
	claim claimLimits
	// cache holds flows and routes for the receivers (CacheFlows); nil
	// when off.
	cache *flowCache
	// stops records when flows were disabled, for AppendSteps (flowstop.go).
	stops flowStops
	// alerts caches subscriptions for the run path (alerts.go).
	alerts alertState
	// batchHook, when set (tests only, before any write), is told the size
	// of each batch the writer commits.
	batchHook func(n int)
}

var _ automation.Store = (*Store)(nil)

// Option changes how Open opens a store.
type Option func(*options)

type options struct {
	queryOnly bool
	cacheTTL  time.Duration // CacheFlows
	claim     claimLimits   // ClaimLimits
}

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
		// FULL: in WAL mode every COMMIT fsyncs the WAL, so a write that
		// returned survives a power loss, not only a crash of the
		// process. Group commit (see write) shares that fsync among all
		// the writes waiting at the time, which is what makes FULL cheap.
		"_synchronous": {"FULL"},
		// BEGIN IMMEDIATE takes the write lock up front, so a transaction
		// never has to upgrade a read lock, which is where two writers
		// would deadlock and one would get SQLITE_BUSY at once.
		"_txlock": {"immediate"},
		// The statement journal, which a savepoint copies each page it
		// changes to first, stays in memory: on disk its writes were a
		// tenth of the writer's time.
		"_pragma": {"temp_store(memory)"},
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
	var stmts [3]*sql.Stmt
	for i, q := range []string{`SAVEPOINT w`, `RELEASE w`, `ROLLBACK TO w`} {
		if stmts[i], err = w.PrepareContext(ctx, q); err != nil {
			_ = ping.Close()
			_ = r.Close()
			_ = w.Close()
			return nil, fmt.Errorf("sqlitestore: open %s: prepare %s: %w", path, q, err)
		}
	}
	s := &Store{w: w, r: r, ping: ping, savepoint: stmts[0], release: stmts[1], rollbackTo: stmts[2], prepared: map[string]*sql.Stmt{}, toPrepare: map[string]bool{}, writes: make(chan *writeReq), closed: make(chan struct{}), writerDone: make(chan struct{}), cache: newFlowCache(o.cacheTTL), claim: o.claim.withDefaults()}
	go s.writer()
	return s, nil
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
// Writes already handed to the writer finish first; later ones fail.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	<-s.writerDone
	errs := []error{s.savepoint.Close(), s.release.Close(), s.rollbackTo.Close(), s.reads.close()}
	for _, st := range s.prepared {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(append(errs, s.ping.Close(), s.r.Close(), s.w.Close())...)
}

// A write is one caller's function over a write transaction, handed to the
// store's single writer goroutine (see writer).
type writeReq struct {
	ctx  context.Context
	op   string
	fn   func(tx *sql.Tx) error
	done chan error // buffered: the writer never waits on a caller
	err  error      // fn's own outcome, nil until the batch commits
	// lean: fn runs without a savepoint of its own (see writeLean).
	lean bool
	// run, set by Enqueue, lets the writer insert the batch's runs
	// together (enqueueAll) instead of calling fn for each.
	run *newRun
}

// unchangedError is a lean write function's error that it returned before
// changing anything (see writeLean).
type unchangedError struct{ err error }

func (e *unchangedError) Error() string { return e.err.Error() }
func (e *unchangedError) Unwrap() error { return e.err }

// unchanged marks err as returned by a lean write function before its
// first change: the writer then answers it with err and keeps the batch.
func unchanged(err error) error { return &unchangedError{err} }

// errLeanFailed is runBatch's answer when a lean function failed after it
// may have changed something: the batch's transaction was rolled back, and
// commit runs the batch again with a savepoint for every caller.
var errLeanFailed = errors.New("a lean write failed part way")

// maxBatch bounds how many callers share one commit: enough to amortise the
// fsync across a burst, few enough that one batch's transaction stays short.
const maxBatch = 256

// write runs fn inside a write transaction and returns once that
// transaction is durable on disk, or fn's error.
//
// Group commit: write hands fn to the store's one writer goroutine, which
// runs the functions of every caller waiting at that moment in one SQLite
// transaction, each inside a SAVEPOINT of its own, and commits once. A
// function that fails rolls back to its savepoint only: its changes are
// undone and the others' stay. Callers are answered only after the COMMIT
// returns, so many webhooks share one fsync and none is answered before
// its data is durable.
//
// Crash safety: the database runs in WAL mode with synchronous=FULL, so
// COMMIT returns only after the WAL frames of the whole transaction, commit
// record included, are fsynced. A crash before that point loses the batch
// as a whole, atomically, and no caller of that batch was answered success;
// a crash after it keeps every change of the batch. A caller whose function
// failed was answered with its error and its savepoint was rolled back
// before the commit, so none of its changes are in the file. A caller's
// function runs on the writer goroutine while the caller waits, so the
// closure's captured variables are only read back after the answer.
//
// Errors of the domain (*automation.Error) pass through as they are; any
// other is wrapped with op. A write the database cannot take now (disk
// full, read-only, busy past the timeout, I/O error) is an ErrUnavailable,
// so that clients are told to try again rather than shown a 500.
func (s *Store) write(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	return s.send(&writeReq{ctx: ctx, op: op, fn: fn, done: make(chan error, 1)})
}

// writeLean is write for a function that needs no savepoint of its own,
// which is most of the cost of a small write in a large batch: SQLite
// copies every page a write touches inside a savepoint to its statement
// journal first, so that ROLLBACK TO can put it back. fn must either
// succeed, or fail with unchanged(err) before its first change, or fail
// with any other error only in the rare case that it cannot tell: then the
// writer rolls back the whole batch and runs it again with a savepoint per
// caller (write's behaviour), so that every caller still gets the outcome
// of its own write alone. A statement error is never unchanged: SQLite may
// have rolled back the whole transaction with it, which only the
// savepoint path notices.
func (s *Store) writeLean(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	return s.send(&writeReq{ctx: ctx, op: op, fn: fn, done: make(chan error, 1), lean: true})
}

// send hands a write to the writer goroutine and waits for its outcome.
func (s *Store) send(req *writeReq) error {
	if req.run != nil {
		auditEnqueue(req) // a retry or replay records its entry with the run
	}
	ctx, op := req.ctx, req.op
	select {
	case s.writes <- req:
	case <-ctx.Done():
		return fmt.Errorf("sqlitestore: %s: %w", op, ctx.Err())
	case <-s.closed:
		return fmt.Errorf("sqlitestore: %s: store closed", op)
	}
	// Once handed over the write may commit, so wait for its outcome even
	// if ctx ends: the caller must not be told "failed" about a write that
	// then lands. The writer skips requests whose ctx ended before their turn.
	return <-req.done
}

// writer is the store's one writing goroutine. It takes a waiting request,
// gathers every other request already waiting (up to maxBatch) and commits
// them together. It does not wait to fill a batch: while one batch commits,
// the next callers queue up, so batches grow with the load by themselves
// and a lone write pays no delay.
func (s *Store) writer() {
	defer close(s.writerDone)
	batch := make([]*writeReq, 0, maxBatch)
	for {
		select {
		case req := <-s.writes:
			batch = append(batch[:0], req)
		case <-s.closed:
			return
		}
	gather:
		for len(batch) < maxBatch {
			select {
			case req := <-s.writes:
				batch = append(batch, req)
			default:
				break gather
			}
		}
		s.commit(batch)
		clear(batch)
		s.prepareWanted()
	}
}

// prepareWanted prepares on the writer's connection the statements write
// functions ran as text since the last batch, so that later writes skip
// parsing them: the SQLite parser was near the top of the writer's CPU
// profile. Only the writer goroutine calls it, between batches.
func (s *Store) prepareWanted() {
	for q := range s.toPrepare {
		st, err := s.w.PrepareContext(context.Background(), q)
		if err != nil {
			st = nil // run as text from now on
		}
		s.prepared[q] = st
		delete(s.toPrepare, q)
	}
}

// stmt is the prepared form of a write function's statement, or nil when
// there is none yet (it will be prepared after this batch).
func (s *Store) stmt(query string) *sql.Stmt {
	st, ok := s.prepared[query]
	if !ok {
		s.toPrepare[query] = true
	}
	return st
}

// exec runs a statement inside a write function (fn of write), prepared
// when it has been met before.
func (s *Store) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	if st := s.stmt(query); st != nil {
		return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return tx.ExecContext(ctx, query, args...)
}

// queryRow is exec for a query of one row.
func (s *Store) queryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	if st := s.stmt(query); st != nil {
		return tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return tx.QueryRowContext(ctx, query, args...)
}

// commit runs a batch in one transaction and answers each caller. If the
// transaction as a whole fails (BEGIN, a savepoint statement or COMMIT, or
// a statement whose failure SQLite answers by rolling back the whole
// transaction, such as an interrupt or a full disk), nothing of the batch
// was written; a batch of several is then run again one caller per
// transaction, so that each caller gets the outcome of its own write alone.
func (s *Store) commit(batch []*writeReq) {
	live := batch[:0]
	for _, req := range batch {
		if err := req.ctx.Err(); err != nil {
			req.done <- fmt.Errorf("sqlitestore: %s: %w", req.op, err)
			continue
		}
		live = append(live, req)
	}
	if len(live) == 0 {
		return
	}
	if s.batchHook != nil {
		s.batchHook(len(live))
	}
	err := s.runBatch(live, false)
	if errors.Is(err, errLeanFailed) {
		for _, req := range live {
			req.err = nil
		}
		err = s.runBatch(live, true)
	}
	if err != nil && len(live) > 1 {
		for _, req := range live {
			req.err = nil
			if err := s.runBatch([]*writeReq{req}, true); err != nil {
				req.done <- err
			} else {
				req.done <- req.err
			}
		}
		return
	}
	for _, req := range live {
		if err != nil {
			req.done <- err
		} else {
			req.done <- req.err
		}
	}
}

// runBatch runs the requests in one transaction, each in a savepoint
// (lean ones without, unless safe), and commits. It returns an error only
// when the transaction failed as a whole (then nothing was written; for
// errLeanFailed, commit tries again with safe set); each request's own
// failure is in its err.
func (s *Store) runBatch(batch []*writeReq, safe bool) error {
	op := batch[0].op
	if len(batch) > 1 {
		op = fmt.Sprintf("%s (with %d other writes)", op, len(batch)-1)
	}
	// Not any caller's context: one caller giving up must not end the
	// others' transaction.
	tx, err := s.w.BeginTx(context.Background(), nil)
	if err != nil {
		return wrapWriteErr(op, "begin", err)
	}
	var runs []*writeReq
	if !safe {
		for _, req := range batch {
			if req.run != nil {
				runs = append(runs, req)
			}
		}
	}
	if len(runs) > 1 {
		// The callers wait for the commit together, so the enqueues may
		// take their turn first.
		if err := s.enqueueAll(context.Background(), tx, runs); err != nil {
			_ = tx.Rollback()
			return errLeanFailed
		}
	}
	for _, req := range batch {
		if req.run != nil && len(runs) > 1 {
			continue // done by enqueueAll
		}
		if req.lean && !safe {
			err := req.fn(tx)
			var u *unchangedError
			switch {
			case err == nil:
			case errors.As(err, &u):
				req.err = wrapWriteErr(req.op, "", u.err)
			default:
				_ = tx.Rollback()
				return errLeanFailed
			}
			continue
		}
		if _, err := tx.Stmt(s.savepoint).Exec(); err != nil {
			_ = tx.Rollback()
			return wrapWriteErr(op, "savepoint", err)
		}
		if err := req.fn(tx); err != nil {
			var u *unchangedError
			if errors.As(err, &u) {
				err = u.err
			}
			req.err = wrapWriteErr(req.op, "", err)
			// ROLLBACK TO leaves the savepoint open; RELEASE ends it. If
			// SQLite already rolled the whole transaction back, these fail
			// and so does the batch.
			_, rerr := tx.Stmt(s.rollbackTo).Exec()
			if rerr == nil {
				_, rerr = tx.Stmt(s.release).Exec()
			}
			if rerr != nil {
				_ = tx.Rollback()
				if len(batch) == 1 {
					return req.err
				}
				return wrapWriteErr(op, "rollback to savepoint", rerr)
			}
			continue
		}
		if _, err := tx.Stmt(s.release).Exec(); err != nil {
			_ = tx.Rollback()
			return wrapWriteErr(op, "release savepoint", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return wrapWriteErr(op, "commit", err)
	}
	return nil
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
	return fmt.Errorf("sqlitestore: %s: %w", op, err)
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
// after the seq of the last item returned. run runs the query (Store.query,
// prepared on the read pool).
func readPage[T any](ctx context.Context, run func(ctx context.Context, query string, args ...any) (*sql.Rows, error), what string, limit int, scan func(rowScanner) (T, int64, error), query string, args ...any) (automation.Page[T], error) {
	var page automation.Page[T]
	rows, err := run(ctx, query, args...)
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
