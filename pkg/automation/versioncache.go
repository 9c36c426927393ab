package automation

import (
	lru "container/list"
	"context"
	"strconv"
	"sync"
)

// MaxCachedVersions bounds the flow versions a Service keeps in memory for
// runs pinned to a version that is no longer live (docs/reliability.md). A
// definition is at most the API's body limit (1 MiB), so the cache holds
// 64 MiB at the very worst and a few hundred KiB for usual flows.
const MaxCachedVersions = 64

// versionCache keeps recently read flow versions, least recently used
// first out. Versions never change once published, so an entry is never
// stale; a deleted flow's entries age out unused (its runs are gone too).
type versionCache struct {
	mu    sync.Mutex
	order *lru.List // of *versionEntry, most recently used first
	byKey map[string]*lru.Element
}

type versionEntry struct {
	key string
	def Definition
}

func versionKey(project, flowID string, n int64) string {
	return project + "/" + flowID + "#" + strconv.FormatInt(n, 10)
}

func (c *versionCache) get(key string) (Definition, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*versionEntry).def, true
	}
	return Definition{}, false
}

func (c *versionCache) put(key string, def Definition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byKey == nil {
		c.order, c.byKey = lru.New(), map[string]*lru.Element{}
	}
	if e, ok := c.byKey[key]; ok {
		c.order.MoveToFront(e)
		return
	}
	c.byKey[key] = c.order.PushFront(&versionEntry{key: key, def: def})
	for c.order.Len() > MaxCachedVersions {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.byKey, last.Value.(*versionEntry).key)
	}
}

// pinTo is the version a new run of f executes: its live one.
func pinTo(f Flow) *int64 {
	n := f.live()
	return &n
}

// pinnedFlow is live, the flow as stored, with the definition run r
// executes: the draft's as the run started (a test run of the draft), or
// that of r's version. The live version, and every run from before
// versions, takes live as it is; another version is read once and kept
// (versionCache), so an attempt costs no read the unpinned one did not.
func (s *FlowService) pinnedFlow(ctx context.Context, live Flow, r Run) (Flow, error) {
	var def Definition
	switch {
	case r.Draft && r.DraftDefinition != nil:
		def = *r.DraftDefinition
	case r.FlowVersion == nil || *r.FlowVersion == live.live():
		return live, nil
	default:
		var err error
		if def, err = s.versionDefinition(ctx, live, *r.FlowVersion); err != nil {
			return Flow{}, err
		}
	}
	def.ApplyTo(&live)
	return live, nil
}

// versionDefinition is the definition of version n of f, read once and
// kept (versionCache); a pruned version is ErrNotFound.
func (s *FlowService) versionDefinition(ctx context.Context, f Flow, n int64) (Definition, error) {
	key := versionKey(f.Project, f.ID, n)
	if def, ok := s.versions.get(key); ok {
		return def, nil
	}
	v, err := s.store.FlowVersion(ctx, f.Project, f.ID, n)
	if err != nil {
		return Definition{}, wrap("read flow version", err)
	}
	s.versions.put(key, *v.Definition)
	return *v.Definition, nil
}
