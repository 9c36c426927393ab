package smsecrets

import (
	"bytes"
	"context"
	"sync"
	"time"

	"flowservice/pkg/automation"
)

// MaxCacheAge is the longest a Cached store keeps a value: a secret changed
// in Secrets Manager outside the service (console, CLI, rotation) reaches
// every Lambda environment within it.
const MaxCacheAge = time.Minute

// maxCacheEntries bounds a Cached store's memory: past it, expired entries
// go, and if none has expired, all of them.
const maxCacheEntries = 1024

// Cached is a Secrets store that keeps what CachedSecret read for at most
// MaxCacheAge, in the memory of one process (one Lambda execution
// environment), so that a webhook flow with a signature secret, or a run
// with an API key connection, does not pay a GetSecretValue call
// ($0.05 per 10,000) on every delivery. It is safe for concurrent use.
//
// What keeps revocation immediate is the stamp: the caller passes the
// version of the record the secret belongs to (automation.CachedSecrets),
// which it has just read strongly consistent, and a cached value is used
// only under the same stamp. A flow's secrets change only with its version;
// a connection's credential is refused before any secret is read when the
// connection record is gone or not ACTIVE. PutSecret and DeleteSecret
// through the store drop the entry at once. Secret itself is never cached.
type Cached struct {
	automation.Secrets
	maxAge time.Duration
	now    func() time.Time

	mu      sync.Mutex
	entries map[cacheKey]cacheEntry
}

type cacheKey struct{ project, name string }

type cacheEntry struct {
	stamp string
	value []byte
	read  time.Time
}

var _ automation.CachedSecrets = (*Cached)(nil)

// NewCached returns s with a cache of at most maxAge (capped at
// MaxCacheAge; 0 or less caches nothing).
func NewCached(s automation.Secrets, maxAge time.Duration) *Cached {
	return &Cached{Secrets: s, maxAge: min(maxAge, MaxCacheAge), now: time.Now, entries: map[cacheKey]cacheEntry{}}
}

// CachedSecret returns the value of a secret read at most maxAge ago under
// the same stamp, or reads it (Secret) and keeps it. Errors, a missing
// secret included, are not kept.
func (c *Cached) CachedSecret(ctx context.Context, project, name, stamp string) ([]byte, error) {
	k := cacheKey{project, name}
	now := c.now()
	c.mu.Lock()
	e, ok := c.entries[k]
	c.mu.Unlock()
	if ok && e.stamp == stamp && now.Sub(e.read) < c.maxAge && !now.Before(e.read) {
		return bytes.Clone(e.value), nil
	}
	v, err := c.Secrets.Secret(ctx, project, name)
	if err != nil || c.maxAge <= 0 {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCacheEntries {
		for key, old := range c.entries {
			if now.Sub(old.read) >= c.maxAge {
				delete(c.entries, key)
			}
		}
		if len(c.entries) >= maxCacheEntries {
			clear(c.entries)
		}
	}
	c.entries[k] = cacheEntry{stamp: stamp, value: bytes.Clone(v), read: now}
	return v, nil
}

// PutSecret stores a new value and drops the cached one.
func (c *Cached) PutSecret(ctx context.Context, project, name string, value []byte) error {
	c.forget(project, name)
	defer c.forget(project, name) // a read racing the write may have kept the old value
	return c.Secrets.PutSecret(ctx, project, name, value)
}

// DeleteSecret deletes a secret and drops the cached value.
func (c *Cached) DeleteSecret(ctx context.Context, project, name string) error {
	c.forget(project, name)
	defer c.forget(project, name)
	return c.Secrets.DeleteSecret(ctx, project, name)
}

func (c *Cached) forget(project, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, cacheKey{project, name})
}
