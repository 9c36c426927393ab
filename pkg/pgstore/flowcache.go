package pgstore

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"flowservice/pkg/automation"
)

// CacheFlows keeps what the webhook receivers look up on every delivery,
// FlowByID, RouteFlows and ArmedUntil, in memory for at most ttl, and drops
// all of it on every write to flows, routes or an arming made on any node:
// each such write announces itself on changesChannel at its commit, and
// every node's listener drops its cache (wake.go). What is read is kept
// only while the listener is connected; ttl bounds how long a change could
// go unseen should a notification be lost without the listener noticing.
// A change reaches another node's cache one notification later (well
// under a second), so flowd nodes run without it: a flow saved on one
// node is served by the others at once.
//
// Cached flows carry the run stats of when they were read: the receivers
// do not use them, and the management API reads flows with Flow, which is
// not cached. Callers treat the returned Flow's slices and pointers as
// read-only (Service.RevealFlow clones before it writes secrets in).
func CacheFlows(ttl time.Duration) Option {
	return func(o *options) { o.cacheTTL = ttl }
}

// cacheLimit bounds the entries kept; past it the cache starts over.
const cacheLimit = 50_000

type flowCache struct {
	ttl time.Duration
	// gen counts writes to flows and routes. An entry is valid only for
	// the generation it was read in, and a read that raced a write (the
	// generation moved while it read) is not kept, so a stale value can
	// never outlive the write that changed it.
	gen    atomic.Uint64
	mu     sync.RWMutex
	flows  map[string]cached[automation.Flow]
	routes map[string]cached[map[string]string]
	// armed is ArmedUntil by project and flow: every delivery to a flow
	// builder flow asks it, and almost always finds nothing armed.
	armed map[string]cached[time.Time]
	// up is the listener's (wakeState.up): nothing is kept while it is down.
	up *atomic.Bool
}

type cached[T any] struct {
	v       T
	gen     uint64
	expires time.Time
}

func newFlowCache(ttl time.Duration) *flowCache {
	if ttl <= 0 {
		return nil
	}
	return &flowCache{ttl: ttl, flows: map[string]cached[automation.Flow]{}, routes: map[string]cached[map[string]string]{}, armed: map[string]cached[time.Time]{}}
}

// invalidate is called after every committed write to flows, routes or a
// Test Trigger's arming.
func (c *flowCache) invalidate() {
	if c == nil {
		return
	}
	c.gen.Add(1)
	c.mu.Lock()
	clear(c.flows)
	clear(c.routes)
	clear(c.armed)
	c.mu.Unlock()
}

func lookup[T any](c *flowCache, m map[string]cached[T], key string) (T, bool) {
	c.mu.RLock()
	e, ok := m[key]
	c.mu.RUnlock()
	if !ok || e.gen != c.gen.Load() || time.Now().After(e.expires) {
		var zero T
		return zero, false
	}
	return e.v, true
}

func keep[T any](c *flowCache, m map[string]cached[T], key string, v T, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen.Load() || !c.up.Load() {
		return
	}
	if len(m) >= cacheLimit {
		clear(m)
	}
	m[key] = cached[T]{v: v, gen: gen, expires: time.Now().Add(c.ttl)}
}

// cachedFlowByID is FlowByID through the cache; errors are not cached.
func (s *Store) cachedFlowByID(id string, read func() (automation.Flow, error)) (automation.Flow, error) {
	c := s.cache
	if c == nil {
		return read()
	}
	if f, ok := lookup(c, c.flows, id); ok {
		return f, nil
	}
	gen := c.gen.Load()
	f, err := read()
	if err == nil {
		keep(c, c.flows, id, f, gen)
	}
	return f, err
}

// cachedRouteFlows is RouteFlows through the cache; each caller gets its
// own copy of the map.
func (s *Store) cachedRouteFlows(path string, read func() (map[string]string, error)) (map[string]string, error) {
	c := s.cache
	if c == nil {
		return read()
	}
	if m, ok := lookup(c, c.routes, path); ok {
		return maps.Clone(m), nil
	}
	gen := c.gen.Load()
	m, err := read()
	if err == nil {
		keep(c, c.routes, path, maps.Clone(m), gen)
	}
	return m, err
}

// cachedArmedUntil is ArmedUntil through the cache.
func (s *Store) cachedArmedUntil(project, flowID string, read func() (time.Time, error)) (time.Time, error) {
	c := s.cache
	if c == nil {
		return read()
	}
	key := project + "\x00" + flowID
	if t, ok := lookup(c, c.armed, key); ok {
		return t, nil
	}
	gen := c.gen.Load()
	t, err := read()
	if err == nil {
		keep(c, c.armed, key, t, gen)
	}
	return t, err
}
