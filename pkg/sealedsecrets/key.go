package sealedsecrets

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LoadOrCreateKey returns the key in the file at path, creating the file with
// a new random key (mode 0600) if there is none. The directory must exist.
//
// A key file that group or others may read is refused: anyone who reads it
// and the database reads every credential.
func LoadOrCreateKey(path string) ([]byte, error) {
	key, err := readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	if err := createKey(path); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	// Read back what is there: ours, or the key of a process (flowd,
	// flowctl) that created it first.
	return readKey(path)
}

func readKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sealedsecrets: key file: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("sealedsecrets: key file %s has mode %04o, readable by group or others: run chmod 600 %s", path, perm, path)
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sealedsecrets: key file: %w", err)
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("sealedsecrets: key file %s holds %d bytes, want %d", path, len(key), KeySize)
	}
	return key, nil
}

// createKey writes a new key to a temporary file and links it into place, so
// that the key file appears whole or not at all, and two processes starting
// together end up with the same key: the second link fails with ErrExist.
func createKey(path string) error {
	key := make([]byte, KeySize)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+)

	tmp, err := os.CreateTemp(filepath.Dir(path), ".key-*")
	if err != nil {
		return fmt.Errorf("sealedsecrets: create key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	// CreateTemp makes the file 0600 already; say so, in case that changes.
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("sealedsecrets: create key file: %w", err)
	}
	if _, err := tmp.Write(key); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("sealedsecrets: create key file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("sealedsecrets: create key file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("sealedsecrets: create key file: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("sealedsecrets: create key file: %w", err)
	}
	return nil
}
