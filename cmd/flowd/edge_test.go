package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The data directory is narrowed to its owner at start, and the database
// files are created 0600.
func TestDataDirPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	startFlowd(t, dir)
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m := st.Mode().Perm(); m != 0o700 {
		t.Errorf("data dir mode %o, want 700", m)
	}
	for _, name := range []string{"flowd.db", "flowd.db-wal", "flowd.db-shm", "secrets.key", "initial-api-key"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("%s mode %o, want 600", name, m)
		}
	}
}
