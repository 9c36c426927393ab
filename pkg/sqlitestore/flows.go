package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"flowservice/pkg/automation"
)

// flowColumns are read by scanFlow, in this order.
const flowColumns = `seq, id, project, version, doc, allowed_ips, finished, succeeded, last_run`

// CreateFlow stores a new flow at version 1 with zero run stats, and reserves
// its routes in the same transaction.
func (s *Store) CreateFlow(ctx context.Context, f automation.Flow) error {
	doc, ips, err := encodeFlow(f)
	if err != nil {
		return fmt.Errorf("sqlitestore: create flow %s: %w", f.ID, err)
	}
	defer s.cache.invalidate() // after the commit: see flowCache.gen
	return s.writeAudited(ctx, "create flow "+f.ID, func(tx *sql.Tx) error {
		if f.MaxFlows != nil {
			// In the writer's transaction: no other write runs between
			// the count and the insert, so concurrent creates cannot all
			// pass one count.
			var n int64
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM flows WHERE project = ?`, f.Project).Scan(&n); err != nil {
				return err
			}
			if n >= *f.MaxFlows {
				return automation.FlowQuotaExceeded(*f.MaxFlows)
			}
		}
		if err := s.outboxFlow(ctx, tx, f.Project, f.ID, &f); err != nil { // alerts.go
			return err
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO flows (id, project, status, version, doc, allowed_ips) VALUES (?, ?, ?, 1, ?, ?)`,
			f.ID, f.Project, string(f.Status), doc, ips); err != nil {
			return err
		}
		if err := writeVersions(ctx, tx, f); err != nil { // versions.go
			return err
		}
		return reserveRoutes(ctx, tx, f)
	})
}

// PutFlow replaces a flow's definition, metadata and allowlist if the stored
// version is f.Version-1, and moves its routes to f.Routes(). The run stats
// columns are left alone: runs own them.
func (s *Store) PutFlow(ctx context.Context, f automation.Flow) (err error) {
	doc, ips, err := encodeFlow(f)
	if err != nil {
		return fmt.Errorf("sqlitestore: put flow %s: %w", f.ID, err)
	}
	defer s.cache.invalidate()
	defer func() {
		if err == nil {
			s.stops.set(f.ID, f.StoppedAt) // flowstop.go
		}
	}()
	return s.writeAudited(ctx, "put flow "+f.ID, func(tx *sql.Tx) error {
		if err := s.outboxFlow(ctx, tx, f.Project, f.ID, &f); err != nil { // alerts.go
			return err
		}
		res, err := tx.ExecContext(ctx,
			`UPDATE flows SET status = ?, version = ?, doc = ?, allowed_ips = ?
			 WHERE project = ? AND id = ? AND version = ?`,
			string(f.Status), f.Version, doc, ips, f.Project, f.ID, f.Version-1)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			// Missing, another project's, or changed since it was read.
			var stored int64
			err := tx.QueryRowContext(ctx,
				`SELECT version FROM flows WHERE project = ? AND id = ?`, f.Project, f.ID).Scan(&stored)
			if errors.Is(err, sql.ErrNoRows) {
				return automation.NotFound("flow", f.ID)
			} else if err != nil {
				return err
			}
			return automation.Conflict(automation.CodeFlowModified,
				"flow %q was modified by another request (version %d, expected %d): read it again and retry",
				f.ID, stored, f.Version-1)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM routes WHERE flow = ?`, f.ID); err != nil {
			return err
		}
		if err := writeVersions(ctx, tx, f); err != nil { // versions.go
			return err
		}
		return reserveRoutes(ctx, tx, f)
	})
}

// reserveRoutes inserts f's routes; a route another flow holds, or a path
// any flow of another project holds (workflow builder paths are one
// namespace across projects, whatever the method), is ROUTE_CONFLICT and,
// returned inside the transaction, undoes the write. The write transaction
// is BEGIN IMMEDIATE, so the check and the insert cannot interleave with
// another writer's.
func reserveRoutes(ctx context.Context, tx *sql.Tx, f automation.Flow) error {
	routes := f.Routes()
	if len(routes) > 0 {
		var taken int
		err := tx.QueryRowContext(ctx,
			`SELECT count(*) FROM routes JOIN flows ON flows.id = routes.flow
			 WHERE routes.path = ? AND flows.project <> ?`, routes[0].Path, f.Project).Scan(&taken)
		if err != nil {
			return err
		}
		if taken > 0 {
			return automation.PathTaken(routes[0])
		}
	}
	if len(routes) > 0 {
		held, err := routeShapes(ctx, tx, automation.Segments(routes[0].Path), f.ID)
		if err != nil {
			return err
		}
		if err := automation.CheckShapeClash(routes[0].Path, f.Project, held); err != nil {
			return err
		}
	}
	for _, r := range routes {
		res, err := tx.ExecContext(ctx,
			`INSERT INTO routes (path, method, flow) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
			r.Path, r.Method, f.ID)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if n == 0 {
			return automation.RouteConflict(r.Method, r.Path)
		}
	}
	return nil
}

