package sealedsecrets_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
	"flowservice/pkg/sealedsecrets"
	"flowservice/pkg/sqlitestore"
)

func openStore(t *testing.T, path string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, sealedsecrets.KeySize)
	_, _ = rand.Read(k)
	return k
}

func newSecrets(t *testing.T, blobs sealedsecrets.BlobStore, key []byte) *sealedsecrets.Secrets {
	t.Helper()
	s, err := sealedsecrets.New(blobs, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) {
	storetest.RunSecrets(t, func(t *testing.T) automation.Secrets {
		return newSecrets(t, openStore(t, filepath.Join(t.TempDir(), "s.db")), newKey(t))
	})
}

// TestNoPlaintextAtRest stores a credential as the Service does and looks for
// it in every file SQLite writes, while open and after close.
func TestNoPlaintextAtRest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "flows.db")
	key := newKey(t)
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s := newSecrets(t, st, key)

	const apiKey = "sk_live_PLAINTEXT-MARKER-7f3a9c2e51"
	value := []byte(`{"apiKey":"` + apiKey + `","header":"X-Api-Key"}`)
	project := automation.NewID(automation.PrefixProject)
	name := automation.ConnectionSecretName(automation.NewID(automation.PrefixConnection))
	// Several versions, as a key rotated by re-creating the connection would.
	for range 3 {
		if err := s.PutSecret(ctx, project, name, value); err != nil {
			t.Fatal(err)
		}
	}
	sealed, err := st.Blob(ctx, project, name)
	if err != nil {
		t.Fatal(err)
	}

	files := func() map[string][]byte {
		out := map[string][]byte{}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			b, err := os.ReadFile(path + suffix)
			if errors.Is(err, os.ErrNotExist) {
				continue // the WAL files go away with the last connection
			} else if err != nil {
				t.Fatal(err)
			}
			out[filepath.Base(path+suffix)] = b
		}
		return out
	}
	check := func(when string) {
		t.Helper()
		fs := files()
		var all []byte
		for name, b := range fs {
			all = append(all, b...)
			for _, needle := range []string{apiKey, "PLAINTEXT-MARKER"} {
				if bytes.Contains(b, []byte(needle)) {
					t.Errorf("%s: %s holds the plaintext %q", when, name, needle)
				}
			}
		}
		// The files are the right ones: the ciphertext itself is in them.
		if !bytes.Contains(all, sealed) {
			t.Errorf("%s: the sealed value is in none of %d files; the check looked in the wrong place", when, len(fs))
		}
	}
	check("while open")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	check("after close")

	// And it opens again with the key.
	st2 := openStore(t, path)
	got, err := newSecrets(t, st2, key).Secret(ctx, project, name)
	if err != nil || !bytes.Equal(got, value) {
		t.Fatalf("after reopen: Secret = %q, %v; want %q", got, err, value)
	}
	if _, err := newSecrets(t, st2, newKey(t)).Secret(ctx, project, name); err == nil {
		t.Error("another key opened the secret")
	}
}

func TestTampering(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "t.db"))
	s := newSecrets(t, st, newKey(t))
	const project, name = "prj_a", "connections/con_a"
	value := []byte(`{"apiKey":"tamper-me"}`)
	if err := s.PutSecret(ctx, project, name, value); err != nil {
		t.Fatal(err)
	}
	sealed, err := st.Blob(ctx, project, name)
	if err != nil {
		t.Fatal(err)
	}
	// Every byte matters: format, nonce, ciphertext and tag.
	for i := range sealed {
		b := bytes.Clone(sealed)
		b[i] ^= 0x01
		if err := st.PutBlob(ctx, project, name, b); err != nil {
			t.Fatal(err)
		}
		got, err := s.Secret(ctx, project, name)
		if err == nil || got != nil {
			t.Fatalf("byte %d flipped: Secret = %q, %v; want an error", i, got, err)
		}
		if errors.Is(err, automation.ErrNotFound) {
			t.Fatalf("byte %d flipped: %v; a tampered secret is not a missing one", i, err)
		}
		if strings.Contains(err.Error(), "tamper-me") {
			t.Fatalf("the error shows the value: %v", err)
		}
	}
	for _, b := range [][]byte{nil, sealed[:10], sealed[:len(sealed)-1]} {
		if err := st.PutBlob(ctx, project, name, b); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Secret(ctx, project, name); err == nil {
			t.Fatalf("a truncated value (%d bytes) opened", len(b))
		}
	}
	// The untouched value still opens.
	if err := st.PutBlob(ctx, project, name, sealed); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Secret(ctx, project, name); err != nil || !bytes.Equal(got, value) {
		t.Fatalf("original: Secret = %q, %v", got, err)
	}
}

