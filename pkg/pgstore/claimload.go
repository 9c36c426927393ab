package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"flowservice/pkg/automation"
)

// claimLimits bound what ClaimDueBatch loads into memory: run documents
// of a webhook body of 10 MiB are that large, and 64 of them loaded by one
// claim at start-up ran flowd out of memory before any attempt was
// recorded, every start again (docs/reliability.md, "Claims").
type claimLimits struct {
	// batchBytes bounds the documents of one batch together (at least one
	// run is claimed, whatever its size).
	batchBytes int64
	// inlineBytes is the largest document read inside the claim's write;
	// larger ones are read after it commits, one at a time, so that a
	// process that dies reading one has counted the attempt already.
	inlineBytes int64
	// maxLoad is the largest document a claim loads at all: a larger run
	// is ended FAILED at once, with an error that says so.
	maxLoad int64
}

// Defaults of claimLimits.
const (
	DefaultClaimBatchBytes = 32 << 20
	DefaultMaxRunLoadBytes = 64 << 20
	claimInlineBytes       = 1 << 20
)

func (l claimLimits) withDefaults() claimLimits {
	if l.batchBytes <= 0 {
		l.batchBytes = DefaultClaimBatchBytes
	}
	if l.maxLoad <= 0 {
		l.maxLoad = DefaultMaxRunLoadBytes
	}
	if l.inlineBytes <= 0 {
		l.inlineBytes = min(claimInlineBytes, l.maxLoad)
	}
	return l
}

// ClaimLimits sets the bytes of run documents one batch claim loads
// together (default DefaultClaimBatchBytes) and the largest document a
// claim loads at all (default DefaultMaxRunLoadBytes); zero keeps a default.
func ClaimLimits(batchBytes, maxLoad int64) Option {
	return func(o *options) { o.claim.batchBytes, o.claim.maxLoad = batchBytes, maxLoad }
}

// tooLargeMessage is the error of a run whose document is too large to load.
const tooLargeMessage = "the run's stored record is %d bytes, over the %d bytes a run may take to load; " +
	"it was ended without running, and its trigger and step results were dropped"

// loadClaimed reads and decodes the document of a run a batch claim took
// without it (larger than inlineBytes), or ends the run FAILED when it is
// over maxLoad. It returns nil when there is no run to hand over.
func (s *Store) loadClaimed(ctx context.Context, c *claimedRun) *automation.Run {
	if c.size > s.claim.maxLoad {
		// A failed write leaves the claim to expire, and the next claim
		// tries again.
		_ = s.failTooLarge(ctx, c)
		return nil // ExecuteRun's own claim finds it final
	}
	if !c.doc.Valid {
		if err := s.readRow(ctx, `SELECT doc FROM runs WHERE id = ?`, c.id).Scan(&c.doc); err != nil {
			return nil // as for a document that does not decode
		}
	}
	r, _, err := scanRun(claimedRow{c})
	if err == nil && c.journal > 0 {
		// Its entries are the claimed attempt's to extend: no other
		// write adds to them while the claim holds.
		err = foldJournal(ctx, s.r, &r)
	}
	c.doc = sql.NullString{} // the Run holds what it needs
	if err != nil {
		// A document that does not decode: no run to hand over. The
		// worker's ExecuteRun finds it held and looks again after the
		// lease, as for any run whose claim it did not get.
		return nil
	}
	// attempts counts this claim; ended the attempts that ended, so the
	// rest died with their process.
	r.Interrupted, r.LeaseToken = c.attempts-1-c.ended, c.token
	return &r
}

// failTooLarge ends claimed run c FAILED without reading its document: a
// small one takes its place, with the run's identity, times and the error,
// and the flow's stats count it as FinishRun would.
func (s *Store) failTooLarge(ctx context.Context, c *claimedRun) error {
	now := time.Now().UTC()
	r := automation.Run{ID: c.id, FlowID: c.flow, Project: c.project, Created: time.UnixMilli(c.createdMs).UTC(),
		Status: automation.RunFailed, Error: fmt.Sprintf(tooLargeMessage, c.size, s.claim.maxLoad),
		Started: &now, Finished: &now, Steps: []automation.StepResult{}, Attempts: c.attempts}
	doc, sum, err := encodeRunAndSummary(r)
	if err != nil {
		return err
	}
	return s.write(ctx, "fail run too large "+c.id, func(tx *txn) error {
		res, err := s.exec(ctx, tx, `UPDATE runs SET status = 'FAILED', doc = ?, summary = ?, lease_until = NULL, ended = ended + 1
			WHERE id = ? AND status = 'RUNNING' AND lease_token IS NOT DISTINCT FROM ?::text`, doc, sum, c.id, c.token)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // no longer this claim's
		}
		if err := s.dropJournal(ctx, tx, c.id); err != nil {
			return err
		}
		var last sql.NullString
		err = s.queryRow(ctx, tx, `SELECT last_run FROM flows WHERE project = ? AND id = ?`, r.Project, r.FlowID).Scan(&last)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		} else if err != nil {
			return err
		}
		return s.addFinishedToFlow(ctx, tx, r, last)
	})
}