// Flow returns a flow of the project.
func (s *Store) Flow(ctx context.Context, project, id string) (automation.Flow, error) {
	f, _, err := scanFlow(s.readRow(ctx,
		`SELECT `+flowColumns+` FROM flows WHERE project = ? AND id = ?`, project, id))
	if errors.Is(err, sql.ErrNoRows) {
		return automation.Flow{}, automation.NotFound("flow", id)
	} else if err != nil {
		return automation.Flow{}, fmt.Errorf("sqlitestore: get flow %s: %w", id, err)
	}
	return f, nil
}

// FlowByID finds a flow by its ID alone.
func (s *Store) FlowByID(ctx context.Context, id string) (automation.Flow, error) {
	return s.cachedFlowByID(id, func() (automation.Flow, error) { return s.flowByID(ctx, id) })
}

func (s *Store) flowByID(ctx context.Context, id string) (automation.Flow, error) {
	f, _, err := scanFlow(s.readRow(ctx,
		`SELECT `+flowColumns+` FROM flows WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return automation.Flow{}, automation.NotFound("flow", id)
	} else if err != nil {
		return automation.Flow{}, fmt.Errorf("sqlitestore: get flow %s: %w", id, err)
	}
	return f, nil
}

// DeleteFlow removes a flow of the project and everything that hangs off it.
func (s *Store) DeleteFlow(ctx context.Context, project, id string) error {
	defer s.cache.invalidate()
	defer s.stops.drop(id) // its runs go with it: their journal writes find nothing
	return s.writeAudited(ctx, "delete flow "+id, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx,
			`SELECT count(*) FROM flows WHERE project = ? AND id = ?`, project, id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return automation.NotFound("flow", id)
		}
		if err := s.outboxFlow(ctx, tx, project, id, nil); err != nil { // alerts.go
			return err
		}
		// What hangs off the flow goes first. Routes would also cascade
		// on their foreign key; naming them keeps the list in one place.
		for _, q := range []string{
			`DELETE FROM run_queue WHERE run IN (SELECT id FROM runs WHERE flow = ?)`,
			`DELETE FROM waitpoints WHERE run IN (SELECT id FROM runs WHERE flow = ?)`,
			`DELETE FROM runs WHERE flow = ?`,
			`DELETE FROM routes WHERE flow = ?`,
			`DELETE FROM webhook_samples WHERE flow = ?`,
			`DELETE FROM flow_state WHERE flow = ?`,
			`DELETE FROM flow_versions WHERE flow = ?`,
			`DELETE FROM flow_drafts WHERE flow = ?`,
			`DELETE FROM flows WHERE id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return err
			}
		}
		return nil
	})
}

// The list queries; TestListPlans checks that each is an index range scan.
const (
	listFlowsSQL = `SELECT ` + flowColumns + ` FROM flows
		WHERE project = ? AND seq > ? ORDER BY seq LIMIT ?`
	listFlowsByStatusSQL = `SELECT ` + flowColumns + ` FROM flows
		WHERE project = ? AND status = ? AND seq > ? ORDER BY seq LIMIT ?`
)

// ListFlows returns the page of the project's flows after q.After in
// creation order. It reads at most q.Limit+1 rows through the (project,
// seq) or (project, status, seq) index.
func (s *Store) ListFlows(ctx context.Context, project string, q automation.ListQuery) (automation.Page[automation.Flow], error) {
	after, err := parsePosition(q.After)
	if err != nil {
		return automation.Page[automation.Flow]{}, err
	}
	limit := max(q.Limit, 1)
	query, args := listFlowsSQL, []any{project, after, limit + 1}
	if q.Status != "" {
		query, args = listFlowsByStatusSQL, []any{project, q.Status, after, limit + 1}
	}
	return readPage(ctx, s.query, "flows", limit, scanFlow, query, args...)
}

// RouteShapes lists the shapes with that many segments and their projects.
func (s *Store) RouteShapes(ctx context.Context, segments int) ([]automation.ShapeOwner, error) {
	return routeShapes(ctx, s.r, segments, "")
}

