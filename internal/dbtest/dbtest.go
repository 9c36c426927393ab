// Package dbtest starts throwaway database servers for tests (docs/architecture.md).
package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Throwaway database servers for the SQL step's tests: a PostgreSQL
// cluster (initdb, pg_ctl) and a MariaDB server (mariadb-install-db,
// mariadbd), each in a temporary directory on a free 127.0.0.1 port,
// stopped by PID when the test ends. As root, the servers run as their
// Debian system users, which initdb and mariadbd require.

// freePort is a port nobody listens on at the moment.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// findBin finds a server binary in PATH or in Debian's versioned dirs.
func findBin(name string, globs ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, g := range globs {
		if m, _ := filepath.Glob(filepath.Join(g, name)); len(m) > 0 {
			return m[len(m)-1]
		}
	}
	return ""
}

// serverDir makes a directory the server's user owns.
func serverDir(t *testing.T, owner string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "flowd-db-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup(owner)
		if err != nil {
			t.Skipf("running as root and there is no %s user to run the server as", owner)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// as runs a command as owner when root (initdb refuses root).
func as(owner, bin string, args ...string) *exec.Cmd {
	if os.Geteuid() == 0 {
		return exec.Command("runuser", append([]string{"-u", owner, "--", bin}, args...)...)
	}
	return exec.Command(bin, args...)
}

// waitReady pings db until it answers, at most a minute (a loaded machine
// starts servers slowly).
func WaitReady(t *testing.T, db *sql.DB, what string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not start: %v", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startPostgres starts a cluster and returns its port; user postgres, no
// password (trust on 127.0.0.1).
func StartPostgres(t *testing.T) int {
	t.Helper()
	initdb := findBin("initdb", "/usr/lib/postgresql/*/bin")
	pgctl := findBin("pg_ctl", "/usr/lib/postgresql/*/bin")
	if initdb == "" || pgctl == "" {
		t.Skip("PostgreSQL is not installed (Debian: apt-get install postgresql)")
	}
	dir := serverDir(t, "postgres")
	data := filepath.Join(dir, "data")
	if out, err := as("postgres", initdb, "-D", data, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	port := freePort(t)
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=40", port, dir)
	if out, err := as("postgres", pgctl, "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "120", "-o", opts, "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	t.Cleanup(func() {
		// Stop by the postmaster's PID (its pid file's first line): a
		// fast shutdown, then wait for the file to go.
		b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
		if err != nil {
			return
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGINT)
			for range 600 {
				if syscall.Kill(pid, 0) != nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	})
	return port
}

// startMariaDB starts a server without grant tables (any user) and
// returns its port.
func StartMariaDB(t *testing.T) int {
	t.Helper()
	install := findBin("mariadb-install-db")
	server := findBin("mariadbd", "/usr/sbin")
	if install == "" || server == "" {
		t.Skip("MariaDB is not installed and could not be: apt-get install mariadb-server")
	}
	dir := serverDir(t, "mysql")
	data := filepath.Join(dir, "data")
	args := []string{"--no-defaults", "--datadir=" + data, "--skip-test-db", "--auth-root-authentication-method=normal"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=mysql")
	}
	if out, err := exec.Command(install, args...).CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := freePort(t)
	sargs := []string{"--no-defaults", "--datadir=" + data, "--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1",
		"--socket=" + filepath.Join(dir, "sock"), "--pid-file=" + filepath.Join(dir, "pid"), "--skip-grant-tables",
		"--skip-name-resolve", "--innodb-flush-log-at-trx-commit=0", "--log-error=" + filepath.Join(dir, "err.log")}
	if os.Geteuid() == 0 {
		sargs = append(sargs, "--user=mysql")
	}
	cmd := exec.Command(server, sargs...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("mariadbd: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	return port
}
