package smsecrets

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
)

// countingAPI counts GetSecretValue calls on the way to moto.
type countingAPI struct {
	API
	gets atomic.Int64
}

func (c *countingAPI) GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	c.gets.Add(1)
	return c.API.GetSecretValue(ctx, in, opts...)
}

func newCached(t *testing.T) (*Cached, *countingAPI, *time.Time) {
	s, client := newStore(t)
	api := &countingAPI{API: client}
	s.sm = api
	c := NewCached(s, MaxCacheAge)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	return c, api, &now
}

func TestCachedSecret(t *testing.T) {
	c, api, now := newCached(t)
	ctx := t.Context()
	name := automation.ConnectionSecretName("con_1")
	// write writes through the cache; the read every write makes of the
	// project's document is not what is counted here.
	write := func(f func() error) {
		t.Helper()
		n := api.gets.Load()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		api.gets.Store(n)
	}
	write(func() error { return c.PutSecret(ctx, "prj_a", name, []byte("v1")) })
	read := func(stamp, want string, wantGets int64) {
		t.Helper()
		v, err := c.CachedSecret(ctx, "prj_a", name, stamp)
		if err != nil || string(v) != want {
			t.Fatalf("CachedSecret(%s) = %q, %v; want %q", stamp, v, err, want)
		}
		if got := api.gets.Load(); got != wantGets {
			t.Fatalf("after CachedSecret(%s): %d GetSecretValue calls, want %d", stamp, got, wantGets)
		}
		v[0] = 'X' // the caller's copy: the cache keeps its own
	}
	read("s1", "v1", 1)
	read("s1", "v1", 1) // kept
	*now = now.Add(MaxCacheAge - time.Second)
	read("s1", "v1", 1) // still within the minute
	read("s2", "v1", 2) // another stamp: the record changed, read again
	*now = now.Add(MaxCacheAge)
	read("s2", "v1", 3) // a minute old: read again

	// A write through the store drops the entry at once.
	write(func() error { return c.PutSecret(ctx, "prj_a", name, []byte("v2")) })
	read("s2", "v2", 4)
	if err := c.DeleteSecret(ctx, "prj_a", name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CachedSecret(ctx, "prj_a", name, "s2"); !automation.IsNotFound(err) {
		t.Fatalf("after DeleteSecret: %v, want not found", err)
	}
	// A missing secret is not kept: once it exists, it is read.
	if err := c.Secrets.PutSecret(ctx, "prj_a", name, []byte("v3")); err != nil {
		t.Fatal(err)
	}
	if v, err := c.CachedSecret(ctx, "prj_a", name, "s2"); err != nil || !bytes.Equal(v, []byte("v3")) {
		t.Fatalf("after a miss: %q, %v; want v3", v, err)
	}
	// Secret itself never reads the cache.
	before := api.gets.Load()
	if _, err := c.Secret(ctx, "prj_a", name); err != nil || api.gets.Load() != before+1 {
		t.Fatalf("Secret: %v, %d calls; want one call", err, api.gets.Load()-before)
	}
}

func TestCacheAgeIsCapped(t *testing.T) {
	if c := NewCached(nil, time.Hour); c.maxAge != MaxCacheAge {
		t.Errorf("maxAge = %s, want the cap %s", c.maxAge, MaxCacheAge)
	}
}

// TestCachedContract: the cached store passes the secrets contract.
func TestCachedContract(t *testing.T) {
	storetest.RunSecrets(t, func(t *testing.T) automation.Secrets {
		s, _ := newStore(t)
		return NewCached(s, MaxCacheAge)
	})
}

// memSecrets is an in-memory automation.Secrets that counts reads.
type memSecrets struct {
	values map[string][]byte
	reads  int
}

func (m *memSecrets) PutSecret(_ context.Context, project, name string, v []byte) error {
	m.values[project+"/"+name] = v
	return nil
}

func (m *memSecrets) Secret(_ context.Context, project, name string) ([]byte, error) {
	m.reads++
	v, ok := m.values[project+"/"+name]
	if !ok {
		return nil, automation.NotFound("secret", name)
	}
	return v, nil
}

func (m *memSecrets) DeleteSecret(_ context.Context, project, name string) error {
	delete(m.values, project+"/"+name)
	return nil
}

// TestCacheStaysBounded: past maxCacheEntries the cache drops what has
// expired, and everything if nothing has, so its memory stays bounded.
func TestCacheStaysBounded(t *testing.T) {
	mem := &memSecrets{values: map[string][]byte{}}
	c := NewCached(mem, MaxCacheAge)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	ctx := t.Context()
	for i := range maxCacheEntries + 10 {
		name := fmt.Sprintf("s%d", i)
		if err := mem.PutSecret(ctx, "prj_a", name, []byte(name)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CachedSecret(ctx, "prj_a", name, "v1"); err != nil {
			t.Fatal(err)
		}
		if len(c.entries) > maxCacheEntries {
			t.Fatalf("%d entries after %d secrets, want at most %d", len(c.entries), i+1, maxCacheEntries)
		}
	}
	// Nothing had expired: the cache was cleared once and holds the rest.
	if len(c.entries) != 10 {
		t.Errorf("%d entries, want the 10 read after the clear", len(c.entries))
	}
	// Expired entries go first: a minute on, the 10 old ones make room
	// and the fresh ones stay.
	now = now.Add(MaxCacheAge)
	for i := range maxCacheEntries - 10 {
		name := fmt.Sprintf("t%d", i)
		if err := mem.PutSecret(ctx, "prj_a", name, []byte(name)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CachedSecret(ctx, "prj_a", name, "v1"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CachedSecret(ctx, "prj_a", "s0", "v1"); err != nil {
		t.Fatal(err)
	}
	if want := maxCacheEntries - 10 + 1; len(c.entries) != want {
		t.Errorf("%d entries, want %d: the expired ones dropped, the fresh ones kept", len(c.entries), want)
	}
}
