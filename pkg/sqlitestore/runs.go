package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

var (
	_ automation.RunStore  = (*Store)(nil)
	_ automation.RunQueue  = (*Store)(nil)
	_ automation.WorkQueue = (*Store)(nil)
)

// Enqueue stores a new run and its queue entry in one transaction: once it
// commits, a crash loses neither. It is a lean write (no savepoint): a
// run that exists already is found before any change, and any statement
// error makes the writer run the batch again with savepoints. The writer
// inserts the runs of all the enqueues of a batch together (enqueueAll);
// fn is for an enqueue alone in its batch and for that rerun.
func (s *Store) Enqueue(ctx context.Context, r automation.Run) error {
	doc, sum, err := encodeRunAndSummary(r)
	if err != nil {
		return fmt.Errorf("sqlitestore: enqueue run %s: %w", r.ID, err)
	}
	row := &newRun{id: r.ID, project: r.Project, flow: r.FlowID, status: string(r.Status), createdMs: r.Created.UnixMilli(), doc: doc, summary: sum}
	return s.send(&writeReq{ctx: ctx, op: "enqueue run " + r.ID, done: make(chan error, 1), lean: true, run: row, fn: func(tx *sql.Tx) error {
		if err := s.insertRun(ctx, tx, r.ID,
			`INSERT INTO runs (id, project, flow, status, attempts, created_ms, doc, summary) VALUES (?, ?, ?, ?, 0, ?, ?, ?)
			 ON CONFLICT (id) DO NOTHING`,
			r.ID, r.Project, r.FlowID, string(r.Status), r.Created.UnixMilli(), doc, sum); err != nil {
			return err
		}
		_, err := s.exec(ctx, tx,
			`INSERT INTO run_queue (run, project, due_ms) VALUES (?, ?, ?)`,
			r.ID, r.Project, r.Created.UnixMilli())
		return err
	}})
}

// insertRun runs an INSERT … ON CONFLICT (id) DO NOTHING of run id's
// row: a run that exists already is RunExists, refused before any change
// (unchanged), so that the writes it shares a lean batch with stay.
func (s *Store) insertRun(ctx context.Context, tx *sql.Tx, id, query string, args ...any) error {
	res, err := s.exec(ctx, tx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return unchanged(automation.RunExists(id))
	}
	return nil
}

var _ automation.InlineQueue = (*Store)(nil)

