package pgstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"flowservice/pkg/automation"
)

var _ automation.VersionStore = (*Store)(nil)

// writeVersions stores what a flow write carries beside the flow
// (automation.VersionWrites), inside its transaction.
func writeVersions(ctx context.Context, tx *txn, f automation.Flow) error {
	for _, v := range f.Publish {
		def, err := json.Marshal(v.Definition)
		if err != nil {
			return fmt.Errorf("encode version %d: %w", v.Version, err)
		}
		res, err := tx.ExecContext(ctx,
			`INSERT INTO flow_versions (flow, project, version, created, message, created_by, definition)
			 VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			f.ID, f.Project, v.Version, formatTime(v.Created), v.Message, v.CreatedBy, string(def))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return automation.FlowModified(f.ID) // another publish took the number
		}
	}
	if len(f.Publish) > 0 && f.KeepVersions > 0 {
		if err := pruneVersions(ctx, tx, f); err != nil {
			return err
		}
	}
	if f.DropDraft {
		if _, err := tx.ExecContext(ctx, `DELETE FROM flow_drafts WHERE flow = ?`, f.ID); err != nil {
			return err
		}
	}
	if d := f.SaveDraft; d != nil {
		doc, err := json.Marshal(d)
		if err != nil {
			return fmt.Errorf("encode draft: %w", err)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO flow_drafts (flow, project, doc) VALUES (?, ?, ?)
			 ON CONFLICT (flow) DO UPDATE SET doc = excluded.doc`, f.ID, f.Project, string(doc)); err != nil {
			return err
		}
	}
	return nil
}

// pruneVersions removes, in the flow write's transaction, the oldest
// versions beyond the newest f.KeepVersions, except those a RUNNING run of
// the flow is pinned to (automation.VersionWrites), at most
// automation.MaxPrunedPerWrite of them. The runs are read in the same
// transaction, so no run can be pinned to a version while it goes.
func pruneVersions(ctx context.Context, tx *txn, f automation.Flow) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM flow_versions WHERE flow = ?1 AND version IN (
		SELECT version FROM flow_versions WHERE flow = ?1 AND version <= ?2
		AND version NOT IN (SELECT (doc->>'flowVersion')::bigint FROM runs
			WHERE project = ?3 AND flow = ?1 AND status = 'RUNNING' AND doc->>'flowVersion' IS NOT NULL)
		ORDER BY version LIMIT ?4)`,
		f.ID, f.LiveVersion-f.KeepVersions, f.Project, automation.MaxPrunedPerWrite)
	return err
}

// FlowVersion returns one version of a flow with its definition.
func (s *Store) FlowVersion(ctx context.Context, project, flowID string, n int64) (automation.FlowVersion, error) {
	v, _, err := scanVersion(s.readRow(ctx,
		`SELECT version, created, message, created_by, definition FROM flow_versions
		 WHERE flow = ? AND project = ? AND version = ?`, flowID, project, n), true)
	if errors.Is(err, sql.ErrNoRows) {
		return automation.FlowVersion{}, automation.NotFound("version", strconv.FormatInt(n, 10))
	} else if err != nil {
		return automation.FlowVersion{}, fmt.Errorf("pgstore: get version %d of flow %s: %w", n, flowID, err)
	}
	v.FlowID, v.Project = flowID, project
	return v, nil
}

// FlowVersions pages through a flow's versions, newest first: the position
// is the last version number returned.
func (s *Store) FlowVersions(ctx context.Context, project, flowID string, q automation.ListQuery) (automation.Page[automation.FlowVersion], error) {
	var page automation.Page[automation.FlowVersion]
	before := int64(math.MaxInt64)
	if q.After != "" {
		n, err := strconv.ParseInt(q.After, 10, 64)
		if err != nil || n < 1 {
			return page, automation.InvalidCode("INVALID_CURSOR", "list position %q is not valid", q.After)
		}
		before = n
	}
	limit := max(q.Limit, 1)
	rows, err := s.query(ctx,
		`SELECT version, created, message, created_by, '' FROM flow_versions
		 WHERE flow = ? AND project = ? AND version < ? ORDER BY version DESC LIMIT ?`,
		flowID, project, before, limit+1)
	if err != nil {
		return page, fmt.Errorf("pgstore: list versions of flow %s: %w", flowID, err)
	}
	defer rows.Close()
	for rows.Next() {
		if len(page.Items) == limit {
			page.Next = strconv.FormatInt(page.Items[limit-1].Version, 10)
			break
		}
		v, _, err := scanVersion(rows, false)
		if err != nil {
			return page, fmt.Errorf("pgstore: list versions of flow %s: %w", flowID, err)
		}
		v.FlowID, v.Project = flowID, project
		page.Items = append(page.Items, v)
	}
	if err := rows.Err(); err != nil {
		return page, fmt.Errorf("pgstore: list versions of flow %s: %w", flowID, err)
	}
	return page, nil
}

func scanVersion(row rowScanner, withDef bool) (automation.FlowVersion, int64, error) {
	var (
		v       automation.FlowVersion
		created string
		def     string
	)
	if err := row.Scan(&v.Version, &created, &v.Message, &v.CreatedBy, &def); err != nil {
		return v, 0, err
	}
	var err error
	if v.Created, err = parseTime(created); err != nil {
		return v, 0, fmt.Errorf("decode version %d: %w", v.Version, err)
	}
	if withDef {
		v.Definition = &automation.Definition{}
		if err := json.Unmarshal([]byte(def), v.Definition); err != nil {
			return v, 0, fmt.Errorf("decode version %d: %w", v.Version, err)
		}
	}
	return v, v.Version, nil
}

// Draft returns the flow's draft.
func (s *Store) Draft(ctx context.Context, project, flowID string) (automation.Draft, error) {
	var doc string
	err := s.readRow(ctx, `SELECT doc FROM flow_drafts WHERE flow = ? AND project = ?`, flowID, project).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return automation.Draft{}, automation.NotFound("draft", flowID)
	} else if err != nil {
		return automation.Draft{}, fmt.Errorf("pgstore: get draft of flow %s: %w", flowID, err)
	}
	var d automation.Draft
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return automation.Draft{}, fmt.Errorf("pgstore: decode draft of flow %s: %w", flowID, err)
	}
	d.Project = project
	return d, nil
}
