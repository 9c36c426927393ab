package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"flowservice/internal/testwait"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"flowservice/internal/dbtest"
	"flowservice/pkg/automation"
)

// dbCreds serves database connections by name, as the Service does.
type dbCreds struct {
	mu    sync.Mutex
	conns map[string]automation.Connection
	cfgs  map[string]automation.DatabaseConfig
}

func newDBCreds() *dbCreds {
	return &dbCreds{conns: map[string]automation.Connection{}, cfgs: map[string]automation.DatabaseConfig{}}
}

func (d *dbCreds) add(id string, typ automation.ConnectionType, cfg automation.DatabaseConfig, hosts ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.conns[id] = automation.Connection{ID: id, Project: "p1", Name: id, Type: typ, Status: automation.ConnectionActive, AllowedHosts: hosts}
	d.cfgs[id] = cfg
}

func (d *dbCreds) ConnectionCredential(_ context.Context, project, id string) (automation.Connection, automation.ConnectionValue, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c, ok := d.conns[id]
	if !ok {
		return c, automation.ConnectionValue{}, &automation.Error{Kind: automation.ErrNotFound, Message: "connection " + id + " was deleted or does not exist"}
	}
	cfg := d.cfgs[id]
	v := automation.ConnectionValue{Database: &cfg}
	if cfg.Password != "" {
		v.Masks = []automation.Secret{cfg.Password}
	}
	return c, v, nil
}

func (d *dbCreds) SetConnectionStatus(context.Context, string, string, automation.ConnectionStatus) error {
	return nil
}

func (d *dbCreds) ConnectionIDsByName(context.Context, string) (map[string][]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string][]string{}
	for id := range d.conns {
		out[id] = []string{id}
	}
	return out, nil
}

func sqlStep(name, conn, query, params string, maxRows int, timeout string) automation.Step {
	s := automation.Step{Name: name, Type: automation.StepSQL, Connection: conn, Query: automation.Query{SQL: query},
		MaxRows: maxRows, Timeout: timeout}
	if params != "" {
		s.Params = json.RawMessage(params)
	}
	return s
}

// runSQL runs one flow and returns its run.
func runSQL(t *testing.T, e *Engine, body string, steps ...automation.Step) automation.Run {
	t.Helper()
	return e.Execute(context.Background(), flowOf(steps...), runOf(body)).Run
}

// sqlRows decodes a SQL step's output.
func sqlRows(t *testing.T, r automation.Run, i int) (rows []map[string]any, count float64, cols []any) {
	t.Helper()
	var out struct {
		Rows     []map[string]any `json:"rows"`
		RowCount float64          `json:"rowCount"`
		Columns  []any            `json:"columns"`
	}
	if err := json.Unmarshal(r.Steps[i].Output, &out); err != nil {
		t.Fatalf("step %d output %s: %v (error %q)", i, r.Steps[i].Output, err, r.Steps[i].Error)
	}
	return out.Rows, out.RowCount, out.Columns
}

// hostileInput is a value that would end the statement were it spliced.
const hostileInput = `x'); DROP TABLE users; --`

// testSQLBackend is what both databases must do: params stay data, output
// shape, a statement over its timeout is stopped (and the server answers
// the next), a huge result is stopped by maxRows.
func testSQLBackend(t *testing.T, e *Engine, conn, placeholder1, placeholder2, sleep, crossJoin string) {
	ph := func(q string) string {
		return strings.NewReplacer("$1", placeholder1, "$2", placeholder2).Replace(q)
	}
	r := runSQL(t, e, `{"name": "`+strings.ReplaceAll(hostileInput, `"`, `\"`)+`", "n": 7}`,
		sqlStep("create", conn, "create table users (id integer, name varchar(200))", "", 0, ""),
		sqlStep("insert", conn, ph("insert into users (id, name) values ($1, $2)"), `["{{ trigger.body.n }}", "{{ trigger.body.name }}"]`, 0, ""),
		sqlStep("read", conn, ph("select id, name from users where name = $1"), `["{{ trigger.body.name }}"]`, 0, ""),
		sqlStep("count", conn, "select count(*) as n from users", "", 0, ""),
	)
	if r.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	if _, n, _ := sqlRows(t, r, 1); n != 1 {
		t.Errorf("insert rowCount %v, want 1", n)
	}
	rows, n, cols := sqlRows(t, r, 2)
	if n != 1 || len(rows) != 1 || rows[0]["name"] != hostileInput || rows[0]["id"] != float64(7) || fmt.Sprint(cols) != "[id name]" {
		t.Errorf("read: rows %v, rowCount %v, columns %v: the hostile value must come back as data", rows, n, cols)
	}
	if rows, _, _ := sqlRows(t, r, 3); fmt.Sprint(rows[0]["n"]) != "1" {
		t.Errorf("the table holds %v rows, want 1: nothing was dropped", rows[0]["n"])
	}

	// A statement past its timeout is stopped, and the server goes on.
	start := time.Now()
	r = runSQL(t, e, `{}`, sqlStep("sleep", conn, sleep, "", 0, "1s"))
	if r.Status != automation.RunFailed || !strings.Contains(r.Steps[0].Error, "stopped after its timeout (1s)") {
		t.Errorf("sleep: run %s, %q", r.Status, r.Steps[0].Error)
	}
	if d := time.Since(start); d > 40*time.Second {
		t.Errorf("the 60s statement took %s to stop", d)
	}
	// A result far over maxRows is stopped at maxRows, not read whole.
	r = runSQL(t, e, `{}`, sqlStep("big", conn, crossJoin, "", 1000, "50s"))
	if r.Status != automation.RunFailed || !strings.Contains(r.Steps[0].Error, "more than maxRows (1000) rows") {
		t.Errorf("cross join: run %s, %q", r.Status, r.Steps[0].Error)
	}
	r = runSQL(t, e, `{}`, sqlStep("after", conn, "select 1 as one", "", 0, ""))
	if rows, _, _ := sqlRows(t, r, 0); len(rows) != 1 {
		t.Errorf("the server does not answer after the hostile statements: %v %s", rows, r.Steps[0].Error)
	}
}