// EnqueueClaimed stores a new run claimed for its receiver's inline attempt
// and its queue entry, in one lean transaction (automation.InlineQueue): the
// run's lease and the entry's are the same, so ClaimDue passes over the
// entry until the lease runs out, and ReleaseLeases at a restart frees both.
func (s *Store) EnqueueClaimed(ctx context.Context, r automation.Run, now time.Time, lease time.Duration) (automation.Run, error) {
	r.Attempts, r.Interrupted, r.LeaseToken = 0, 0, ""
	doc, sum, err := encodeRunAndSummary(r)
	if err != nil {
		return r, fmt.Errorf("sqlitestore: enqueue claimed run %s: %w", r.ID, err)
	}
	token := automation.NewID("lease_")
	until := now.Add(lease).UnixMilli()
	err = s.writeLean(ctx, "enqueue claimed run "+r.ID, func(tx *sql.Tx) error {
		if err := s.insertRun(ctx, tx, r.ID,
			`INSERT INTO runs (id, project, flow, status, attempts, lease_until, lease_token, created_ms, doc, summary)
			 VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.Project, r.FlowID, string(r.Status), until, token, r.Created.UnixMilli(), doc, sum); err != nil {
			return err
		}
		_, err := s.exec(ctx, tx,
			`INSERT INTO run_queue (run, project, due_ms, lease_until, attempts) VALUES (?, ?, ?, ?, 1)`,
			r.ID, r.Project, r.Created.UnixMilli(), until)
		return err
	})
	if err != nil {
		return automation.Run{}, err
	}
	r.Attempts, r.LeaseToken = 1, token
	return r, nil
}

const runColumns = `seq, project, attempts, doc`

// Run returns a run of a project's flow.
func (s *Store) Run(ctx context.Context, project, flowID, id string) (automation.Run, error) {
	r, _, err := scanRun(s.readRow(ctx,
		`SELECT `+runColumns+` FROM runs WHERE project = ? AND flow = ? AND id = ?`, project, flowID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return automation.Run{}, automation.NotFound("run", id)
	} else if err != nil {
		return automation.Run{}, fmt.Errorf("sqlitestore: get run %s: %w", id, err)
	}
	if r.Status == automation.RunRunning {
		// Only a run an attempt may still journal has entries.
		if err := foldJournal(ctx, s.r, &r); err != nil {
			return automation.Run{}, fmt.Errorf("sqlitestore: get run %s: %w", id, err)
		}
	}
	return r, nil
}

// summaryDoc is a run's document as lists read it when the row has no
// summary column yet (written before schemaRunSummary): SQLite drops the
// trigger body, the step outputs and the response body before the row
// reaches Go, so that a list of large runs costs little memory. (A run
// stored without steps has "steps": null, which json_each walks as one
// value: only objects are steps.)
const summaryDoc = `json_set(json_remove(doc, '$.trigger.body', '$.trigger.rawBody', '$.response.body', '$.onErrorSteps'), '$.steps',
	json(COALESCE((SELECT json_group_array(json(json_remove(value, '$.output', '$.steps', '$.iterations'))) FROM json_each(doc, '$.steps') WHERE type = 'object'), '[]')))`

// summaryColumns are what a page of run summaries reads of each row: the
// summary column, or for an old row its document cut down, and whether
// it was the latter (see decodeSummary).
const summaryColumns = `seq, created_ms, project, attempts, COALESCE(summary, ` + summaryDoc + `), summary IS NULL`

// The run list queries walk an index backwards: newest first.
const (
	listRunsSQL = `SELECT ` + summaryColumns + ` FROM runs
		WHERE project = ? AND flow = ? AND seq < ? ORDER BY seq DESC LIMIT ?`
	listRunsByStatusSQL = `SELECT ` + summaryColumns + ` FROM runs
		WHERE project = ? AND flow = ? AND status = ? AND seq < ? ORDER BY seq DESC LIMIT ?`
)

// ListRuns returns the page of a flow's run summaries before q.After,
// newest first, reading at most q.Limit+1 rows of an index and ending the
// page early at automation.RunPageBudget bytes.
func (s *Store) ListRuns(ctx context.Context, project, flowID string, q automation.ListQuery) (automation.Page[automation.Run], error) {
	limit, query, args, err := listRunsQuery(project, flowID, q)
	if err != nil {
		return automation.Page[automation.Run]{}, err
	}
	return summaryPage(ctx, s, limit, false, summaryRun, query, args...)
}

// listRunsQuery is the page size, query and arguments of a ListRuns.
func listRunsQuery(project, flowID string, q automation.ListQuery) (limit int, query string, args []any, err error) {
	before, err := positionBefore(q.After)
	if err != nil {
		return 0, "", nil, err
	}
	limit = max(q.Limit, 1)
	query, args = listRunsSQL, []any{project, flowID, before, limit + 1}
	if q.Status != "" {
		query, args = listRunsByStatusSQL, []any{project, flowID, q.Status, before, limit + 1}
	}
	return limit, query, args, nil
}

// positionBefore is the run sequence a page newest first starts below:
// after's, or past every run when after is "".
func positionBefore(after string) (int64, error) {
	if after == "" {
		return math.MaxInt64, nil
	}
	return parsePosition(after)
}

// summaryPage reads a page of run summaries with query (which selects
// summaryColumns and reads limit+1 rows newest first), each made an item
// by item (summaryRun, or summaryJSON), ending it early at
// automation.RunPageBudget bytes. The next page's position is the last
// run's seq, or with byCreated its creation time and seq (windowPosition).
func summaryPage[T any](ctx context.Context, s *Store, limit int, byCreated bool,
	item func(*summaryRow) (T, int, error), query string, args ...any) (automation.Page[T], error) {
	var page automation.Page[T]
	rows, err := s.query(ctx, query, args...)
	if err != nil {
		return page, fmt.Errorf("sqlitestore: list runs: %w", err)
	}
	defer rows.Close()
	var row summaryRow
	dest := row.dest()
	bytes := 0
	for rows.Next() {
		if len(page.Items) == limit || (len(page.Items) > 0 && bytes >= automation.RunPageBudget) {
			page.Next = strconv.FormatInt(row.seq, 10)
			if byCreated {
				page.Next = windowPosition(row.created, row.seq)
			}
			break
		}
		if err := rows.Scan(dest...); err != nil {
			return page, fmt.Errorf("sqlitestore: list runs: %w", err)
		}
		it, size, err := item(&row)
		if err != nil {
			return page, fmt.Errorf("sqlitestore: list runs: %w", err)
		}
		page.Items = append(page.Items, it)
		bytes += size
	}
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("sqlitestore: list runs: %w", err)
	}
	return page, nil
}

// summaryRow is a row of summaryColumns. One is scanned into for every
// row of a page: fresh variables for each row were a few allocations a
// row. doc is a new slice each row (database/sql copies into a []byte),
// so an item may keep it.
type summaryRow struct {
	seq, created int64
	project      string
	attempts     int
	doc          []byte
	old          bool
}

func (r *summaryRow) dest() []any {
	return []any{&r.seq, &r.created, &r.project, &r.attempts, &r.doc, &r.old}
}

// summaryRun is the run of a row of summaryColumns and its size as JSON,
// for the page's byte budget.
func summaryRun(r *summaryRow) (automation.Run, int, error) {
	return decodeSummary(r.doc, r.project, r.attempts, r.old)
}

// decodeSummary is the run of a row's summary (or for an old row its
// cut-down document) and its size as JSON. A summary column is the JSON
// of Run.Summary already, so its length is the size (but for the digits
// of attempts, which the column holds as of the last write of the
// document); an old row's cut-down document is made a summary and
// measured in Go, as before the column.
func decodeSummary(doc []byte, project string, attempts int, old bool) (automation.Run, int, error) {
	var r automation.Run
	if err := json.Unmarshal(doc, &r); err != nil {
		return r, 0, fmt.Errorf("decode run: %w", err)
	}
	r.Project, r.Attempts = project, attempts
	// Summary again: it also makes the JSON nulls of the bodies nil.
	r = r.Summary()
	if old {
		return r, automation.SummaryBytes(r), nil
	}
	return r, len(doc), nil
}

// SearchRuns pages through a project's run summaries newest first, on the
// index that fits the filters (by flow or project, with status or not).
// A search with a creation window walks the creation index instead (see
// searchSQL).
func (s *Store) SearchRuns(ctx context.Context, project string, q automation.RunQuery) (automation.Page[automation.Run], error) {
	query, args, byCreated, err := searchSQL(project, q)
	if err != nil {
		return automation.Page[automation.Run]{}, err
	}
	return summaryPage(ctx, s, max(q.Limit, 1), byCreated, summaryRun, query, args...)
}

// searchSQL is the query of a run search and its arguments. A search with
// a creation window is newest first by creation time (then seq), walking
// the creation index from the window's end (byCreated), so that a page
// costs the runs it passes inside the window, not the runs after it nor,
// on a window's last page, every run before it: filtering a walk of a seq
// index on the window, a minute's window in the middle of a million runs
// read half a million rows. Its positions carry the creation time and
// the seq (windowPosition). The window's runs of other projects, flows or
// statuses are read and passed over.
func searchSQL(project string, q automation.RunQuery) (query string, args []any, byCreated bool, err error) {
	limit := max(q.Limit, 1)
	var where []string
	filters := func() {
		where, args = append(where, "project = ?"), append(args, project)
		if q.FlowID != "" {
			where, args = append(where, "flow = ?"), append(args, q.FlowID)
		}
		if q.Status != "" {
			where, args = append(where, "status = ?"), append(args, q.Status)
		}
	}
	if q.Since.IsZero() && q.Until.IsZero() {
		before, err := positionBefore(q.After)
		if err != nil {
			return "", nil, false, err
		}
		filters()
		where, args = append(where, "seq < ?"), append(args, before, limit+1)
		return `SELECT ` + summaryColumns + ` FROM runs WHERE ` +
			strings.Join(where, " AND ") + ` ORDER BY seq DESC LIMIT ?`, args, false, nil
	}
	if !q.Since.IsZero() {
		where, args = append(where, "created_ms >= ?"), append(args, q.Since.UnixMilli())
	}
	if !q.Until.IsZero() {
		where, args = append(where, "created_ms < ?"), append(args, q.Until.UnixMilli())
	}
	if q.After != "" {
		created, seq, err := parseWindowPosition(q.After)
		if err != nil {
			return "", nil, false, err
		}
		where = append(where, "created_ms <= ?", "(created_ms < ? OR seq < ?)")
		args = append(args, created, created, seq)
	}
	filters()
	return `SELECT ` + summaryColumns + ` FROM runs INDEXED BY runs_created WHERE ` +
		strings.Join(where, " AND ") + ` ORDER BY created_ms DESC, seq DESC LIMIT ?`, append(args, limit+1), true, nil
}

// windowPosition is the position of a window search after the run created
// at created (milliseconds) with sequence seq.
func windowPosition(created, seq int64) string {
	return strconv.FormatInt(created, 10) + "." + strconv.FormatInt(seq, 10)
}

func parseWindowPosition(after string) (created, seq int64, err error) {
	c, q, ok := strings.Cut(after, ".")
	if ok {
		created, err = strconv.ParseInt(c, 10, 64)
		if err == nil {
			seq, err = parsePosition(q)
		}
	}
	if !ok || err != nil {
		return 0, 0, automation.InvalidCode("INVALID_CURSOR", "list position %q is not valid", after)
	}
	return created, seq, nil
}

// ClaimRun takes a RUNNING run for one attempt (see automation.RunStore).
func (s *Store) ClaimRun(ctx context.Context, project, id string, now time.Time, lease time.Duration) (automation.Run, error) {
	var r automation.Run
	err := s.write(ctx, "claim run "+id, func(tx *sql.Tx) (err error) {
		r, err = s.claimRun(ctx, tx, project, id, now, lease)
		return err
	})
	return r, err
}

// claimRun is ClaimRun inside a write: it changes nothing unless it claims.
func (s *Store) claimRun(ctx context.Context, tx *sql.Tx, project, id string, now time.Time, lease time.Duration) (automation.Run, error) {
	var (
		r               automation.Run
		status          string
		until           sql.NullInt64
		attempts, ended int
	)
	err := s.queryRow(ctx, tx,
		`SELECT status, lease_until, attempts, ended FROM runs WHERE project = ? AND id = ?`, project, id).
		Scan(&status, &until, &attempts, &ended)
	if errors.Is(err, sql.ErrNoRows) {
		return r, automation.NotFound("run", id)
	} else if err != nil {
		return r, err
	}
	if automation.RunStatus(status).Final() {
		return r, automation.RunFinished(id, automation.RunStatus(status))
	}
	if until.Valid && until.Int64 > now.UnixMilli() {
		return r, automation.RunClaimed(id)
	}
	token := automation.NewID("lease_")
	if _, err := s.exec(ctx, tx,
		`UPDATE runs SET attempts = attempts + 1, lease_until = ?, lease_token = ? WHERE id = ?`,
		now.Add(lease).UnixMilli(), token, id); err != nil {
		return r, err
	}
	r, _, err = scanRun(s.queryRow(ctx, tx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if err != nil {
		return r, err
	}
	if attempts > 0 {
		// Only an earlier attempt journals: a first claim has no entries.
		if err := foldJournal(ctx, tx, &r); err != nil {
			return r, err
		}
	}
	r.Interrupted, r.LeaseToken = attempts-ended, token
	return r, nil
}

// ReleaseRun records a failed attempt that will be retried, if the attempt
// still holds the run.
func (s *Store) ReleaseRun(ctx context.Context, r automation.Run) error {
	r.Status = automation.RunRunning
	doc, sum, err := encodeRunAndSummary(r)
	if err != nil {
		return fmt.Errorf("sqlitestore: release run %s: %w", r.ID, err)
	}
	return s.writeLean(ctx, "release run "+r.ID, func(tx *sql.Tx) error {
		if err := s.fenced(ctx, tx, r, `UPDATE runs SET doc = ?, summary = ?, lease_until = NULL, ended = ended + 1
			WHERE project = ? AND id = ? AND status = 'RUNNING' AND lease_token IS ?`,
			doc, sum, r.Project, r.ID, r.LeaseToken); err != nil {
			return err
		}
		return s.dropJournal(ctx, tx, r.ID)
	})
}

// RecordSteps journals the steps of a claimed attempt, keeping its claim.
func (s *Store) RecordSteps(ctx context.Context, r automation.Run) error {
	r.Status = automation.RunRunning
	doc, sum, err := encodeRunAndSummary(r)
	if err != nil {
		return fmt.Errorf("sqlitestore: record steps of run %s: %w", r.ID, err)
	}
	return s.writeLean(ctx, "record steps of run "+r.ID, func(tx *sql.Tx) error {
		if err := s.fenced(ctx, tx, r, `UPDATE runs SET doc = ?, summary = ?
			WHERE project = ? AND id = ? AND status = 'RUNNING' AND lease_token IS ?`,
			doc, sum, r.Project, r.ID, r.LeaseToken); err != nil {
			return err
		}
		return s.dropJournal(ctx, tx, r.ID)
	})
}

// fenced runs a conditional write of r's attempt and, when it changed
// nothing, says why: the run is gone, final, or held by another claim. It
// marks that answer unchanged, so that the write functions of a run's
// attempt can be lean (writeLean) as long as fenced is their first change.
func (s *Store) fenced(ctx context.Context, tx *sql.Tx, r automation.Run, query string, args ...any) error {
	res, err := s.exec(ctx, tx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return err
	}
	var status string
	err = s.queryRow(ctx, tx, `SELECT status FROM runs WHERE project = ? AND id = ?`, r.Project, r.ID).Scan(&status)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return unchanged(automation.NotFound("run", r.ID))
	case err != nil:
		return err
	case automation.RunStatus(status).Final():
		return unchanged(automation.RunFinished(r.ID, automation.RunStatus(status)))
	}
	return unchanged(automation.RunLeaseLost(r.ID))
}

// FinishRun writes a run's final state and adds it to its flow's stats in
// the same transaction, so the stats count every finished run exactly once.
// It writes only while the attempt holds the run. The same transaction
// removes the run's queue entry, so that the worker's Ack that follows
// finds nothing to do and costs no commit of its own; a FAILED run keeps
// its entry, which the worker parks when the run gave up after its last
// attempt (automation.OutcomeExhausted) and acknowledges otherwise. It is a
// lean write (no savepoint): its fenced update is its first change.
func (s *Store) FinishRun(ctx context.Context, r automation.Run) error {
	if !r.Status.Final() {
		return fmt.Errorf("sqlitestore: finish run %s: status %q is not final", r.ID, r.Status)
	}
	doc, sum, err := encodeRunAndSummary(r)
	if err != nil {
		return fmt.Errorf("sqlitestore: finish run %s: %w", r.ID, err)
	}
	return s.writeLean(ctx, "finish run "+r.ID, func(tx *sql.Tx) error {
		if err := s.fenced(ctx, tx, r, `UPDATE runs SET status = ?, doc = ?, summary = ?, lease_until = NULL, ended = ended + 1
			WHERE project = ? AND id = ? AND status = 'RUNNING' AND lease_token IS ?`,
			string(r.Status), doc, sum, r.Project, r.ID, r.LeaseToken); err != nil {
			return err
		}
		if r.JournalLen > 0 {
			// Entries are read only while a run is RUNNING: a finish
			// whose attempt journaled none spares the statement.
			if err := s.dropJournal(ctx, tx, r.ID); err != nil {
				return err
			}
		}
		if r.Status != automation.RunFailed {
			if _, err := s.exec(ctx, tx, `DELETE FROM run_queue WHERE run = ?`, r.ID); err != nil {
				return err
			}
		}
		if r.Trigger.Caller != nil {
			if err := s.wakeCaller(ctx, tx, r); err != nil {
				return err
			}
		}
		var last sql.NullString
		err := s.queryRow(ctx, tx, `SELECT last_run FROM flows WHERE project = ? AND id = ?`, r.Project, r.FlowID).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // the flow is gone; so are its stats
		} else if err != nil {
			return err
		}
		return s.addFinishedToFlow(ctx, tx, r, last)
	})
}

// DeleteRunsBefore removes up to limit runs created before t, with their
// queue entries and waitpoints.
func (s *Store) DeleteRunsBefore(ctx context.Context, t time.Time, limit int) (int, error) {
	var n int64
	err := s.write(ctx, "purge runs", func(tx *sql.Tx) error {
		const victims = `SELECT id FROM runs WHERE created_ms < ? ORDER BY created_ms LIMIT ?`
		if _, err := tx.ExecContext(ctx, `DELETE FROM run_queue WHERE run IN (`+victims+`)`, t.UnixMilli(), limit); err != nil {
			return err
		}
		// A run's waitpoints go with it: an approval outlives no run.
		if _, err := tx.ExecContext(ctx, `DELETE FROM waitpoints WHERE run IN (`+victims+`)`, t.UnixMilli(), limit); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM runs WHERE id IN (`+victims+`)`, t.UnixMilli(), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// ClaimDue takes the oldest due queue entry no live lease holds, with its
// run: ClaimDueBatch for one.
func (s *Store) ClaimDue(ctx context.Context, now time.Time, lease time.Duration) (automation.QueueEntry, bool, error) {
	es, err := s.ClaimDueBatch(ctx, now, lease, 1)
	if err != nil || len(es) == 0 {
		return automation.QueueEntry{}, false, err
	}
	return es[0], true, nil
}

// claimedRun is a run row a batch claim took, decoded after the write so
// that the JSON work stays off the single writer.
type claimedRun struct {
	id, flow        string
	seq, createdMs  int64
	project         string
	doc             sql.NullString // read in the claim when at most claimLimits.inlineBytes
	size            int64          // of doc, in bytes
	attempts, ended int
	token           string
	journal         int // entries in its step journal
}

// ClaimDueBatch takes up to max of the oldest due queue entries no live
// lease holds, for the worker pool (pkg/runworker): first in, first out
// among entries due at the same millisecond. In the same transaction it
// claims each entry's run as ClaimRun would (QueueEntry.Run), so that an
// attempt waits for no claim commit of its own and one commit serves the
// whole batch; a run it cannot claim (final, held, gone) is left as it is,
// for ExecuteRun's own claim to find out why. Three statements for the
// whole batch: the query of due entries, their leases, and the runs'
// conditional claims, which return the rows claimed (statements per entry
// cost more in the driver than in SQLite). An entry and its run have the
// same project: they are written together. It is a lean write: it has no answer of its own to roll
// back, only statement errors, on which the writer runs the batch again.
//
// What it loads is bounded (claimLimits): the batch stops before the
// documents of its runs pass claimLimits.batchBytes together (sizes read
// from the row headers, not the documents), small documents come with the
// claim, larger ones are read after the claim has committed, so that an
// attempt is counted before its run is loaded (a process that dies loading
// it has an interrupted attempt, which FLOWD_RUN_MAX_CRASHES counts), and a
// document over claimLimits.maxLoad is not loaded at all: its run ends
// FAILED, saying why.
func (s *Store) ClaimDueBatch(ctx context.Context, now time.Time, lease time.Duration, max int) ([]automation.QueueEntry, error) {
	return s.claimDue(ctx, now, lease, max, nil)
}

func (s *Store) claimDue(ctx context.Context, now time.Time, lease time.Duration, max int, sh *automation.Share) ([]automation.QueueEntry, error) {
	if max < 1 {
		return nil, nil
	}
	query := claimSQL(max)
	if sh != nil {
		query = claimSQL(claimScan) // look past the capped projects' entries
	}
	ms, until := now.UnixMilli(), now.Add(lease).UnixMilli()
	var (
		es   []automation.QueueEntry
		runs []*claimedRun
	)
	err := s.writeLean(ctx, "claim queue entries", func(tx *sql.Tx) error {
		es, runs = es[:0], runs[:0] // a batch run again starts over
		rows, err := s.queryTx(ctx, tx, query, ms, ms)
		if err != nil {
			return err
		}
		var (
			total int64
			taken map[string]int // per project, with sh
		)
		if sh != nil {
			taken = map[string]int{}
		}
		for len(es) < max && rows.Next() {
			var (
				e    automation.QueueEntry
				size int64
			)
			if err := rows.Scan(&e.RunID, &e.Project, &e.Claims, &size); err != nil {
				rows.Close()
				return err
			}
			if sh != nil && sh.Held[e.Project]+taken[e.Project] >= sh.PerProject {
				continue // the project has its share of the workers
			}
			if len(es) > 0 && total+size > s.claim.batchBytes {
				break
			}
			if taken != nil {
				taken[e.Project]++
			}
			total += size
			e.Claims++
			e.Bytes = size
			es = append(es, e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(es) == 0 {
			return nil
		}
		ids := make([]string, len(es))
		for i, e := range es {
			ids[i] = e.RunID
		}
		list, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		if _, err := s.exec(ctx, tx,
			`UPDATE run_queue SET lease_until = ?, attempts = attempts + 1 WHERE run IN (SELECT value FROM json_each(?))`,
			until, list); err != nil {
			return err
		}
		// One token for the batch, made unique to each run by its seq: a
		// token names one claim of one run.
		batch := automation.NewID("lease_") + "."
		claimed, err := s.queryTx(ctx, tx,
			`UPDATE runs SET attempts = attempts + 1, lease_until = ?, lease_token = ? || seq
			 WHERE id IN (SELECT value FROM json_each(?)) AND status = 'RUNNING' AND (lease_until IS NULL OR lease_until <= ?)
			 RETURNING id, seq, project, flow, created_ms, attempts, ended,
			   CASE WHEN octet_length(doc) <= ? THEN doc END, octet_length(doc), lease_token,
			   -- a first claim (attempts = 1 now) has no journal: spare it the look
			   CASE WHEN attempts > 1 THEN COALESCE((SELECT max(seq) FROM run_journal j WHERE j.run = id), 0) ELSE 0 END`,
			until, batch, list, ms, s.claim.inlineBytes)
		if err != nil {
			return err
		}
		byID := make(map[string]*claimedRun, len(es))
		for claimed.Next() {
			c := &claimedRun{}
			if err := claimed.Scan(&c.id, &c.seq, &c.project, &c.flow, &c.createdMs, &c.attempts, &c.ended,
				&c.doc, &c.size, &c.token, &c.journal); err != nil {
				claimed.Close()
				return err
			}
			byID[c.id] = c
		}
		claimed.Close()
		if err := claimed.Err(); err != nil {
			return err
		}
		for _, e := range es {
			// nil: final, held or gone, and ExecuteRun's claim says which.
			runs = append(runs, byID[e.RunID])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, c := range runs {
		if c != nil {
			es[i].Run = s.loadClaimed(ctx, c)
		}
	}
	return es, nil
}

// ClaimDueShared is ClaimDueBatch sharing the batch among projects: an
// entry of a project that holds share.PerProject attempts, counting those
// this batch takes, is left for later, and the query reads up to claimScan
// due entries, so that one project's backlog does not hide another's
// entry behind it.
func (s *Store) ClaimDueShared(ctx context.Context, now time.Time, lease time.Duration, max int, share automation.Share) ([]automation.QueueEntry, error) {
	return s.claimDue(ctx, now, lease, max, &share)
}

// claimScan bounds the due entries a shared claim reads while a project is
// capped: fair among the oldest claimScan due entries (docs/reliability.md).
const claimScan = 4096

var _ automation.SharedWorkQueue = (*Store)(nil)

// claimSQL is ClaimDueBatch's query of due entries for a batch of up to
// max: its LIMIT is the power of two at or above max, written into the
// text, and the caller reads no more than max rows. A LIMIT bound as a
// parameter would make SQLite prepare the statement again each time the
// bound value changed (it plans with the value), which it did on most
// claims, since max is the number of idle workers.
func claimSQL(max int) string {
	limit := 1
	for limit < max {
		limit *= 2
	}
	return `SELECT q.run, q.project, q.attempts, octet_length(r.doc) FROM run_queue q JOIN runs r ON r.id = q.run
			 WHERE q.parked IS NULL AND q.due_ms <= ? AND (q.lease_until IS NULL OR q.lease_until <= ?)
			 ORDER BY q.due_ms, r.seq LIMIT ` + strconv.Itoa(limit)
}

// queryTx is queryRow for a query of many rows, inside a write function.
func (s *Store) queryTx(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	if st := s.stmt(query); st != nil {
		return tx.StmtContext(ctx, st).QueryContext(ctx, args...)
	}
	return tx.QueryContext(ctx, query, args...)
}

// claimedRow scans a claimedRun as scanRun reads runColumns.
type claimedRow struct{ c *claimedRun }

func (r claimedRow) Scan(dest ...any) error {
	*dest[0].(*int64), *dest[1].(*string), *dest[2].(*int), *dest[3].(*string) = r.c.seq, r.c.project, r.c.attempts, r.c.doc.String
	return nil
}

// Ack removes a settled queue entry. The entry of a run that FinishRun
// finished is already gone: a read says so, and no commit is waited for.
func (s *Store) Ack(ctx context.Context, runID string) error {
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM run_queue WHERE run = ?`, runID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	} else if err != nil {
		return fmt.Errorf("sqlitestore: ack run %s: %w", runID, err)
	}
	return s.write(ctx, "ack run "+runID, func(tx *sql.Tx) error {
		_, err := s.exec(ctx, tx, `DELETE FROM run_queue WHERE run = ?`, runID)
		return err
	})
}

// Retry makes a queue entry due again at a later time; an entry that a
// child run woke while it was held stays due when it was woken
// (callwake.go).
func (s *Store) Retry(ctx context.Context, runID string, at time.Time) error {
	return s.write(ctx, "reschedule run "+runID, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`UPDATE run_queue SET due_ms = CASE WHEN woken THEN min(due_ms, ?1) ELSE ?1 END, woken = 0, lease_until = NULL
			 WHERE run = ?2`, at.UnixMilli(), runID)
		return err
	})
}

// Park sets a queue entry aside for good, with the reason.
func (s *Store) Park(ctx context.Context, runID, reason string) error {
	return s.write(ctx, "park run "+runID, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`UPDATE run_queue SET parked = ?, lease_until = NULL WHERE run = ?`, reason, runID)
		return err
	})
}

// QueueStats counts queue entries by state, for tests and diagnostics.
func (s *Store) QueueStats(ctx context.Context) (pending, parked int, err error) {
	err = s.r.QueryRowContext(ctx,
		`SELECT count(*) FILTER (WHERE parked IS NULL), count(*) FILTER (WHERE parked IS NOT NULL) FROM run_queue`).
		Scan(&pending, &parked)
	if err != nil {
		return 0, 0, fmt.Errorf("sqlitestore: queue stats: %w", err)
	}
	return pending, parked, nil
}

// scanRun reads the columns of runColumns into a Run, and its seq.
func scanRun(row rowScanner) (automation.Run, int64, error) {
	var (
		r        automation.Run
		seq      int64
		project  string
		attempts int
		doc      string
	)
	if err := row.Scan(&seq, &project, &attempts, &doc); err != nil {
		return r, 0, err
	}
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		return r, 0, fmt.Errorf("decode run: %w", err)
	}
	r.Project, r.Attempts = project, attempts
	if r.Steps == nil {
		r.Steps = []automation.StepResult{}
	}
	return r, seq, nil
}

// ReleaseLeases drops every lease on runs and queue entries, so that the
// work of a process that died is taken up at once. Only the one process that
// executes runs on this file may call it, at its start (flowd holds a lock
// file for that).
func (s *Store) ReleaseLeases(ctx context.Context) (int, error) {
	var n int64
	err := s.write(ctx, "release leases", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET lease_until = NULL WHERE lease_until IS NOT NULL`); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE run_queue SET lease_until = NULL WHERE lease_until IS NOT NULL`)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}