// TestMovedValue copies a sealed value to another name and another project:
// it must not open there.
func TestMovedValue(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "m.db"))
	s := newSecrets(t, st, newKey(t))
	const project, name = "prj_a", "connections/con_a"
	if err := s.PutSecret(ctx, project, name, []byte("credential of a")); err != nil {
		t.Fatal(err)
	}
	sealed, err := st.Blob(ctx, project, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []struct{ project, name string }{
		{project, "connections/con_b"},
		{"prj_b", name},
		// The separator keeps (project, name) pairs apart that concatenate alike.
		{"prj_a\x00connections", "con_a"},
	} {
		if err := st.PutBlob(ctx, to.project, to.name, sealed); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Secret(ctx, to.project, to.name); err == nil {
			t.Errorf("value moved to (%q, %q) opened: %q", to.project, to.name, got)
		}
	}
}

func TestFreshNonce(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "n.db"))
	s := newSecrets(t, st, newKey(t))
	seen := map[string]bool{}
	for range 5 {
		if err := s.PutSecret(ctx, "p", "n", []byte("same value")); err != nil {
			t.Fatal(err)
		}
		b, err := st.Blob(ctx, "p", "n")
		if err != nil {
			t.Fatal(err)
		}
		if seen[string(b)] {
			t.Fatal("the same value sealed twice gave the same bytes: the nonce is reused")
		}
		seen[string(b)] = true
	}
}

func TestNew(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "k.db"))
	for _, n := range []int{0, 16, 24, 31, 33} {
		if _, err := sealedsecrets.New(st, make([]byte, n)); err == nil {
			t.Errorf("New with a %d-byte key succeeded", n)
		}
	}
	if _, err := sealedsecrets.New(nil, newKey(t)); err == nil {
		t.Error("New without a BlobStore succeeded")
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "secrets.key")
	k1, err := sealedsecrets.LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != sealedsecrets.KeySize || bytes.Equal(k1, make([]byte, sealedsecrets.KeySize)) {
		t.Fatalf("new key = %x", k1)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("key file mode = %04o, want 0600", perm)
	}
	k2, err := sealedsecrets.LoadOrCreateKey(path)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("second load = %x, %v; want the same key", k2, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".key-*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}

	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = sealedsecrets.LoadOrCreateKey(path)
	if err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable key file: err = %v, want one saying chmod 600", err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := sealedsecrets.LoadOrCreateKey(path); err == nil {
		t.Error("group-readable key file accepted")
	}

	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sealedsecrets.LoadOrCreateKey(short); err == nil {
		t.Error("a 9-byte key file accepted")
	}
	if _, err := sealedsecrets.LoadOrCreateKey(filepath.Join(dir, "no", "such", "dir", "k")); err == nil {
		t.Error("a key file in a missing directory: no error")
	}
}

// TestLoadOrCreateKeyRace starts several creators at once, as flowd and
// flowctl might on a fresh data directory: all end up with one key.
func TestLoadOrCreateKeyRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "race.key")
	const n = 8
	keys := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { keys[i], errs[i] = sealedsecrets.LoadOrCreateKey(path) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("creator %d: %v", i, errs[i])
		}
		if !bytes.Equal(keys[i], keys[0]) {
			t.Fatalf("creator %d got another key", i)
		}
	}
}
