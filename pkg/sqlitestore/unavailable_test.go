package sqlitestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// A database that refuses writes (here read-only through QueryOnly, as a
// full disk or a read-only mount would) makes writes fail with
// ErrUnavailable, which clients see as 503 with Retry-After, while reads
// go on.
func TestWritesUnavailable(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "flowd.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateProject(ctx, automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "p", Plan: automation.PlanFree, Created: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	ro, err := Open(ctx, path, QueryOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if err := ro.Ping(ctx); err != nil {
		t.Errorf("Ping on a read-only store: %v", err)
	}
	if _, err := ro.ProjectByName(ctx, "p"); err != nil {
		t.Errorf("read on a read-only store: %v", err)
	}
	err = ro.CreateProject(ctx, automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "q", Plan: automation.PlanFree, Created: time.Now().UTC()})
	if !errors.Is(err, automation.ErrUnavailable) {
		t.Fatalf("write on a read-only store: %v, want ErrUnavailable", err)
	}
	var e *automation.Error
	if !errors.As(err, &e) || e.Code != "STORE_UNAVAILABLE" {
		t.Errorf("error %v: want code STORE_UNAVAILABLE", err)
	}
	// The cause stays in the error for the server's log.
	if !strings.Contains(err.Error(), "readonly") {
		t.Errorf("error %q lost its cause", err)
	}
}

// The database and its WAL companions are readable by their owner only,
// even where they existed with a wider mode.
func TestFileModes(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "flowd.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateProject(ctx, automation.Project{ID: automation.NewID(automation.PrefixProject), Name: "p", Plan: automation.PlanFree, Created: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("%s mode %o, want 600", filepath.Base(p), m)
		}
	}
	s.Close()
	// An old file with a wide mode is narrowed at the next Open.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Mode().Perm(); m != 0o600 {
		t.Errorf("reopened flowd.db mode %o, want 600", m)
	}
}
