package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"flowservice/pkg/automation"
)

// schemaWaitpoints is sqlitestore's: what APPROVAL steps and WAIT for a callback wait for
// (automation/waitpoint.go), one row per run and step. The token is kept
// only as its hash, unique; a decided or expired row keeps no live token
// for a callback, and the decision page reads it by hash. created_ms
// orders the approvals inbox.
const schemaWaitpoints = `
CREATE TABLE waitpoints (
	run        TEXT NOT NULL,
	step       TEXT NOT NULL,
	project    TEXT NOT NULL,
	kind       TEXT NOT NULL,
	status     TEXT NOT NULL,
	token_hash TEXT,
	created_ms BIGINT NOT NULL,
	seq        BIGINT NOT NULL,
	doc        TEXT NOT NULL,
	PRIMARY KEY (run, step)
);
CREATE UNIQUE INDEX waitpoints_token ON waitpoints (token_hash) WHERE token_hash IS NOT NULL;
CREATE INDEX waitpoints_inbox ON waitpoints (project, kind, status, seq);
`

var _ automation.WaitpointStore = (*Store)(nil)

// UpdateWaitpoint reads, changes and writes a waitpoint in one write
// transaction (writes take the store's write lock, so change runs once
// across nodes). A change that
// decides makes the run's queue entry due now in the same transaction,
// and marks it woken when an attempt holds it, so that the Retry that
// parks it keeps it due (callwake.go): the decision and the resume are
// one commit.
func (s *Store) UpdateWaitpoint(ctx context.Context, project, runID, step string,
	change func(w *automation.Waitpoint, found bool) (bool, error)) (automation.Waitpoint, error) {
	var out automation.Waitpoint
	err := s.write(ctx, "update waitpoint "+runID, func(tx *txn) error {
		var (
			w     automation.Waitpoint
			found bool
		)
		var doc, proj string
		var hash sql.NullString
		var seq int64
		err := tx.QueryRowContext(ctx, `SELECT project, doc, token_hash, seq FROM waitpoints WHERE run = ? AND step = ?`, runID, step).
			Scan(&proj, &doc, &hash, &seq)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case proj != project:
			// Another project's: as none, and it may not be written.
			return automation.NotFound("approval", runID+"/"+step)
		default:
			if err := json.Unmarshal([]byte(doc), &w); err != nil {
				return fmt.Errorf("pgstore: waitpoint %s/%s: %w", runID, step, err)
			}
			w.TokenHash, found = hash.String, true
		}
		var before *automation.Waitpoint
		if found {
			// change may replace its slices; the Outbox compares states.
			b := w
			b.Decisions = slices.Clone(w.Decisions)
			before = &b
		}
		wake, err := change(&w, found)
		if err != nil {
			return err
		}
		w.Project, w.RunID, w.Step = project, runID, step
		b, err := json.Marshal(w)
		if err != nil {
			return fmt.Errorf("pgstore: encode waitpoint: %w", err)
		}
		var tok any
		if w.TokenHash != "" {
			tok = w.TokenHash
		}
		if !found {
			if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(seq), 0) + 1 FROM waitpoints`).Scan(&seq); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO waitpoints (run, step, project, kind, status, token_hash, created_ms, seq, doc)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (run, step) DO UPDATE SET status = excluded.status, token_hash = excluded.token_hash, doc = excluded.doc`,
			runID, step, project, string(w.Kind), w.Status, tok, w.Created.UnixMilli(), seq, string(b)); err != nil {
			if isUnique(err) {
				// The port's contract: a hash held by another waitpoint.
				return fmt.Errorf("waitpoint token held by another waitpoint: %w", automation.ErrConflict)
			}
			return err
		}
		if wake {
			now := w.Created.UnixMilli()
			if n := len(w.Decisions); n > 0 {
				now = w.Decisions[n-1].At.UnixMilli()
			} else if w.Callback != nil {
				now = w.Callback.ReceivedAt.UnixMilli()
			}
			if _, err := tx.ExecContext(ctx, `UPDATE run_queue SET due_ms = LEAST(due_ms, ?),
				woken = (woken OR (lease_until IS NOT NULL AND lease_until > ?)) WHERE run = ?`, now, now, runID); err != nil {
				return err
			}
		}
		if err := s.outboxWaitpoint(ctx, tx, before, w); err != nil {
			return err
		}
		w.Link = ""
		out = w
		return nil
	})
	return out, err
}

