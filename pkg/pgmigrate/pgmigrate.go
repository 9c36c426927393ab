// Package pgmigrate copies an embedded flowd installation (a data
// directory's SQLite store) into a PostgreSQL database for flowd nodes
// (pgstore): every table, row for row, and every sealed secret opened with
// the data directory's key and sealed again with FLOWD_SECRET_KEY.
//
// A copy is idempotent and resumable: a row already in the target is left
// as it is (ON CONFLICT DO NOTHING), so running it again after a failure
// copies what is missing. The schemas are the same table for table
// (pgstore's schema is sqlitestore's), which is checked column by column
// before anything is copied.
package pgmigrate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // the data directory's driver

	"flowservice/pkg/datadir"
	"flowservice/pkg/pgstore"
	"flowservice/pkg/sealedsecrets"
)

// tables are the tables copied, in an order in which every reference
// (runs before run_queue, flows before routes) exists before it is needed.
// blobs is not among them: secrets are sealed again (copySecrets).
var tables = []string{
	"projects", "api_keys", "flows", "routes", "connections", "runs", "run_queue", "webhook_samples",
	"oauth_apps", "flow_state", "project_variables", "alert_subscriptions", "alert_events",
	"alert_deliveries", "audit_log", "run_journal", "flow_versions", "flow_drafts", "run_slots",
	"poll_state", "flow_insights", "users", "memberships", "invitations", "sessions", "waitpoints",
	"ai_tokens",
}

// notCopied are pgstore's own tables, which a data directory has no rows of.
var notCopied = map[string]bool{"blobs": true, "schema_migrations": true, "duty_leases": true, "cluster_settings": true, "rate_buckets": true}

// cleared are the columns whose values belong to the process that wrote
// them (a lease, a delivery claim): that process is gone, and the nodes
// must take the work up at once.
var cleared = map[string]bool{"runs.lease_until": true, "run_queue.lease_until": true, "alert_deliveries.claim_until_ms": true}

// pgOnly are the columns pgstore has and sqlitestore has not, with the
// statement that fills them once their table is copied.
var pgOnly = map[string]string{
	// The claim order (pgstore's schemaQueueOrder): the run's seq.
	"run_queue.seq": `UPDATE run_queue q SET seq = r.seq FROM runs r WHERE r.id = q.run AND q.seq <> r.seq`,
}

// withoutPgOnly drops table's pgOnly columns from names (and types).
func withoutPgOnly(table string, names, types []string) ([]string, []string) {
	var n, ty []string
	for i := range names {
		if _, ok := pgOnly[table+"."+names[i]]; ok {
			continue
		}
		n = append(n, names[i])
		if types != nil {
			ty = append(ty, types[i])
		}
	}
	return n, ty
}

// batch is the rows one transaction inserts.
const batch = 500

// Report counts what a copy did per table: rows read and rows inserted
// (the others were there from an earlier copy).
type Report struct {
	Tables  []TableReport
	Secrets int
}

// TableReport is one table's part of a Report.
type TableReport struct {
	Name           string
	Read, Inserted int
}

// Copy copies the data directory at dir into the database at url, whose
// secrets are sealed with secretKey (FLOWD_SECRET_KEY, checked as a node
// checks it). The directory must not be in use: Copy takes its lock, so a
// flowd running on it stops the copy. progress, when not nil, gets one
// line per table.
func Copy(ctx context.Context, dir, url string, secretKey []byte, progress io.Writer) (Report, error) {
	var rep Report
	unlock, err := datadir.Lock(dir)
	if err != nil {
		return rep, fmt.Errorf("%w (stop flowd on it first)", err)
	}
	defer unlock()
	src, err := datadir.Open(ctx, dir)
	if err != nil {
		return rep, err
	}
	defer src.Close()
	dst, err := pgstore.Open(ctx, url)
	if err != nil {
		return rep, err
	}
	defer dst.Close()
	if err := dst.CheckSecretKey(ctx, secretKey); err != nil {
		return rep, err
	}
	sq, err := sql.Open("sqlite", "file:"+filepath.Join(dir, datadir.DBFile)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return rep, fmt.Errorf("pgmigrate: open %s: %w", dir, err)
	}
	defer sq.Close()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return rep, errors.New("pgmigrate: the database URL does not parse")
	}
	pg := stdlib.OpenDB(*cfg)
	defer pg.Close()

	if err := checkTables(ctx, sq, pg); err != nil {
		return rep, err
	}
	if err := sameInstallation(ctx, sq, pg); err != nil {
		return rep, err
	}
	for _, t := range tables {
		tr, err := copyTable(ctx, sq, pg, t)
		if err != nil {
			return rep, err
		}
		rep.Tables = append(rep.Tables, tr)
		if progress != nil {
			fmt.Fprintf(progress, "%-20s %8d rows read, %8d copied\n", t, tr.Read, tr.Inserted)
		}
	}
	newSecrets, err := sealedsecrets.New(dst, secretKey)
	if err != nil {
		return rep, err
	}
	if rep.Secrets, err = copySecrets(ctx, sq, src.Secrets, newSecrets); err != nil {
		return rep, err
	}
	if progress != nil {
		fmt.Fprintf(progress, "%-20s %8d sealed again with FLOWD_SECRET_KEY\n", "secrets", rep.Secrets)
	}
	return rep, nil
}

