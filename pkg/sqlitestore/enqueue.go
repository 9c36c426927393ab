package sqlitestore

import (
	"context"
	"database/sql"
	"strings"

	"flowservice/pkg/automation"
)

// newRun is what Enqueue stores for one run: the runs row and its queue
// entry.
type newRun struct {
	id, project, flow, status string
	createdMs                 int64
	doc, summary              string
}

const (
	insertRunsHead = `INSERT INTO runs (id, project, flow, status, attempts, created_ms, doc, summary) VALUES `
	insertRunsRow  = `(?, ?, ?, ?, 0, ?, ?, ?)`
	insertRunsTail = ` ON CONFLICT (id) DO NOTHING RETURNING id`
	insertQueueRow = `(?, ?, ?)`
	insertQueue    = `INSERT INTO run_queue (run, project, due_ms) VALUES `
)

// enqueueChunks are the row counts of the multi-row statements that insert
// a batch's runs: a batch of n runs takes the largest that fit, so that a
// few statement shapes, each prepared once, serve every batch size.
var enqueueChunks = []int{64, 16, 4, 1}

// insertRunsSQL and insertQueueSQL are the statements by row count.
var insertRunsSQL, insertQueueSQL = func() (map[int]string, map[int]string) {
	runs, queue := map[int]string{}, map[int]string{}
	for _, n := range enqueueChunks {
		runs[n] = insertRunsHead + strings.Repeat(insertRunsRow+", ", n-1) + insertRunsRow + insertRunsTail
		queue[n] = insertQueue + strings.Repeat(insertQueueRow+", ", n-1) + insertQueueRow
	}
	return runs, queue
}()

// enqueueAll inserts the runs and queue entries of every enqueue in a
// batch with a few multi-row statements, instead of two statements per
// run: most of a lone insert's cost is the statement around it (opening a
// cursor on the table and each index, the AUTOINCREMENT counter, the
// driver's round trip), which a multi-row insert pays once. A run whose ID
// exists already, or comes twice in the batch, is RunExists for the
// caller, as in a lone Enqueue. An error means the statements may have
// changed part of what they meant to: the caller rolls back the batch.
func (s *Store) enqueueAll(ctx context.Context, tx *sql.Tx, reqs []*writeReq) error {
	inserted := make(map[string]bool, len(reqs))
	for rest := reqs; len(rest) > 0; {
		n := chunk(len(rest))
		args := make([]any, 0, 7*n)
		for _, req := range rest[:n] {
			r := req.run
			args = append(args, r.id, r.project, r.flow, r.status, r.createdMs, r.doc, r.summary)
		}
		if err := s.insertReturning(ctx, tx, insertRunsSQL[n], args, inserted); err != nil {
			return err
		}
		rest = rest[n:]
	}
	// Each inserted ID goes to the first request that asked for it; the
	// queue entries are those of the runs inserted.
	fresh := make([]*writeReq, 0, len(reqs))
	for _, req := range reqs {
		if inserted[req.run.id] {
			inserted[req.run.id] = false
			fresh = append(fresh, req)
			continue
		}
		req.err = wrapWriteErr(req.op, "", automation.RunExists(req.run.id))
	}
	for rest := fresh; len(rest) > 0; {
		n := chunk(len(rest))
		args := make([]any, 0, 3*n)
		for _, req := range rest[:n] {
			args = append(args, req.run.id, req.run.project, req.run.createdMs)
		}
		if _, err := s.exec(ctx, tx, insertQueueSQL[n], args...); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// chunk is the largest statement size of enqueueChunks that n rows fill.
func chunk(n int) int {
	for _, c := range enqueueChunks {
		if n >= c {
			return c
		}
	}
	return 1
}

// insertReturning runs an insert with RETURNING id and marks the IDs it
// returns in ids.
func (s *Store) insertReturning(ctx context.Context, tx *sql.Tx, query string, args []any, ids map[string]bool) error {
	rows, err := s.queryTx(ctx, tx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids[id] = true
	}
	return rows.Err()
}
