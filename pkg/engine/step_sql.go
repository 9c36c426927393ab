package engine

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/stdlib"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowdef"
)

// A SQL step runs one parameterised statement on a POSTGRES (pgx) or MYSQL
// (go-sql-driver/mysql) connection. Values reach the database only as
// parameters (the statement's text is fixed at save, where a {{ is
// refused), sent in the protocol's binary form, so that no value is ever
// read as SQL. The database host is a send like any other: it passes
// CheckSendHost and the connection's allowedHosts, and is dialled through
// the SSRF guard.

// Bounds of SQL steps' pools (docs/reliability.md).
const (
	// SQLPoolConns is how many database connections one connection's pool
	// keeps open at most; more statements at once wait for one.
	SQLPoolConns = 4
	// SQLPoolsPerProject bounds the pools of one project: opening another
	// closes its least recently used idle one.
	SQLPoolsPerProject = 4
	// SQLPools bounds the pools of the whole process.
	SQLPools = 64
	// SQLPoolIdle is how long a pool stays open unused; SQLConnIdle how
	// long one of its database connections does.
	SQLPoolIdle = 5 * time.Minute
	SQLConnIdle = time.Minute
	// sqlDialTimeout bounds connecting to the database.
	sqlDialTimeout = 10 * time.Second
)

// dbPools are the SQL steps' pools, one per connection, created on first
// use and closed when idle (swept at each use) or pushed out by the bounds.
type dbPools struct {
	mu    sync.Mutex
	pools map[string]*dbPool // connection ID -> pool
}

type dbPool struct {
	dbConn
	project  string
	lastUsed time.Time
	inUse    int
}

// dbConn is an open pool and the server it goes to, for the statement's
// span: its system (automation.OutboundPostgres, OutboundMySQL), host and
// port.
type dbConn struct {
	db     *sql.DB
	system string
	host   string
	port   int
}

// Guarded network names for go-sql-driver/mysql, whose dialler is
// registered globally: one behind the SSRF guard, one open (private
// networks allowed).
const (
	mysqlGuarded = "flowd-guarded"
	mysqlOpen    = "flowd-open"
)

var registerMySQL sync.Once

// guardedDialer is a dialer behind the SSRF guard unless allowPrivate.
func guardedDialer(allowPrivate bool) *net.Dialer {
	d := &net.Dialer{Timeout: sqlDialTimeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = guardControl
	}
	return d
}

// pool returns the open pool of conn, opening it within the bounds.
func (e *Engine) pool(conn automation.Connection, cfg *automation.DatabaseConfig) (dbConn, func(), error) {
	e.dbsOnce.Do(func() { e.dbs = &dbPools{pools: map[string]*dbPool{}} })
	p := e.dbs
	now := e.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	// Idle pools are closed at each use rather than by a timer.
	for id, q := range p.pools {
		if q.inUse == 0 && now.Sub(q.lastUsed) > SQLPoolIdle {
			q.db.Close()
			delete(p.pools, id)
		}
	}
	if q, ok := p.pools[conn.ID]; ok {
		q.inUse++
		q.lastUsed = now
		return q.dbConn, p.release(conn.ID), nil
	}
	// Make room: at most SQLPoolsPerProject for this project and SQLPools
	// in all, closing the least recently used idle pool.
	for {
		mine, all := 0, len(p.pools)
		var victim string
		var oldest time.Time
		for _, q := range p.pools {
			if q.project == conn.Project {
				mine++
			}
		}
		over := mine >= SQLPoolsPerProject
		if !over && all < SQLPools {
			break
		}
		for id, q := range p.pools {
			if q.inUse > 0 || (over && q.project != conn.Project) {
				continue
			}
			if victim == "" || q.lastUsed.Before(oldest) {
				victim, oldest = id, q.lastUsed
			}
		}
		if victim == "" {
			return dbConn{}, nil, &stepError{retryable: true,
				msg: fmt.Sprintf("every database pool is busy (at most %d per project, %d in all); the step will be retried", SQLPoolsPerProject, SQLPools)}
		}
		p.pools[victim].db.Close()
		delete(p.pools, victim)
	}
	dc, err := e.openDB(conn, cfg)
	if err != nil {
		return dbConn{}, nil, err
	}
	dc.db.SetMaxOpenConns(SQLPoolConns)
	dc.db.SetMaxIdleConns(SQLPoolConns)
	dc.db.SetConnMaxIdleTime(SQLConnIdle)
	p.pools[conn.ID] = &dbPool{dbConn: dc, project: conn.Project, lastUsed: now, inUse: 1}
	return dc, p.release(conn.ID), nil
}