// columns lists a table's columns: PostgreSQL's with their types.
func pgColumns(ctx context.Context, pg *sql.DB, table string) (names, types []string, err error) {
	rows, err := pg.QueryContext(ctx, `SELECT column_name, data_type FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
	if err != nil {
		return nil, nil, fmt.Errorf("pgmigrate: columns of %s: %w", table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var n, ty string
		if err := rows.Scan(&n, &ty); err != nil {
			return nil, nil, err
		}
		names, types = append(names, n), append(types, ty)
	}
	return names, types, rows.Err()
}

func sqliteColumns(ctx context.Context, sq *sql.DB, table string) ([]string, error) {
	rows, err := sq.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, table)
	if err != nil {
		return nil, fmt.Errorf("pgmigrate: columns of %s in the data directory: %w", table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// checkTables refuses schemas that differ (a flowctl older or newer than
// the flowd that wrote either side): every table of either side is copied
// or known not to be, with the same columns.
func checkTables(ctx context.Context, sq, pg *sql.DB) error {
	known := map[string]bool{}
	for _, t := range tables {
		known[t] = true
	}
	rows, err := pg.QueryContext(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`)
	if err != nil {
		return fmt.Errorf("pgmigrate: tables: %w", err)
	}
	var pgTables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		pgTables = append(pgTables, n)
	}
	rows.Close()
	for _, t := range pgTables {
		if !known[t] && !notCopied[t] {
			return fmt.Errorf("pgmigrate: the database has a table %s this flowctl does not know: use the flowctl of the flowd version that made it", t)
		}
	}
	srows, err := sq.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		return fmt.Errorf("pgmigrate: tables of the data directory: %w", err)
	}
	var sqTables []string
	for srows.Next() {
		var n string
		if err := srows.Scan(&n); err != nil {
			srows.Close()
			return err
		}
		sqTables = append(sqTables, n)
	}
	srows.Close()
	for _, t := range sqTables {
		if !known[t] && !notCopied[t] {
			return fmt.Errorf("pgmigrate: the data directory has a table %s this flowctl does not copy: use the flowctl of the flowd version that made it", t)
		}
	}
	for _, t := range tables {
		pc, _, err := pgColumns(ctx, pg, t)
		if err != nil {
			return err
		}
		pc, _ = withoutPgOnly(t, pc, nil)
		sc, err := sqliteColumns(ctx, sq, t)
		if err != nil {
			return err
		}
		if strings.Join(sortedCopy(pc), ",") != strings.Join(sortedCopy(sc), ",") {
			return fmt.Errorf("pgmigrate: table %s has columns %v in the data directory and %v in the database: the two schemas are of different flowd versions", t, sc, pc)
		}
	}
	return nil
}

func sortedCopy(s []string) []string { return slices.Sorted(slices.Values(s)) }

