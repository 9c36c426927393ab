package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"flowservice/pkg/automation"
)

// schemaRateBuckets holds the projects' shared rate buckets: one row per
// bucket, its generic cell rate algorithm's tat (automation.BucketLevel).
const schemaRateBuckets = `
CREATE TABLE rate_buckets (
	key TEXT PRIMARY KEY,
	tat BIGINT NOT NULL -- microseconds since the epoch
);
`

// Buckets are the projects' rate buckets (webhooksPerSecond,
// outboundPerMinute, runsPerMinute) as rows every node of a cluster
// shares, so that a project's quotas bound the project and not each node:
// the cluster's automation.RateBuckets. A take is one statement outside
// the store's write lock (a conditional upsert on one row), made only for
// plans that have the limit.
type Buckets struct{ db *pdb }

var _ automation.RateBuckets = Buckets{}

// Buckets are the store's rate buckets.
func (s *Store) Buckets() Buckets { return Buckets{db: s.w} }

// Take takes one token from the bucket key, refilled rate tokens a second
// up to burst: the upsert moves tat to max(tat, now) + interval when a
// token is there, and writes nothing otherwise (then the row says how long
// until one is).
func (b Buckets) Take(ctx context.Context, key string, rate float64, burst int64, now time.Time) (time.Duration, error) {
	if rate <= 0 || math.IsInf(rate, 1) {
		return 0, fmt.Errorf("pgstore: bucket %s: rate %v", key, rate)
	}
	interval, tolerance := automation.BucketInterval(rate, burst)
	t := now.UnixMicro()
	var tat int64
	err := b.db.QueryRowContext(ctx,
		`INSERT INTO rate_buckets (key, tat) VALUES (?1, ?2::bigint + ?3::bigint)
		 ON CONFLICT (key) DO UPDATE SET tat = greatest(rate_buckets.tat, ?2::bigint) + ?3::bigint
		 WHERE rate_buckets.tat <= ?2::bigint + ?4::bigint
		 RETURNING tat`, key, t, interval, tolerance).Scan(&tat)
	if err == nil {
		return 0, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, wrapWriteErr("take from bucket "+key, "", err)
	}
	_, wait, err := b.Peek(ctx, key, rate, burst, now)
	if err != nil {
		return 0, err
	}
	if wait <= 0 { // refilled between the two statements: a token's time
		wait = time.Duration(interval) * time.Microsecond
	}
	return wait, nil
}

// Peek reads the bucket key and takes nothing.
func (b Buckets) Peek(ctx context.Context, key string, rate float64, burst int64, now time.Time) (int64, time.Duration, error) {
	if rate <= 0 || math.IsInf(rate, 1) {
		return 0, 0, fmt.Errorf("pgstore: bucket %s: rate %v", key, rate)
	}
	var tat int64
	err := b.db.QueryRowContext(ctx, `SELECT tat FROM rate_buckets WHERE key = ?`, key).Scan(&tat)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("pgstore: read bucket %s: %w", key, err)
	}
	n, wait := automation.BucketLevel(tat, now.UnixMicro(), rate, burst)
	return n, wait, nil
}