func (p *dbPools) release(id string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if q, ok := p.pools[id]; ok {
				q.inUse--
			}
		})
	}
}

// poolCount is how many pools are open, for tests.
func (e *Engine) poolCount() int {
	if e.dbs == nil {
		return 0
	}
	e.dbs.mu.Lock()
	defer e.dbs.mu.Unlock()
	return len(e.dbs.pools)
}

// fenced checks the database host as a send of the connection's
// credential: a form the dialler could read otherwise, or a host outside
// its allowedHosts, is refused before any dial.
func fenced(conn automation.Connection, host string) error {
	if err := automation.CheckSendHost(host); err != nil {
		return &stepError{msg: "host: " + err.Error()}
	}
	if !automation.HostAllowed(conn.AllowedHosts, host) {
		return &stepError{msg: automation.HostRefused(conn, host)}
	}
	return nil
}

// openDB opens (lazily: nothing is dialled yet) a pool for conn.
func (e *Engine) openDB(conn automation.Connection, cfg *automation.DatabaseConfig) (dbConn, error) {
	dial := guardedDialer(e.allowPrivate)
	switch conn.Type {
	case automation.ConnectionPostgres:
		dsn := cfg.URL.Reveal()
		if dsn == "" {
			u := url.URL{Scheme: "postgres", User: url.UserPassword(cfg.Username, cfg.Password.Reveal()),
				Host: net.JoinHostPort(cfg.Host, strconv.Itoa(cmpInt(cfg.Port, 5432))), Path: "/" + cfg.Database}
			u.RawQuery = "sslmode=" + pgSSLMode(cfg.TLS)
			dsn = u.String()
		}
		pc, err := pgx.ParseConfig(dsn)
		if err != nil {
			return dbConn{}, &stepError{msg: "connection " + conn.ID + ": the database URL is not valid"}
		}
		if len(pc.Fallbacks) > 0 {
			return dbConn{}, &stepError{msg: "connection " + conn.ID + ": one database host only"}
		}
		if err := fenced(conn, pc.Host); err != nil {
			return dbConn{}, err
		}
		pc.DialFunc = dial.DialContext
		pc.ConnectTimeout = sqlDialTimeout
		// A cancelled statement is cancelled on the server too (a cancel
		// request), not only abandoned by the client: pg_sleep(60) stops.
		pc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 2 * time.Second}
		}
		return dbConn{db: stdlib.OpenDB(*pc), system: automation.OutboundPostgres, host: pc.Host, port: int(pc.Port)}, nil
	case automation.ConnectionMySQL:
		registerMySQL.Do(func() {
			mysql.RegisterDialContext(mysqlGuarded, func(ctx context.Context, addr string) (net.Conn, error) {
				return guardedDialer(false).DialContext(ctx, "tcp", addr)
			})
			mysql.RegisterDialContext(mysqlOpen, func(ctx context.Context, addr string) (net.Conn, error) {
				return guardedDialer(true).DialContext(ctx, "tcp", addr)
			})
		})
		mc := mysql.NewConfig()
		if raw := cfg.URL.Reveal(); raw != "" {
			u, err := url.Parse(raw)
			if err != nil {
				return dbConn{}, &stepError{msg: "connection " + conn.ID + ": the database URL is not valid"}
			}
			mc.User = u.User.Username()
			mc.Passwd, _ = u.User.Password()
			mc.Addr = net.JoinHostPort(u.Hostname(), cmpStr(u.Port(), "3306"))
			mc.DBName = strings.TrimPrefix(u.Path, "/")
			mc.TLSConfig = mysqlTLS(cmpStr(u.Query().Get("tls"), cfg.TLS))
		} else {
			mc.User, mc.Passwd, mc.DBName = cfg.Username, cfg.Password.Reveal(), cfg.Database
			mc.Addr = net.JoinHostPort(cfg.Host, strconv.Itoa(cmpInt(cfg.Port, 3306)))
			mc.TLSConfig = mysqlTLS(cfg.TLS)
		}
		host, port, _ := net.SplitHostPort(mc.Addr)
		if err := fenced(conn, host); err != nil {
			return dbConn{}, err
		}
		mc.Net = mysqlGuarded
		if e.allowPrivate {
			mc.Net = mysqlOpen
		}
		mc.Timeout = sqlDialTimeout
		mc.ParseTime = true
		mc.InterpolateParams = false // parameters travel apart from the statement
		mc.MultiStatements = false
		c, err := mysql.NewConnector(mc)
		if err != nil {
			return dbConn{}, &stepError{msg: "connection " + conn.ID + ": " + err.Error()}
		}
		n, _ := strconv.Atoi(port)
		return dbConn{db: sql.OpenDB(c), system: automation.OutboundMySQL, host: host, port: n}, nil
	}
	return dbConn{}, &stepError{msg: fmt.Sprintf("connection %s (%s) is a %s connection; a SQL step needs POSTGRES or MYSQL", conn.ID, conn.Name, conn.Type)}
}