// outboxWaitpoint writes, in the waitpoint write's transaction tx, the
// event the Outbox decides for it (an approval requested or decided).
func (s *Store) outboxWaitpoint(ctx context.Context, tx *txn, before *automation.Waitpoint, after automation.Waitpoint) error {
	o := s.alerts.outbox.Load()
	if o == nil || after.Kind != automation.WaitApproval {
		return nil
	}
	subs, err := s.projectSubscriptions(ctx, after.Project)
	if err != nil {
		return err
	}
	out, err := o.WaitpointChanged(before, after, subs)
	if err != nil {
		return err
	}
	return s.insertEvent(ctx, tx, out.Event, out.Deliveries)
}

// Waitpoint reads one waitpoint of the project.
func (s *Store) Waitpoint(ctx context.Context, project, runID, step string) (automation.Waitpoint, error) {
	return s.scanWaitpoint(s.readRow(ctx, `SELECT doc, token_hash FROM waitpoints WHERE run = ? AND step = ? AND project = ?`,
		runID, step, project), runID+"/"+step)
}

// WaitpointByToken finds the waitpoint whose token hashes to tokenHash.
func (s *Store) WaitpointByToken(ctx context.Context, tokenHash string) (automation.Waitpoint, error) {
	return s.scanWaitpoint(s.readRow(ctx, `SELECT doc, token_hash FROM waitpoints WHERE token_hash = ?`, tokenHash), "")
}

func (s *Store) scanWaitpoint(row rowScanner, id string) (automation.Waitpoint, error) {
	var (
		w    automation.Waitpoint
		doc  string
		hash sql.NullString
	)
	err := row.Scan(&doc, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return w, automation.NotFound("approval", id)
	} else if err != nil {
		return w, fmt.Errorf("pgstore: read waitpoint: %w", err)
	}
	if err := json.Unmarshal([]byte(doc), &w); err != nil {
		return w, fmt.Errorf("pgstore: decode waitpoint: %w", err)
	}
	w.TokenHash = hash.String
	return w, nil
}

// ListWaitpoints pages through a project's approvals, newest first.
func (s *Store) ListWaitpoints(ctx context.Context, project string, q automation.ListQuery) (automation.Page[automation.Waitpoint], error) {
	var page automation.Page[automation.Waitpoint]
	after := int64(1) << 62
	if q.After != "" {
		n, err := strconv.ParseInt(q.After, 10, 64)
		if err != nil {
			return page, automation.InvalidCode("INVALID_CURSOR", "cursor is not valid")
		}
		after = n
	}
	rows, err := s.query(ctx, `SELECT seq, doc FROM waitpoints WHERE project = ? AND kind = 'APPROVAL' AND status = ? AND seq < ?
		ORDER BY seq DESC LIMIT ?`, project, q.Status, after, q.Limit+1)
	if err != nil {
		return page, fmt.Errorf("pgstore: list waitpoints: %w", err)
	}
	defer rows.Close()
	page.Items = []automation.Waitpoint{}
	var last int64
	for rows.Next() {
		var (
			seq int64
			doc string
			w   automation.Waitpoint
		)
		if err := rows.Scan(&seq, &doc); err != nil {
			return page, fmt.Errorf("pgstore: list waitpoints: %w", err)
		}
		if len(page.Items) == q.Limit {
			page.Next = strconv.FormatInt(last, 10)
			break
		}
		if err := json.Unmarshal([]byte(doc), &w); err != nil {
			return page, fmt.Errorf("pgstore: decode waitpoint: %w", err)
		}
		page.Items = append(page.Items, w)
		last = seq
	}
	return page, rows.Err()
}