// sameInstallation refuses a database that serves another installation:
// rows numbered there would collide with the copied ones.
func sameInstallation(ctx context.Context, sq, pg *sql.DB) error {
	mine := map[string]bool{}
	rows, err := sq.QueryContext(ctx, `SELECT id FROM projects`)
	if err != nil {
		return fmt.Errorf("pgmigrate: projects: %w", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		mine[id] = true
	}
	rows.Close()
	prow, err := pg.QueryContext(ctx, `SELECT id, name FROM projects`)
	if err != nil {
		return fmt.Errorf("pgmigrate: projects of the database: %w", err)
	}
	defer prow.Close()
	for prow.Next() {
		var id, name string
		if err := prow.Scan(&id, &name); err != nil {
			return err
		}
		if !mine[id] {
			return fmt.Errorf("pgmigrate: the database already has project %q, which is not in the data directory: migrate into an empty database", name)
		}
	}
	return prow.Err()
}

// copyTable copies one table in batches, keeping every row's seq (run
// pages and cursors are ordered by it), then moves the identity past the
// copied rows.
func copyTable(ctx context.Context, sq, pg *sql.DB, table string) (TableReport, error) {
	tr := TableReport{Name: table}
	names, types, err := pgColumns(ctx, pg, table)
	if err != nil {
		return tr, err
	}
	names, types = withoutPgOnly(table, names, types)
	ph := make([]string, len(names))
	for i := range names {
		ph[i] = fmt.Sprintf("$%d", i+1)
	}
	var identity int
	if err := pg.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema()
		AND table_name = $1 AND column_name = 'seq' AND is_identity = 'YES'`, table).Scan(&identity); err != nil {
		return tr, fmt.Errorf("pgmigrate: columns of %s: %w", table, err)
	}
	override := ""
	if identity > 0 {
		override = " OVERRIDING SYSTEM VALUE"
	}
	insert := fmt.Sprintf(`INSERT INTO %s (%s)%s VALUES (%s) ON CONFLICT DO NOTHING`,
		pgx.Identifier{table}.Sanitize(), strings.Join(quoted(names), ", "), override, strings.Join(ph, ", "))
	rows, err := sq.QueryContext(ctx, fmt.Sprintf(`SELECT %s FROM %s`, strings.Join(quoted(names), ", "), quoted([]string{table})[0]))
	if err != nil {
		return tr, fmt.Errorf("pgmigrate: read %s: %w", table, err)
	}
	defer rows.Close()
	var tx *sql.Tx
	n := 0
	commit := func() error {
		if tx == nil {
			return nil
		}
		err := tx.Commit()
		tx, n = nil, 0
		if err != nil {
			return fmt.Errorf("pgmigrate: copy %s: %w", table, err)
		}
		return nil
	}
	for rows.Next() {
		vals := make([]any, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return tr, fmt.Errorf("pgmigrate: read %s: %w", table, err)
		}
		for i := range vals {
			vals[i] = convert(vals[i], types[i])
			if cleared[table+"."+names[i]] {
				vals[i] = nil
			}
		}
		tr.Read++
		if tx == nil {
			if tx, err = pg.BeginTx(ctx, nil); err != nil {
				return tr, fmt.Errorf("pgmigrate: copy %s: %w", table, err)
			}
		}
		res, err := tx.ExecContext(ctx, insert, vals...)
		if err != nil {
			_ = tx.Rollback()
			return tr, fmt.Errorf("pgmigrate: copy %s: %w", table, err)
		}
		if k, _ := res.RowsAffected(); k > 0 {
			tr.Inserted++
		}
		if n++; n == batch {
			if err := commit(); err != nil {
				return tr, err
			}
		}
	}
	if err := rows.Err(); err != nil {
		if tx != nil {
			_ = tx.Rollback()
		}
		return tr, fmt.Errorf("pgmigrate: read %s: %w", table, err)
	}
	if err := commit(); err != nil {
		return tr, err
	}
	for col, fill := range pgOnly {
		if strings.HasPrefix(col, table+".") {
			if _, err := pg.ExecContext(ctx, fill); err != nil {
				return tr, fmt.Errorf("pgmigrate: fill %s: %w", col, err)
			}
		}
	}
	if override != "" {
		if _, err := pg.ExecContext(ctx, fmt.Sprintf(`SELECT setval(pg_get_serial_sequence('%s', 'seq'), GREATEST((SELECT max(seq) FROM %s), 1))`, table, pgx.Identifier{table}.Sanitize())); err != nil {
			return tr, fmt.Errorf("pgmigrate: number %s after the copy: %w", table, err)
		}
	}
	return tr, nil
}

func quoted(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = `"` + n + `"`
	}
	return out
}

// convert turns a value SQLite returned into what the PostgreSQL column
// takes: SQLite has no booleans, and may hand text back as bytes.
func convert(v any, pgType string) any {
	switch pgType {
	case "boolean":
		if i, ok := v.(int64); ok {
			return i != 0
		}
	case "text", "json", "jsonb":
		if b, ok := v.([]byte); ok {
			return string(b)
		}
	}
	return v
}

// copySecrets opens every sealed value of the data directory with its key
// and seals it again under the new key: ciphertexts are bound to their
// key, so they cannot be copied as they are.
func copySecrets(ctx context.Context, sq *sql.DB, from, to *sealedsecrets.Secrets) (int, error) {
	rows, err := sq.QueryContext(ctx, `SELECT project, name FROM blobs`)
	if err != nil {
		return 0, fmt.Errorf("pgmigrate: read secrets: %w", err)
	}
	type ref struct{ project, name string }
	var refs []ref
	for rows.Next() {
		var r ref
		if err := rows.Scan(&r.project, &r.name); err != nil {
			rows.Close()
			return 0, err
		}
		refs = append(refs, r)
	}
	rows.Close()
	for _, r := range refs {
		v, err := from.Secret(ctx, r.project, r.name)
		if err != nil {
			return 0, fmt.Errorf("pgmigrate: open secret %s of project %s: %w", r.name, r.project, err)
		}
		if err := to.PutSecret(ctx, r.project, r.name, v); err != nil {
			return 0, fmt.Errorf("pgmigrate: seal secret %s of project %s: %w", r.name, r.project, err)
		}
	}
	return len(refs), nil
}
