package pgstore_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"flowservice/pkg/pgstore"
)

// TestClaimOrderSameMillisecond: entries due in the same millisecond are
// claimed in the order their runs were enqueued, also for entries written
// before the queue had its own order (schemaQueueOrder fills it from the
// runs when it migrates).
func TestClaimOrderSameMillisecond(t *testing.T) {
	ctx := context.Background()
	stores, f := benchNodes(t, 1)
	s := stores[0]
	created := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Second)
	var want []string
	for range 5 {
		r := benchRun(f)
		r.Created = created
		if err := s.Enqueue(ctx, r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r.ID)
	}
	claimOrder := func(s *pgstore.Store) []string {
		t.Helper()
		es, err := s.ClaimDueBatch(ctx, time.Now(), time.Minute, 16)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			got = append(got, e.RunID)
		}
		return got
	}

	// The database as version 2 left it: no queue order (nor what later
	// versions added: each migration after the third undoes itself here).
	db, err := sql.Open("pgx", s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DROP INDEX run_queue_ready; ALTER TABLE run_queue DROP COLUMN seq;
		DROP TABLE waitpoints; ALTER TABLE connections DROP COLUMN base_url;
		DROP TABLE rate_buckets; DROP TABLE ai_tokens;
		DELETE FROM schema_migrations WHERE version >= 3`); err != nil {
		t.Fatal(err)
	}
	again, err := pgstore.Open(ctx, s.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if got := claimOrder(again); !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want the enqueue order %v", got, want)
	}
	var version int
	if err := db.QueryRow(`SELECT max(version) FROM schema_migrations`).Scan(&version); err != nil || version != pgstore.SchemaVersion {
		t.Fatalf("schema version %d (%v), want %d", version, err, pgstore.SchemaVersion)
	}

	// New entries: in order too, after the migrated ones.
	var more []string
	for range 5 {
		r := benchRun(f)
		r.Created = created
		if err := again.Enqueue(ctx, r); err != nil {
			t.Fatal(err)
		}
		more = append(more, r.ID)
	}
	if got := claimOrder(again); !slices.Equal(got, more) {
		t.Fatalf("claimed %v, want the enqueue order %v", got, more)
	}
}