func TestSQLPostgres(t *testing.T) {
	port := dbtest.StartPostgres(t)
	creds := newDBCreds()
	creds.add("pg", automation.ConnectionPostgres, automation.DatabaseConfig{Host: "127.0.0.1", Port: port,
		Database: "postgres", Username: "postgres", TLS: "disable"})
	e := newEngine(t, creds, true)
	testSQLBackend(t, e, "pg", "$1", "$2", "select pg_sleep(60)",
		"select a.x, b.y from generate_series(1, 1000) a(x) cross join generate_series(1, 1000) b(y)")

	// The sleep was cancelled on the server, not only abandoned.
	admin, err := sql.Open("pgx", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var n int
	// The cancel request reaches the server on its own connection: wait
	// for the backend to end, bounded by Hang (the statement alone would
	// run a minute).
	testwait.Event(t, "pg_sleep(60) to end on the server", func() bool {
		if err := admin.QueryRow(`select count(*) from pg_stat_activity where state = 'active' and query like '%pg_sleep(60)%' and pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	if n != 0 {
		t.Errorf("pg_sleep(60) still runs on the server after the step's timeout")
	}
}

func TestSQLMariaDB(t *testing.T) {
	port := dbtest.StartMariaDB(t)
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dbtest.WaitReady(t, db, "mariadbd")
	if _, err := db.Exec("create database flows"); err != nil {
		t.Fatal(err)
	}
	creds := newDBCreds()
	creds.add("my", automation.ConnectionMySQL, automation.DatabaseConfig{Host: "127.0.0.1", Port: port,
		Database: "flows", Username: "root", TLS: "disable"})
	e := newEngine(t, creds, true)
	testSQLBackend(t, e, "my", "?", "?", "select sleep(60)",
		"select a.seq, b.seq from seq_1_to_1000 a cross join seq_1_to_1000 b")
}

// TestSQLHostGuards: the database host is refused by the SSRF guard when
// private networks are not allowed, and outside the connection's
// allowedHosts; neither dials.
func TestSQLHostGuards(t *testing.T) {
	creds := newDBCreds()
	creds.add("local", automation.ConnectionPostgres, automation.DatabaseConfig{Host: "127.0.0.1", Port: 1, Username: "u", TLS: "disable"})
	creds.add("fenced", automation.ConnectionMySQL, automation.DatabaseConfig{Host: "10.1.2.3", Username: "u"}, "db.example.com")
	e := newEngine(t, creds, false)
	r := runSQL(t, e, `{}`, sqlStep("q", "local", "select 1", "", 0, "5s"))
	if r.Status != automation.RunFailed || !strings.Contains(r.Steps[0].Error, "is private (loopback)") {
		t.Errorf("loopback database: %s %q", r.Status, r.Steps[0].Error)
	}
	r = runSQL(t, e, `{}`, sqlStep("q", "fenced", "select 1", "", 0, "5s"))
	if r.Status != automation.RunFailed || !strings.Contains(r.Steps[0].Error, "may only be sent to db.example.com: refused to send it to 10.1.2.3") {
		t.Errorf("fenced database: %s %q", r.Status, r.Steps[0].Error)
	}
}

// TestSQLPoolsBounded: one project keeps at most SQLPoolsPerProject pools
// (the least recently used idle one is closed), and a pool idle longer
// than SQLPoolIdle is closed at the next use of any.
func TestSQLPoolsBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := New(Config{AllowPrivateNetworks: true, Clock: clock})
	for i := range SQLPoolsPerProject + 2 {
		c := automation.Connection{ID: fmt.Sprintf("c%d", i), Project: "p1", Type: automation.ConnectionPostgres}
		_, release, err := e.pool(c, &automation.DatabaseConfig{Host: "127.0.0.1", Port: 1, Username: "u", TLS: "disable"})
		if err != nil {
			t.Fatal(err)
		}
		release()
	}
	if n := e.poolCount(); n != SQLPoolsPerProject {
		t.Errorf("%d pools open for one project, want %d", n, SQLPoolsPerProject)
	}
	// Another project has its own.
	c := automation.Connection{ID: "other", Project: "p2", Type: automation.ConnectionPostgres}
	_, release, err := e.pool(c, &automation.DatabaseConfig{Host: "127.0.0.1", Port: 1, Username: "u", TLS: "disable"})
	if err != nil {
		t.Fatal(err)
	}
	if n := e.poolCount(); n != SQLPoolsPerProject+1 {
		t.Errorf("%d pools, want %d", n, SQLPoolsPerProject+1)
	}
	mu.Lock()
	now = now.Add(SQLPoolIdle + time.Second)
	mu.Unlock()
	release()
	// "other" was in use until now: only the idle ones go.
	_, release, _ = e.pool(c, &automation.DatabaseConfig{Host: "127.0.0.1", Port: 1, Username: "u", TLS: "disable"})
	release()
	if n := e.poolCount(); n != 1 {
		t.Errorf("%d pools after %s idle, want 1 (the one just used)", n, SQLPoolIdle)
	}
}
