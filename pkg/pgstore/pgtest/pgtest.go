// Package pgtest starts a throwaway PostgreSQL cluster for tests: initdb
// into a temporary directory, the server on a free loopback port with its
// unix socket in that directory, stopped by its PID and removed at the end.
// One cluster serves a whole test binary (Main); each test gets a schema of
// its own (Schema), which is far cheaper than a cluster or a database per
// test and isolates as well for flowd's tables.
//
// The server binaries come from Debian's postgresql package. When they are
// missing every test that asks for a database fails, naming the package:
// the contract suite on PostgreSQL is part of make test, so a machine
// without the binaries must not pass it by skipping.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoBinaries says the PostgreSQL server binaries are missing, and how to
// get them.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found on PATH or in /usr/lib/postgresql/*/bin: install Debian's postgresql package (apt-get install postgresql), or run make tools-check")

// Cluster is one running throwaway PostgreSQL server.
type Cluster struct {
	Dir  string // the data directory's parent: data/, the socket and the log
	Port int
	bin  string // directory holding initdb, pg_ctl and postgres
	// settings are more server settings (name=value), StartWith's.
	settings []string
	cred     *syscall.Credential
	pid      int
}

// superuser is the cluster's one role; authentication is trust on the
// loopback address and the socket, which only the test's user can reach.
const superuser = "flowd"

// FindBinaries returns the directory of initdb and pg_ctl: PATH first, then
// the newest /usr/lib/postgresql/<version>/bin.
func FindBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			// /usr/local/bin/initdb may be a symlink to the version's bin.
			if real, err := filepath.EvalSymlinks(p); err == nil {
				p = real
			}
			dir := filepath.Dir(p)
			if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
				return dir, nil
			}
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
				return d, nil
			}
		}
	}
	return "", ErrNoBinaries
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start creates and starts a cluster in a new temporary directory. As
// root, initdb refuses to run, so the cluster runs as the postgres user
// (or nobody) and the directory is given to it.
func Start() (*Cluster, error) { return StartWith() }

// StartWith is Start with more server settings, each name=value (such as
// shared_preload_libraries=pg_stat_statements, for a benchmark that counts
// statements).
func StartWith(settings ...string) (*Cluster, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "flowd-pgtest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, bin: bin, settings: settings}
	if os.Geteuid() == 0 {
		cred, err := unprivileged()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		c.cred = cred
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if out, err := c.cmd("initdb", "-D", c.data(), "-U", superuser, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	// A port found free may be taken before the server binds it: try again
	// on another.
	for attempt := 0; ; attempt++ {
		c.Port, err = freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err = c.start(); err == nil {
			return c, nil
		}
		if attempt == 2 {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

func (c *Cluster) data() string { return filepath.Join(c.Dir, "data") }

func (c *Cluster) cmd(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

func (c *Cluster) start() error {
	// Durability is off: the cluster dies with the test binary. Enough
	// connections for the parallel tests' pools.
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 -c shared_buffers=32MB",
		c.Port, c.Dir)
	for _, s := range c.settings {
		opts += " -c " + s
	}
	log := filepath.Join(c.Dir, "server.log")
	if out, err := c.cmd("pg_ctl", "start", "-D", c.data(), "-w", "-t", "120", "-l", log, "-o", opts).CombinedOutput(); err != nil {
		tail, _ := os.ReadFile(log)
		return fmt.Errorf("pgtest: pg_ctl start: %w\n%s\n%s", err, out, tail)
	}
	pidFile, err := os.ReadFile(filepath.Join(c.data(), "postmaster.pid"))
	if err != nil {
		return fmt.Errorf("pgtest: read postmaster.pid: %w", err)
	}
	c.pid, err = strconv.Atoi(strings.TrimSpace(strings.SplitN(string(pidFile), "\n", 2)[0]))
	if err != nil {
		return fmt.Errorf("pgtest: postmaster.pid: %w", err)
	}
	return nil
}

// Stop stops the server at once (its data is thrown away) and removes the
// directory. The postmaster is signalled by its PID, never by name.
func (c *Cluster) Stop() error {
	var err error
	if c.pid > 0 {
		if out, serr := c.cmd("pg_ctl", "stop", "-D", c.data(), "-m", "immediate", "-w", "-t", "30").CombinedOutput(); serr != nil {
			err = fmt.Errorf("pgtest: pg_ctl stop: %w: %s", serr, out)
			_ = syscall.Kill(c.pid, syscall.SIGQUIT)
		}
	}
	return errors.Join(err, os.RemoveAll(c.Dir))
}

// URL is the connection URL of database db ("postgres" for the default).
func (c *Cluster) URL(db string) string {
	return (&url.URL{Scheme: "postgres", User: url.User(superuser), Host: fmt.Sprintf("127.0.0.1:%d", c.Port),
		Path: "/" + db, RawQuery: "sslmode=disable"}).String()
}

var schemaSeq atomic.Int64

// NewSchema creates an empty schema and returns a URL whose connections
// use it (search_path), so that the tables a store creates there are the
// test's alone.
func (c *Cluster) NewSchema(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), schemaSeq.Add(1))
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: connect: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		return "", fmt.Errorf("pgtest: create schema: %w", err)
	}
	return c.URL("postgres") + "&search_path=" + name, nil
}

func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("pgtest: running as root, and neither a postgres nor a nobody user exists to run initdb as")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// The cluster of this test binary, started on first use and stopped by
// Main.
var (
	shared     *Cluster
	sharedErr  error
	sharedOnce sync.Once
)

// Main runs a test binary's tests and then stops the cluster they started,
// if any: call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if err := StopShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// StopShared stops the test binary's cluster if a test started it: for a
// TestMain that has more to clean up than Main does.
func StopShared() error {
	if shared == nil {
		return nil
	}
	return shared.Stop()
}

// Shared returns the test binary's cluster, starting it on first use. A
// test binary that calls it must stop it with Main.
func Shared() (*Cluster, error) {
	sharedOnce.Do(func() {
		start := time.Now()
		shared, sharedErr = Start()
		if sharedErr == nil {
			fmt.Fprintf(os.Stderr, "pgtest: PostgreSQL on 127.0.0.1:%d in %s (started in %s)\n", shared.Port, shared.Dir, time.Since(start).Round(time.Millisecond))
		}
	})
	return shared, sharedErr
}

// URL returns the URL of a new, empty schema on the test binary's cluster
// for t; the test fails (not skips) when PostgreSQL is not installed.
func URL(t testing.TB) string {
	t.Helper()
	c, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	u, err := c.NewSchema(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}
