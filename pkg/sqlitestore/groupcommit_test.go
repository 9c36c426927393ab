package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestGroupCommitSavepoints holds the writer on one write while 40 more
// queue up, so that they share a batch; every other one writes a row and
// then fails. The rows of the writes that succeeded are all there, none of
// the failed ones is, and each caller got its own outcome.
func TestGroupCommitSavepoints(t *testing.T) {
	ctx := context.Background()
	s, maxBatch := openCountingBatches(t, "gc.db")
	put := func(tx *sql.Tx, name string) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO blobs (project, name, value) VALUES (?, ?, ?)`, "p", name, []byte("x"))
		return err
	}
	unblock := holdWriter(t, s, func(tx *sql.Tx) error { return put(tx, "blocker") })

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
	unblock()
	wg.Wait()
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
	s := openTemp(t, "prep.db")
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

// TestGroupCommitLean mixes, in one batch, lean writes that succeed, lean
// writes that fail before any change (unchanged), savepointed writes that
// fail after writing, and lean writes that fail after writing, which make
// the writer run the batch again with savepoints. Every caller gets its
// own outcome and exactly the rows of the writes that succeeded are there.
func TestGroupCommitLean(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, "lean.db")
	var batches []int
	var mu sync.Mutex
	s.batchHook = func(n int) { mu.Lock(); batches = append(batches, n); mu.Unlock() }
	put := func(tx *sql.Tx, name string) error {
		_, err := s.exec(ctx, tx, `INSERT INTO blobs (project, name, value) VALUES (?, ?, ?)`, "p", name, []byte("x"))
		return err
	}
	unblock := holdWriter(t, s, func(tx *sql.Tx) error { return put(tx, "blocker") })

	errUnchanged := errors.New("refused before writing")
	errPartial := errors.New("failed after writing")
	// Kinds by i%4: 0 lean ok, 1 lean unchanged, 2 savepointed partial,
	// 3 lean partial (only i == 3, so that most of the batch is lean).
	const n = 40
	want := func(i int) (int, error) {
		switch {
		case i%4 == 1:
			return 0, errUnchanged
		case i%4 == 2 || i == 3:
			return 0, errPartial
		}
		return 1, nil
	}
	errs := make([]error, n)
	var wg, queued sync.WaitGroup
	queued.Add(n)
	for i := range n {
		wg.Go(func() {
			queued.Done()
			name := fmt.Sprintf("w%d", i)
			switch {
			case i%4 == 1:
				errs[i] = s.writeLean(ctx, name, func(tx *sql.Tx) error { return unchanged(errUnchanged) })
			case i%4 == 2:
				errs[i] = s.write(ctx, name, func(tx *sql.Tx) error {
					if err := put(tx, name); err != nil {
						return err
					}
					return errPartial
				})
			default:
				errs[i] = s.writeLean(ctx, name, func(tx *sql.Tx) error {
					if err := put(tx, name); err != nil {
						return err
					}
					if i == 3 {
						return errPartial
					}
					return nil
				})
			}
		})
	}
	queued.Wait()
	unblock()
	wg.Wait()
	mu.Lock()
	t.Logf("batches: %v", batches)
	mu.Unlock()
	for i := range n {
		name := fmt.Sprintf("w%d", i)
		var count int
		if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM blobs WHERE name = ?`, name).Scan(&count); err != nil {
			t.Fatal(err)
		}
		wantCount, wantErr := want(i)
		if count != wantCount || (wantErr == nil && errs[i] != nil) || (wantErr != nil && !errors.Is(errs[i], wantErr)) {
			t.Errorf("%s: err %v, %d rows; want %v and %d", name, errs[i], count, wantErr, wantCount)
		}
	}
}

