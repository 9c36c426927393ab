// Package datadir opens a flowd data directory: the SQLite store, the sealed
// secrets over it, and the keys derived from the directory's key file. flowd
// and flowctl both open it, so they agree on every file name.
package datadir

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"flowservice/pkg/sealedsecrets"
	"flowservice/pkg/sqlitestore"
)

// File names inside a data directory.
const (
	DBFile         = "flowd.db"
	KeyFile        = "secrets.key"
	InitialKeyFile = "initial-api-key"
)

// Dir is an open data directory.
type Dir struct {
	Path      string
	Store     *sqlitestore.Store
	Secrets   *sealedsecrets.Secrets
	CursorKey []byte // authenticates page cursors; stable across restarts
}

// Open creates the directory (mode 0700) if needed, narrows an existing
// one to 0700 (it holds the secrets key and the database, which no other
// user may read), and opens what is in it. opts go to the store.
func Open(ctx context.Context, path string, opts ...sqlitestore.Option) (*Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("datadir: create %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o700); err != nil {
		return nil, fmt.Errorf("datadir: restrict %s to its owner: %w", path, err)
	}
	key, err := sealedsecrets.LoadOrCreateKey(filepath.Join(path, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("datadir: %w", err)
	}
	store, err := sqlitestore.Open(ctx, filepath.Join(path, DBFile), opts...)
	if err != nil {
		return nil, fmt.Errorf("datadir: %w", err)
	}
	secrets, err := sealedsecrets.New(store, key)
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("datadir: %w", err)
	}
	return &Dir{Path: path, Store: store, Secrets: secrets, CursorKey: CursorKey(key)}, nil
}

// LockFile is held by the one flowd process that runs flows on a directory.
const LockFile = "flowd.lock"

// LockExclusive takes the directory's lock file without waiting, so a second
// flowd on the same directory stops with a clear error instead of executing
// the same runs. The lock goes with the process, even on kill -9.
func (d *Dir) LockExclusive() (unlock func(), err error) { return Lock(d.Path) }

// Lock takes the lock file of the data directory at path, creating the
// directory (mode 0700) if needed but nothing else in it. flowd on AWS holds
// it too: it writes the initial key into the directory, and two servers on
// one directory would overwrite each other's.
func Lock(path string) (unlock func(), err error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("datadir: create %s: %w", path, err)
	}
	lock := filepath.Join(path, LockFile)
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("datadir: lock %s: %w", lock, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("datadir: %s is in use by another flowd (lock %s): %w", path, lock, err)
	}
	return func() { f.Close() }, nil
}

// Close closes the store.
func (d *Dir) Close() error { return d.Store.Close() }

// CursorKey is the key that authenticates page cursors and signs dashboard
// sessions, derived from the secrets key: flowd nodes on PostgreSQL derive
// it from FLOWD_SECRET_KEY the same way.
func CursorKey(secretsKey []byte) []byte { return derive(secretsKey, "flowd cursor key v1") }

// derive gives each use of the directory key its own key, so that a cursor
// MAC can never be turned against the secrets' encryption.
func derive(key []byte, purpose string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}
