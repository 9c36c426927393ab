package pgstore

import (
	"context"
	"fmt"

	"flowservice/pkg/automation"
)

var _ automation.UsageStore = (*Store)(nil)

// storedBytesSQL sums the bytes of the project's runs (document and
// summary), webhook samples, flow state and flow versions (their
// definitions: the rest of a version row is a few dozen bytes).
// octet_length reads a value's size from its record header without
// loading it, so the sum reads each row's first page, not its overflow
// pages: its cost grows with the number of runs, not with their size.
// Runs and versions go through their project indexes; samples and state
// hold one row per flow at most. Journal entries (running runs' steps
// since their last whole write) are left out: they are small and go at
// the run's next write.
const storedBytesSQL = `SELECT
	(SELECT coalesce(sum(octet_length(doc::text) + coalesce(octet_length(summary::text), 0)), 0) FROM runs WHERE project = ?1) +
	(SELECT coalesce(sum(coalesce(octet_length(sample::text), 0)), 0) FROM webhook_samples WHERE project = ?1) +
	(SELECT coalesce(sum(octet_length(doc::text)), 0) FROM flow_state WHERE project = ?1) +
	(SELECT coalesce(sum(octet_length(definition::text)), 0) FROM flow_versions WHERE project = ?1)`

// StoredBytes measures what the project keeps: see storedBytesSQL.
func (s *Store) StoredBytes(ctx context.Context, project string) (int64, error) {
	var n int64
	if err := s.readRow(ctx, storedBytesSQL, project).Scan(&n); err != nil {
		return 0, fmt.Errorf("pgstore: stored bytes of project %s: %w", project, err)
	}
	return n, nil
}
