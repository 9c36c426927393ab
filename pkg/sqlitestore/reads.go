package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// readStmts holds the statements of the hot read queries prepared once on
// the read pool, by query text. database/sql with the modernc driver
// otherwise parses a query's text again at every call, and on a page of
// runs the parse was a steady share of the time. A *sql.Stmt on a pool is
// safe for concurrent use: database/sql prepares it again on each pool
// connection it runs on, once, and keeps it there.
type readStmts struct {
	mu     sync.RWMutex
	stmts  map[string]*sql.Stmt
	closed bool
}

// stmt returns the prepared statement of query on db, preparing it the
// first time it is asked for.
func (c *readStmts) stmt(ctx context.Context, db *sql.DB, query string) (*sql.Stmt, error) {
	c.mu.RLock()
	st, ok := c.stmts[query]
	c.mu.RUnlock()
	if ok {
		return st, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	if c.closed {
		return nil, errors.New("store closed")
	}
	// Prepared without the caller's ctx: its end must not spoil the
	// statement for the callers after it.
	st, err := db.PrepareContext(context.WithoutCancel(ctx), query)
	if err != nil {
		return nil, err
	}
	if c.stmts == nil {
		c.stmts = map[string]*sql.Stmt{}
	}
	c.stmts[query] = st
	return st, nil
}

// close closes every statement; later calls of stmt fail.
func (c *readStmts) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for _, st := range c.stmts {
		errs = append(errs, st.Close())
	}
	c.stmts = nil
	return errors.Join(errs...)
}

// query runs a read query of many rows on the read pool through its
// prepared statement.
func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := s.reads.stmt(ctx, s.r, query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args...)
}

// readRow is query for a query of one row.
func (s *Store) readRow(ctx context.Context, query string, args ...any) rowScanner {
	st, err := s.reads.stmt(ctx, s.r, query)
	if err != nil {
		return errRow{err}
	}
	return st.QueryRowContext(ctx, args...)
}

// errRow is a row whose query could not even be prepared.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