// routeShapes reads the distinct (shape, project) pairs of the routes with
// that many segments, leaving out flow except's. The segment count is
// computed in SQL: routes hold few rows per flow, and this runs only when a
// request path has no literal route for its method.
func routeShapes(ctx context.Context, q queryer, segments int, except string) ([]automation.ShapeOwner, error) {
	rows, err := q.QueryContext(ctx,
		`SELECT DISTINCT routes.path, flows.project FROM routes JOIN flows ON flows.id = routes.flow
		 WHERE length(routes.path) - length(replace(routes.path, '/', '')) = ? AND routes.flow <> ?`,
		segments-1, except)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: route shapes: %w", err)
	}
	defer rows.Close()
	var out []automation.ShapeOwner
	for rows.Next() {
		var so automation.ShapeOwner
		if err := rows.Scan(&so.Shape, &so.Project); err != nil {
			return nil, fmt.Errorf("sqlitestore: route shapes: %w", err)
		}
		out = append(out, so)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: route shapes: %w", err)
	}
	return out, nil
}

// queryer is what both a *sql.DB and a *sql.Tx offer for reads.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// RouteFlows returns method -> flow ID for the routes on path.
func (s *Store) RouteFlows(ctx context.Context, path string) (map[string]string, error) {
	return s.cachedRouteFlows(path, func() (map[string]string, error) { return s.routeFlows(ctx, path) })
}

func (s *Store) routeFlows(ctx context.Context, path string) (map[string]string, error) {
	rows, err := s.query(ctx, `SELECT method, flow FROM routes WHERE path = ?`, path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: routes of %s: %w", path, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var method, flow string
		if err := rows.Scan(&method, &flow); err != nil {
			return nil, fmt.Errorf("sqlitestore: routes of %s: %w", path, err)
		}
		out[method] = flow
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: routes of %s: %w", path, err)
	}
	return out, nil
}

// encodeFlow returns the stored document of f and its allowlist as JSON
// (NULL when empty). The document leaves out what has its own column or is
// derived: the project, version, allowlist and stats have json:"-", and the
// derived RunCount, SuccessRate and LastRun are cleared so that a stale copy
// never shadows the stats columns.
func encodeFlow(f automation.Flow) (doc string, ips sql.NullString, err error) {
	f.RunCount, f.SuccessRate, f.LastRun = 0, 0, nil
	b, err := json.Marshal(f)
	if err != nil {
		return "", ips, fmt.Errorf("encode flow: %w", err)
	}
	b = withStoppedAt(b, f) // flowstop.go
	if len(f.AllowedIPs) > 0 {
		a, err := json.Marshal(f.AllowedIPs)
		if err != nil {
			return "", ips, fmt.Errorf("encode allowlist: %w", err)
		}
		ips = sql.NullString{String: string(a), Valid: true}
	}
	return string(b), ips, nil
}

// scanFlow reads the columns of flowColumns into a Flow, and its seq.
func scanFlow(row rowScanner) (automation.Flow, int64, error) {
	var (
		f        automation.Flow
		seq      int64
		id, proj string
		version  int64
		doc      string
		ips      sql.NullString
		stats    automation.FlowStats
		lastRun  sql.NullString
	)
	if err := row.Scan(&seq, &id, &proj, &version, &doc, &ips, &stats.Finished, &stats.Succeeded, &lastRun); err != nil {
		return f, 0, err
	}
	if err := json.Unmarshal([]byte(doc), &f); err != nil {
		return f, 0, fmt.Errorf("decode flow %s: %w", id, err)
	}
	if err := readStoppedAt([]byte(doc), &f); err != nil {
		return f, 0, fmt.Errorf("decode flow %s: %w", id, err)
	}
	if ips.Valid {
		if err := json.Unmarshal([]byte(ips.String), &f.AllowedIPs); err != nil {
			return f, 0, fmt.Errorf("decode allowlist of flow %s: %w", id, err)
		}
	}
	var err error
	if stats.LastRun, err = parseTimePtr(lastRun); err != nil {
		return f, 0, fmt.Errorf("decode stats of flow %s: %w", id, err)
	}
	f.ID, f.Project, f.Version, f.Stats = id, proj, version, stats
	return f, seq, nil
}

// parsePosition reads a list position made by this store: the seq of the
// last item of the previous page, or "" for the start.
func parsePosition(after string) (int64, error) {
	if after == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(after, 10, 64)
	if err != nil || n < 0 {
		// The Service only passes back positions it sealed, so this is a
		// caller bug; it is still the caller's input, not a store fault.
		return 0, automation.InvalidCode("INVALID_CURSOR", "list position %q is not valid", after)
	}
	return n, nil
}
