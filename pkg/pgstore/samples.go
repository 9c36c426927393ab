package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"flowservice/pkg/automation"
)

var _ automation.SampleStore = (*Store)(nil)

// ArmCapture arms the flow's capture until the given time, creating its row
// on the first arming. The insert selects from flows, so a flow missing from
// the project (or deleted a moment ago) gets no row.
func (s *Store) ArmCapture(ctx context.Context, project, flowID string, until time.Time) error {
	defer s.cache.invalidate() // after the commit: see flowCache.gen
	return s.writeAudited(ctx, "arm capture of flow "+flowID, func(tx *txn) error {
		if err := notifyChange(ctx, tx, "flows"); err != nil { // at the commit: wake.go
			return err
		}
		return execOnFlow(ctx, tx, flowID,
			`INSERT INTO webhook_samples (flow, project, armed_until)
			 SELECT id, project, ? FROM flows WHERE project = ? AND id = ?
			 ON CONFLICT (flow) DO UPDATE SET armed_until = excluded.armed_until`,
			until.UnixMilli(), project, flowID)
	})
}

// execOnFlow runs a statement that writes the row of one flow, and turns
// "no row written" into the flow's NotFound: the flow is gone, or another
// project's.
func execOnFlow(ctx context.Context, tx *txn, flowID, query string, args ...any) error {
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n == 0 {
		return automation.NotFound("flow", flowID)
	}
	return nil
}

// ArmedUntil reads the flow's capture expiry from the read pool, or from
// the cache (CacheFlows), which every arming and taking invalidates.
func (s *Store) ArmedUntil(ctx context.Context, project, flowID string) (time.Time, error) {
	return s.cachedArmedUntil(project, flowID, func() (time.Time, error) { return s.armedUntil(ctx, project, flowID) })
}

func (s *Store) armedUntil(ctx context.Context, project, flowID string) (time.Time, error) {
	var until sql.NullInt64
	err := s.readRow(ctx,
		`SELECT armed_until FROM webhook_samples WHERE project = ? AND flow = ?`, project, flowID).Scan(&until)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !until.Valid) {
		return time.Time{}, nil
	} else if err != nil {
		return time.Time{}, fmt.Errorf("pgstore: capture of flow %s: %w", flowID, err)
	}
	return time.UnixMilli(until.Int64).UTC(), nil
}

// TakeCapture disarms the capture with one conditional UPDATE, which SQLite's
// single writer applies atomically. Most deliveries find nothing armed: they
// only read, so a busy webhook costs no write transaction.
func (s *Store) TakeCapture(ctx context.Context, project, flowID string, now time.Time) (bool, error) {
	until, err := s.ArmedUntil(ctx, project, flowID)
	if err != nil || !until.After(now) {
		return false, err
	}
	taken := false
	defer s.cache.invalidate()
	err = s.write(ctx, "take capture of flow "+flowID, func(tx *txn) error {
		if err := notifyChange(ctx, tx, "flows"); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx,
			`UPDATE webhook_samples SET armed_until = NULL
			 WHERE project = ? AND flow = ? AND armed_until > ?`, project, flowID, now.UnixMilli())
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		taken = n == 1
		return err
	})
	return taken, err
}

// PutSample replaces the flow's sample, leaving its arming as it is.
func (s *Store) PutSample(ctx context.Context, project, flowID string, smp automation.Sample) error {
	doc, err := json.Marshal(smp)
	if err != nil {
		return fmt.Errorf("pgstore: put sample of flow %s: encode: %w", flowID, err)
	}
	return s.write(ctx, "put sample of flow "+flowID, func(tx *txn) error {
		return execOnFlow(ctx, tx, flowID,
			`UPDATE webhook_samples SET sample = ? WHERE project = ? AND flow = ?`, string(doc), project, flowID)
	})
}

// Capture returns the flow's arming and sample.
func (s *Store) Capture(ctx context.Context, project, flowID string) (automation.Capture, error) {
	var (
		until  sql.NullInt64
		sample sql.NullString
		c      automation.Capture
	)
	err := s.readRow(ctx,
		`SELECT armed_until, sample FROM webhook_samples WHERE project = ? AND flow = ?`,
		project, flowID).Scan(&until, &sample)
	if errors.Is(err, sql.ErrNoRows) {
		return c, automation.NotFound("sample", flowID)
	} else if err != nil {
		return c, fmt.Errorf("pgstore: capture of flow %s: %w", flowID, err)
	}
	if until.Valid {
		c.ArmedUntil = time.UnixMilli(until.Int64).UTC()
	}
	if sample.Valid {
		c.Sample = &automation.Sample{}
		if err := json.Unmarshal([]byte(sample.String), c.Sample); err != nil {
			return automation.Capture{}, fmt.Errorf("pgstore: capture of flow %s: decode sample: %w", flowID, err)
		}
	}
	return c, nil
}
