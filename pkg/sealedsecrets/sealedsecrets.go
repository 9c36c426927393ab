// Package sealedsecrets implements automation.Secrets for the embedded
// backend: values are sealed with AES-256-GCM before they reach the store, so
// the database file, its WAL and any copy of it hold only ciphertext. The key
// lives in a separate file in the data directory (see LoadOrCreateKey).
package sealedsecrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"

	"flowservice/pkg/automation"
)

// KeySize is the length of the AES-256 key.
const KeySize = 32

// format is the first byte of a sealed value, so that a later change of
// scheme can tell old values apart.
const format byte = 1

// BlobStore keeps opaque bytes by project and name. sqlitestore.Store
// satisfies it.
type BlobStore interface {
	PutBlob(ctx context.Context, project, name string, b []byte) error
	// Blob returns an error wrapping automation.ErrNotFound when missing.
	Blob(ctx context.Context, project, name string) ([]byte, error)
	// DeleteBlob removes a blob; a missing one is not an error.
	DeleteBlob(ctx context.Context, project, name string) error
}

// Secrets seals values with AES-256-GCM over a BlobStore. It is safe for
// concurrent use if the BlobStore is.
type Secrets struct {
	blobs BlobStore
	aead  cipher.AEAD
}

var _ automation.Secrets = (*Secrets)(nil)

// New returns Secrets that seal with key, which must be KeySize bytes.
func New(blobs BlobStore, key []byte) (*Secrets, error) {
	if blobs == nil {
		return nil, errors.New("sealedsecrets: a BlobStore is required")
	}
	if len(key) != KeySize {
		return nil, fmt.Errorf("sealedsecrets: key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("sealedsecrets: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("sealedsecrets: %w", err)
	}
	return &Secrets{blobs: blobs, aead: aead}, nil
}

// additionalData binds a sealed value to where it is stored: a ciphertext
// copied to another name or project fails to open instead of handing one
// connection's credential to another.
func additionalData(project, name string) []byte {
	return []byte(project + "\x00" + name)
}

// PutSecret seals value under a fresh random nonce and stores it.
func (s *Secrets) PutSecret(ctx context.Context, project, name string, value []byte) error {
	// A random 96-bit nonce per value: GCM stays safe for far more values
	// than a flow service will ever seal under one key.
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(value)+s.aead.Overhead())
	out[0] = format
	nonce := out[1:]
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24+)
	out = s.aead.Seal(out, nonce, value, additionalData(project, name))
	if err := s.blobs.PutBlob(ctx, project, name, out); err != nil {
		return fmt.Errorf("sealedsecrets: put %s: %w", name, err)
	}
	return nil
}

// Secret opens the value stored under (project, name). A value that does
// not open (tampered, moved from another name, or sealed with another key)
// is an error, never returned bytes.
func (s *Secrets) Secret(ctx context.Context, project, name string) ([]byte, error) {
	b, err := s.blobs.Blob(ctx, project, name)
	if err != nil {
		if errors.Is(err, automation.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("sealedsecrets: get %s: %w", name, err)
	}
	n := s.aead.NonceSize()
	if len(b) < 1+n+s.aead.Overhead() || b[0] != format {
		return nil, fmt.Errorf("sealedsecrets: get %s: stored value is not a sealed secret", name)
	}
	v, err := s.aead.Open(nil, b[1:1+n], b[1+n:], additionalData(project, name))
	if err != nil {
		// The reason is one of the above; GCM cannot tell which.
		return nil, fmt.Errorf("sealedsecrets: get %s: cannot open: tampered, moved, or sealed with another key", name)
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
}

// DeleteSecret removes a secret; a missing one is not an error.
func (s *Secrets) DeleteSecret(ctx context.Context, project, name string) error {
	if err := s.blobs.DeleteBlob(ctx, project, name); err != nil {
		return fmt.Errorf("sealedsecrets: delete %s: %w", name, err)
	}
	return nil
}