func pgSSLMode(tls string) string {
	switch tls {
	case "disable", "verify-full":
		return tls
	}
	return "require"
}

func mysqlTLS(tls string) string {
	switch tls {
	case "disable", "false":
		return "false"
	case "verify-full", "true":
		return "true"
	}
	return "skip-verify" // require: encrypted, as POSTGRES's require
}

func cmpInt(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func cmpStr(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// sql runs a SQL step: output {"rows": [...], "rowCount", "columns"}.
func (x *execution) sql(ctx context.Context, s automation.Step) (_ any, err error) {
	id, se := x.connectionID(s)
	if se != nil {
		return nil, se
	}
	if x.e.creds == nil {
		return nil, &stepError{msg: "connection " + id + ": no credential store is configured"}
	}
	conn, v, err := x.e.creds.ConnectionCredential(ctx, x.flow.Project, id)
	if err != nil {
		var ae *automation.Error
		if errors.As(err, &ae) {
			return nil, &stepError{msg: ae.Message}
		}
		return nil, &stepError{msg: fmt.Sprintf("connection %s: reading the credential failed: %v", id, err), retryable: true}
	}
	if v.Database == nil {
		return nil, &stepError{msg: fmt.Sprintf("connection %s (%s) is a %s connection; a SQL step needs POSTGRES or MYSQL", conn.ID, conn.Name, conn.Type)}
	}
	var secrets []string
	for _, m := range v.Masks {
		secrets = append(secrets, m.Reveal())
	}
	secrets = append(automation.SecretMasks(secrets), secrets...)
	masked := func(msg string, retry bool) *stepError {
		return &stepError{msg: mask(msg, secrets), retryable: retry}
	}

	args, err := x.sqlParams(s)
	if err != nil {
		return nil, fail(false, err)
	}
	timeout, err := s.SQLTimeout()
	if err != nil {
		return nil, fail(false, err)
	}
	maxRows := s.MaxRows
	if maxRows <= 0 {
		maxRows = flowdef.DefaultSQLMaxRows
	}
	dc, release, err := x.e.pool(conn, v.Database)
	if err != nil {
		var se *stepError
		if errors.As(err, &se) {
			se.msg = mask(se.msg, secrets)
			return nil, se
		}
		return nil, masked(err.Error(), true)
	}
	defer release()
	// The statement's span ends with the step: it covers the rows' reading
	// too, and records only the kind of a failure.
	endSpan := x.startOutbound(ctx, dc.system, dc.host, dc.port)
	defer func() { endSpan(err) }()

	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	q := s.Query.SQL
	if !returnsRows(q) {
		res, err := dc.db.ExecContext(qctx, q, args...)
		if err != nil {
			return nil, x.sqlError(ctx, qctx, err, timeout, masked)
		}
		n, _ := res.RowsAffected()
		return map[string]any{"rows": []any{}, "rowCount": n, "columns": []any{}}, nil
	}
	rows, err := dc.db.QueryContext(qctx, q, args...)
	if err != nil {
		return nil, x.sqlError(ctx, qctx, err, timeout, masked)
	}
	defer func() {
		// Cancel first: a driver drains what is left of a result when its
		// rows close, and a cancelled statement has nothing left to drain.
		cancel()
		rows.Close()
	}()
	cols, err := rows.Columns()
	if err != nil {
		return nil, x.sqlError(ctx, qctx, err, timeout, masked)
	}
	out := []any{}
	var size int64
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if len(out) == maxRows {
			return nil, &stepError{msg: fmt.Sprintf("the statement returned more than maxRows (%d) rows: the step stopped it; narrow the query (WHERE, LIMIT) or raise maxRows (at most %d)", maxRows, flowdef.MaxSQLRows)}
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, masked("reading a row: "+err.Error(), false)
		}
		row := make(map[string]any, len(cols))
		for i, c := range cols {
			row[c] = sqlValue(vals[i])
			size += int64(len(c)) + valueSize(row[c])
		}
		if size > x.e.maxOutput {
			return nil, &stepError{msg: fmt.Sprintf("the rows of the statement come to more than %d bytes (the step's output limit) after %d rows; select fewer columns or rows", x.e.maxOutput, len(out))}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, x.sqlError(ctx, qctx, err, timeout, masked)
	}
	columns := make([]any, len(cols))
	for i, c := range cols {
		columns[i] = c
	}
	return map[string]any{"rows": out, "rowCount": len(out), "columns": columns}, nil
}

// sqlError classifies a database failure: the step's timeout and the run
// ending are named; a refused dial (SSRF guard) fails for good; network
// trouble may pass; what the database refused (syntax, constraint) will
// not.
func (x *execution) sqlError(ctx, qctx context.Context, err error, timeout time.Duration, masked func(string, bool) *stepError) *stepError {
	var pe *privateAddrError
	switch {
	case errors.As(err, &pe):
		return masked("database: "+pe.Error(), false)
	case ctx.Err() != nil:
		return &stepError{msg: "database: the run ended", retryable: true}
	case errors.Is(qctx.Err(), context.DeadlineExceeded):
		return &stepError{msg: fmt.Sprintf("the statement was stopped after its timeout (%s)", timeout)}
	}
	var pgErr *pgconn.PgError
	var myErr *mysql.MySQLError
	if errors.As(err, &pgErr) || errors.As(err, &myErr) {
		return masked("database: "+err.Error(), false)
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, sql.ErrConnDone) {
		return masked("database: "+err.Error(), true)
	}
	return masked("database: "+err.Error(), false)
}

// returnsRows says whether a statement answers rows (read with Query) or
// only a count (Exec): by its first word, or a RETURNING clause.
func returnsRows(q string) bool {
	f := strings.Fields(strings.ToLower(q))
	if len(f) == 0 {
		return false
	}
	switch f[0] {
	case "select", "with", "show", "values", "table", "explain", "describe", "desc", "(select":
		return true
	}
	return strings.Contains(strings.ToLower(q), "returning")
}

// sqlParams renders the step's params: each a template or any JSON value.
// An integral number goes as an integer, an object or a list as its JSON.
func (x *execution) sqlParams(s automation.Step) ([]any, error) {
	if len(s.Params) == 0 {
		return nil, nil
	}
	var raw []any
	if err := json.Unmarshal(s.Params, &raw); err != nil {
		return nil, fmt.Errorf("params must be a JSON array")
	}
	args := make([]any, len(raw))
	for i, p := range raw {
		v, err := x.e.checker.evalValue(p, x.env)
		if err != nil {
			return nil, fmt.Errorf("params[%d]: %w", i, err)
		}
		switch t := v.(type) {
		case float64:
			if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
				v = int64(t)
			}
		case int:
			v = int64(t)
		case map[string]any, []any:
			b, err := json.Marshal(t)
			if err != nil {
				return nil, fmt.Errorf("params[%d]: %w", i, err)
			}
			v = string(b)
		}
		args[i] = v
	}
	return args, nil
}

// sqlValue turns a scanned value into JSON's kinds: text as a string,
// bytes that are not text as base64, times as RFC 3339.
func sqlValue(v any) any {
	switch t := v.(type) {
	case []byte:
		if utf8.Valid(t) {
			return string(t)
		}
		return base64.StdEncoding.EncodeToString(t)
	case time.Time:
		return t.UTC().Format(time.RFC3339Nano)
	case int64, float64, bool, string, nil:
		return t
	}
	return fmt.Sprint(v)
}

func valueSize(v any) int64 {
	if s, ok := v.(string); ok {
		return int64(len(s)) + 2
	}
	return 8
}
