package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// TestGroupCommitSavepoints holds the writer on one write while 40 more
// queue up, so that they share a batch; every other one writes a row and
// then fails. The rows of the writes that succeeded are all there, none of
// the failed ones is, and each caller got its own outcome.
func TestGroupCommitSavepoints(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "gc.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var maxBatch atomic.Int64
	s.batchHook = func(n int) {
		for m := maxBatch.Load(); int64(n) > m && !maxBatch.CompareAndSwap(m, int64(n)); m = maxBatch.Load() {
		}
	}
	put := func(tx *sql.Tx, name string) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO blobs (project, name, value) VALUES (?, ?, ?)`, "p", name, []byte("x"))
		return err
	}
	release := make(chan struct{})
	held := make(chan struct{})
	blocker := make(chan error, 1)
	go func() {
		blocker <- s.write(ctx, "blocker", func(tx *sql.Tx) error {
			close(held)
			<-release
			return put(tx, "blocker")
		})
	}()
	<-held

	errFail := errors.New("this write fails after writing")
	const n = 40
	errs := make([]error, n)
	var wg sync.WaitGroup
	var queued sync.WaitGroup
	queued.Add(n)
	for i := range n {
		wg.Go(func() {
			queued.Done()
			errs[i] = s.write(ctx, fmt.Sprintf("w%d", i), func(tx *sql.Tx) error {
				if err := put(tx, fmt.Sprintf("w%d", i)); err != nil {
					return err
				}
				if i%2 == 1 {
					return errFail
				}
				return nil
			})
		})
	}
	queued.Wait()
	close(release)
	wg.Wait()
	if err := <-blocker; err != nil {
		t.Fatalf("blocker: %v", err)
	}
	t.Logf("largest batch: %d writes", maxBatch.Load())

	for i := range n {
		name := fmt.Sprintf("w%d", i)
		var count int
		if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM blobs WHERE name = ?`, name).Scan(&count); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if errs[i] != nil || count != 1 {
				t.Errorf("%s: err %v, %d rows; want nil and 1", name, errs[i], count)
			}
		} else if !errors.Is(errs[i], errFail) || count != 0 {
			t.Errorf("%s: err %v, %d rows; want its own error and 0", name, errs[i], count)
		}
	}
}

// TestPreparedWrites: a statement a write function runs through exec is run
// as text the first time and prepared after that batch; later writes use
// the prepared form and see and change the same rows.
func TestPreparedWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "prep.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const put = `INSERT INTO blobs (project, name, value) VALUES (?, ?, ?)`
	const get = `SELECT value FROM blobs WHERE project = ? AND name = ?`
	var prepared []bool
	for i := range 3 {
		err := s.write(ctx, "put", func(tx *sql.Tx) error {
			_, isPrepared := s.prepared[put]
			prepared = append(prepared, isPrepared && s.prepared[put] != nil)
			if _, err := s.exec(ctx, tx, put, "p", fmt.Sprint("n", i), []byte(fmt.Sprint("v", i))); err != nil {
				return err
			}
			var v []byte
			if err := s.queryRow(ctx, tx, get, "p", fmt.Sprint("n", i)).Scan(&v); err != nil {
				return err
			}
			if string(v) != fmt.Sprint("v", i) {
				return fmt.Errorf("read back %q, want v%d", v, i)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if fmt.Sprint(prepared) != "[false true true]" {
		t.Fatalf("statement prepared before each write = %v; want [false true true]", prepared)
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM blobs WHERE project = 'p'`).Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows = %d, %v; want 3", n, err)
	}
}