// TestEnqueueBatch holds the writer while 150 enqueues queue up, so that
// they share a batch and its multi-row inserts (chunks of 64, 16, 4 and 1):
// a third of them repeat a run stored before, two more repeat a run new in
// the batch. The repeats are RunExists, every other run and its queue
// entry is stored once, with its own fields.
func TestEnqueueBatch(t *testing.T) {
	ctx := context.Background()
	s, largest := openCountingBatches(t, "batch.db")
	created := time.Now().UTC().Truncate(time.Millisecond)
	run := func(id string) automation.Run {
		return automation.Run{ID: id, Project: "prj_" + id, FlowID: "flw_" + id, Status: automation.RunRunning,
			Trigger: automation.TriggerData{Body: json.RawMessage(`{"id":"` + id + `"}`)}, Steps: []automation.StepResult{}, Created: created}
	}
	if err := s.Enqueue(ctx, run("run_old")); err != nil {
		t.Fatal(err)
	}
	unblock := holdWriter(t, s, func(tx *sql.Tx) error { return nil })
	const n = 150
	id := func(i int) string {
		switch {
		case i%3 == 0:
			return "run_old"
		case i == 100 || i == 101:
			return "run_twice"
		}
		return fmt.Sprintf("run_%d", i)
	}
	errs := make([]error, n)
	var wg, queued sync.WaitGroup
	queued.Add(n)
	for i := range n {
		wg.Go(func() {
			queued.Done()
			errs[i] = s.Enqueue(ctx, run(id(i)))
		})
	}
	// Most callers are waiting on the writer by now; the outcomes checked
	// below hold however the writes were batched.
	queued.Wait()
	unblock()
	wg.Wait()
	t.Logf("largest batch: %d writes", largest.Load())
	twice := 0
	for i, err := range errs {
		switch {
		case id(i) == "run_twice":
			if err == nil {
				twice++
			} else if !automation.IsRunExists(err) {
				t.Errorf("enqueue %d (run_twice): %v", i, err)
			}
		case i%3 == 0:
			if !automation.IsRunExists(err) {
				t.Errorf("enqueue %d (a stored run again): %v, want RunExists", i, err)
			}
		case err != nil:
			t.Errorf("enqueue %d: %v", i, err)
		}
	}
	if twice != 1 {
		t.Errorf("run_twice enqueued %d times, want 1", twice)
	}
	for i := range n {
		if i%3 == 0 {
			continue
		}
		r, err := s.Run(ctx, "prj_"+id(i), "flw_"+id(i), id(i))
		if err != nil || r.ID != id(i) || string(r.Trigger.Body) != `{"id":"`+id(i)+`"}` || !r.Created.Equal(created) {
			t.Errorf("run %s = %+v, %v", id(i), r, err)
		}
	}
	var runs, entries int
	if err := s.r.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM run_queue)`).Scan(&runs, &entries); err != nil {
		t.Fatal(err)
	}
	want := 1 + n - n/3 - 1 // run_old, the new runs, run_twice once
	if runs != want || entries != want {
		t.Errorf("%d runs and %d queue entries, want %d of each", runs, entries, want)
	}
}

// TestFinishBatchLean holds the writer while 30 finishes of claimed runs
// queue up, so that they share a batch of lean writes: a third hold a
// stale lease token, a third finish a run already finished. Those are
// told why (RunLeaseLost, RunFinished) and change nothing; the rest are
// finished with their queue entries removed.
func TestFinishBatchLean(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t, "finish.db")
	const n = 30
	created := time.Now().UTC().Truncate(time.Millisecond)
	for i := range n {
		r := automation.Run{ID: fmt.Sprintf("run_%02d", i), Project: "prj_x", FlowID: "flw_x", Status: automation.RunRunning,
			Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}, Steps: []automation.StepResult{}, Created: created}
		if err := s.Enqueue(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	es, err := s.ClaimDueBatch(ctx, time.Now(), time.Minute, 64)
	if err != nil || len(es) != n {
		t.Fatalf("claimed %d, %v; want %d", len(es), err, n)
	}
	tokens := map[string]bool{}
	for _, e := range es {
		if e.Run == nil || e.Run.LeaseToken == "" || tokens[e.Run.LeaseToken] || e.Claims != 1 || e.Run.Attempts != 1 {
			t.Fatalf("claimed entry %+v, run %+v: want its run with a token of its own, attempt 1", e, e.Run)
		}
		tokens[e.Run.LeaseToken] = true
	}
	finished := func(e automation.QueueEntry) automation.Run {
		r := *e.Run
		fin := time.Now().UTC().Truncate(time.Millisecond)
		r.Status, r.Finished = automation.RunSucceeded, &fin
		return r
	}
	for i, e := range es {
		if i%3 == 2 { // finished before the batch
			if err := s.FinishRun(ctx, finished(e)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var batches []int
	var mu sync.Mutex
	s.batchHook = func(n int) { mu.Lock(); batches = append(batches, n); mu.Unlock() }
	unblock := holdWriter(t, s, func(*sql.Tx) error { return nil })
	errs := make([]error, n)
	var wg, queued sync.WaitGroup
	queued.Add(n)
	for i, e := range es {
		wg.Go(func() {
			queued.Done()
			r := finished(e)
			r.Error = "second"
			if i%3 == 1 {
				r.LeaseToken = "lease_stale"
			}
			errs[i] = s.FinishRun(ctx, r)
		})
	}
	queued.Wait()
	unblock()
	wg.Wait()
	mu.Lock()
	t.Logf("batches: %v", batches)
	mu.Unlock()
	for i, e := range es {
		var status, doc string
		var queued int
		if err := s.r.QueryRowContext(ctx, `SELECT status, doc, (SELECT count(*) FROM run_queue WHERE run = runs.id) FROM runs WHERE id = ?`, e.RunID).
			Scan(&status, &doc, &queued); err != nil {
			t.Fatal(err)
		}
		var got automation.Run
		if err := json.Unmarshal([]byte(doc), &got); err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 0:
			if errs[i] != nil || status != "SUCCEEDED" || got.Error != "second" || queued != 0 {
				t.Errorf("%s: err %v, status %s, error %q, queued %d; want finished", e.RunID, errs[i], status, got.Error, queued)
			}
		case 1:
			if !automation.IsRunLeaseLost(errs[i]) ||
				status != "RUNNING" || got.Error != "" || queued != 1 {
				t.Errorf("%s: err %v, status %s, error %q, queued %d; want the lease lost and nothing changed", e.RunID, errs[i], status, got.Error, queued)
			}
		case 2:
			if !automation.IsRunFinished(errs[i]) || status != "SUCCEEDED" || got.Error != "" || queued != 0 {
				t.Errorf("%s: err %v, status %s, error %q, queued %d; want already finished and nothing changed", e.RunID, errs[i], status, got.Error, queued)
			}
		}
	}
}

// holdWriter keeps the store's writer busy with a write that runs last
// once unblocked, so that the writes queued meanwhile are batched together;
// unblock lets it go and checks that it committed.
func holdWriter(t *testing.T, s *Store, last func(*sql.Tx) error) (unblock func()) {
	t.Helper()
	release, held, blocker := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		blocker <- s.write(context.Background(), "blocker", func(tx *sql.Tx) error {
			close(held)
			<-release
			return last(tx)
		})
	}()
	<-held
	return func() {
		t.Helper()
		close(release)
		if err := <-blocker; err != nil {
			t.Fatalf("blocker: %v", err)
		}
	}
}

// openCountingBatches opens a store in a temporary directory that records
// the size of its largest batch.
func openCountingBatches(t *testing.T, name string) (*Store, *atomic.Int64) {
	t.Helper()
	s := openTemp(t, name)
	largest := new(atomic.Int64)
	s.batchHook = func(n int) {
		for m := largest.Load(); int64(n) > m && !largest.CompareAndSwap(m, int64(n)); m = largest.Load() {
		}
	}
	return s, largest
}

// openTemp opens a store in a temporary directory, closed when the test ends.
func openTemp(t *testing.T, name string) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
