package httpapi

// STAND-IN: pkg/sqlitestore has no RunStore or RunQueue yet. memRuns is a
// minimal in-memory one with the same contract (claims, leases, final runs
// refused), so that the receivers and the runs API are tested with the real
// Service and engine. Once sqlitestore implements them, wire its Store as
// Runs and Queue in newTestServer, drain its queue instead, and delete this
// file. Flow stats are not kept here.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

type memRun struct {
	run   automation.Run
	lease time.Time
}

type memRuns struct {
	mu      sync.Mutex
	runs    map[string]*memRun
	order   []string // creation order
	pending []automation.Run
	// failEnqueue injects a queue outage.
	failEnqueue bool
}

var (
	_ automation.RunStore = (*memRuns)(nil)
	_ automation.RunQueue = (*memRuns)(nil)
)

func newMemRuns() *memRuns { return &memRuns{runs: map[string]*memRun{}} }

func (m *memRuns) Enqueue(_ context.Context, r automation.Run) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failEnqueue {
		return errors.New("memruns: queue unavailable")
	}
	m.runs[r.ID] = &memRun{run: r}
	m.order = append(m.order, r.ID)
	m.pending = append(m.pending, r)
	return nil
}

func (m *memRuns) Run(_ context.Context, project, flowID, id string) (automation.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.runs[id]
	if !ok || e.run.Project != project || e.run.FlowID != flowID {
		return automation.Run{}, automation.NotFound("run", id)
	}
	return e.run, nil
}

func (m *memRuns) ListRuns(_ context.Context, project, flowID string, q automation.ListQuery) (automation.Page[automation.Run], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var p automation.Page[automation.Run]
	started := q.After == ""
	for _, id := range slices.Backward(m.order) {
		r := m.runs[id].run
		if !started {
			started = id == q.After
			continue
		}
		if r.Project != project || r.FlowID != flowID || (q.Status != "" && string(r.Status) != q.Status) {
			continue
		}
		if len(p.Items) == q.Limit {
			p.Next = p.Items[len(p.Items)-1].ID
			break
		}
		p.Items = append(p.Items, r)
	}
	return p, nil
}

func (m *memRuns) ClaimRun(_ context.Context, project, id string, now time.Time, lease time.Duration) (automation.Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.runs[id]
	switch {
	case !ok || e.run.Project != project:
		return automation.Run{}, automation.NotFound("run", id)
	case e.run.Status.Final():
		return automation.Run{}, automation.Conflict("RUN_FINISHED", "run %s is finished", id)
	case now.Before(e.lease):
		return automation.Run{}, automation.Conflict("RUN_CLAIMED", "run %s is claimed", id)
	}
	e.run.Attempts++
	e.lease = now.Add(lease)
	return e.run, nil
}

func (m *memRuns) ReleaseRun(_ context.Context, r automation.Run) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.runs[r.ID]
	if !ok {
		return automation.NotFound("run", r.ID)
	}
	e.run.Steps, e.run.Error, e.lease = r.Steps, r.Error, time.Time{}
	return nil
}

func (m *memRuns) FinishRun(_ context.Context, r automation.Run) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.runs[r.ID]
	if !ok {
		return automation.NotFound("run", r.ID)
	}
	if e.run.Status.Final() {
		return automation.Conflict("RUN_FINISHED", "run %s is finished", r.ID)
	}
	e.run, e.lease = r, time.Time{}
	return nil
}

func (m *memRuns) DeleteRunsBefore(_ context.Context, t time.Time, limit int) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	m.order = slices.DeleteFunc(m.order, func(id string) bool {
		if n < limit && m.runs[id].run.Created.Before(t) {
			delete(m.runs, id)
			n++
			return true
		}
		return false
	})
	return n, nil
}

// count is how many runs exist.
func (m *memRuns) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.runs)
}

// takePending empties the queue.
func (m *memRuns) takePending() []automation.Run {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pending
	m.pending = nil
	return p
}

// drain executes every queued run once, as a worker pool would.
func drain(t *testing.T, svc *automation.Service, m *memRuns) {
	t.Helper()
	for _, r := range m.takePending() {
		if _, err := svc.ExecuteRun(context.Background(), r.Project, r.ID); err != nil {
			t.Logf("execute run %s: %v", r.ID, err)
		}
	}
}
