package httpapi

// This file is the one place where tests wire the API to its backends.
//
// STAND-IN: pkg/sqlitestore and pkg/sealedsecrets had not landed on main
// when these tests were written, so openBackends uses the minimal in-memory
// memStore and memSecrets below (the checker is the real engine.Checker).
// Once they land, replace the body of openBackends with
//
//	dir := t.TempDir()
//	store, err := sqlitestore.Open(context.Background(), filepath.Join(dir, "flowd.db"))
//	t.Cleanup(func() { store.Close() })
//	key, err := sealedsecrets.LoadOrCreateKey(filepath.Join(dir, "secrets.key"))
//	secrets, err := sealedsecrets.New(store, key)
//	return store, secrets, engine.Checker{}
//
// and delete everything below the STAND-IN line.

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/engine"
)

// testEnv is what a test server is made of, for helpers that need the
// Service itself (making projects and keys).
type testEnv struct {
	svc *automation.Service
	log *syncBuffer // the API's JSON log lines
}

var (
	envMu sync.Mutex
	envs  = map[*httptest.Server]*testEnv{}
)

func envOf(t *testing.T, srv *httptest.Server) *testEnv {
	t.Helper()
	envMu.Lock()
	defer envMu.Unlock()
	env, ok := envs[srv]
	if !ok {
		t.Fatal("server was not made by newTestServer")
	}
	return env
}

// openBackends returns an empty store, secret store and checker.
func openBackends(t *testing.T) (automation.Store, automation.Secrets, automation.Checker) {
	t.Helper()
	return newMemStore(), &memSecrets{m: map[string][]byte{}}, engine.Checker{}
}

// newTestServer starts the API on 127.0.0.1 over fresh backends, with an
// ENTERPRISE project and its key. Its client validates every exchange
// against the OpenAPI document.
func newTestServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	store, secrets, checker := openBackends(t)
	svc, err := automation.NewService(automation.Config{
		Store: store, Secrets: secrets, Checker: checker,
		CursorKey:   bytes.Repeat([]byte("k"), 32),
		EngineURL:   "http://engine.test",
		WorkflowURL: "http://workflow.test",
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	srv := httptest.NewServer(NewAPI(svc, log))
	t.Cleanup(srv.Close)
	srv.Client().Transport = newValidatingTransport(t, srv.Client().Transport)

	envMu.Lock()
	envs[srv] = &testEnv{svc: svc, log: logs}
	envMu.Unlock()
	t.Cleanup(func() {
		envMu.Lock()
		delete(envs, srv)
		envMu.Unlock()
	})
	return srv, newProjectKey(t, srv, automation.PlanEnterprise)
}

// newProjectKey creates another project on plan and returns a key for it.
func newProjectKey(t *testing.T, srv *httptest.Server, plan automation.Plan) string {
	t.Helper()
	svc := envOf(t, srv).svc
	ctx := context.Background()
	name := strings.ToLower(string(plan)) + "-" + automation.NewID("")[:8]
	p, err := svc.CreateProject(ctx, name, plan)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := svc.CreateAPIKey(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ---- STAND-IN backends: delete once sqlitestore and sealedsecrets land.

type memStore struct {
	mu       sync.Mutex
	projects []automation.Project
	keys     []automation.APIKey
	flows    []automation.Flow
	conns    []automation.Connection
}

func newMemStore() *memStore { return &memStore{} }

func (s *memStore) CreateProject(_ context.Context, p automation.Project) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range s.projects {
		if q.Name == p.Name {
			return automation.Conflict("PROJECT_EXISTS", "project %q exists", p.Name)
		}
	}
	s.projects = append(s.projects, p)
	return nil
}

func (s *memStore) Project(_ context.Context, id string) (automation.Project, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.projects {
		if p.ID == id {
			return p, nil
		}
	}
	return automation.Project{}, automation.NotFound("project", id)
}

func (s *memStore) ProjectByName(_ context.Context, name string) (automation.Project, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.projects {
		if p.Name == name {
			return p, nil
		}
	}
	return automation.Project{}, automation.NotFound("project", name)
}

func (s *memStore) Projects(context.Context) ([]automation.Project, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.projects), nil
}

func (s *memStore) CreateKey(_ context.Context, k automation.APIKey) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, k)
	return nil
}

func (s *memStore) KeyByHash(_ context.Context, hash string) (automation.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		if k.Hash == hash {
			return k, nil
		}
	}
	return automation.APIKey{}, automation.NotFound("key", "")
}

func (s *memStore) Keys(_ context.Context, project string) ([]automation.APIKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []automation.APIKey
	for _, k := range s.keys {
		if project == "" || k.Project == project {
			out = append(out, k)
		}
	}
	return out, nil
}

func (s *memStore) RevokeKey(_ context.Context, id string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.keys {
		if s.keys[i].ID == id {
			if s.keys[i].Revoked == nil {
				s.keys[i].Revoked = &at
			}
			return nil
		}
	}
	return automation.NotFound("key", id)
}

// routeHeld reports whether a flow other than id holds one of routes.
func (s *memStore) routeHeld(id string, routes []automation.Route) bool {
	for _, f := range s.flows {
		if f.ID == id {
			continue
		}
		for _, r := range f.Routes() {
			if slices.Contains(routes, r) {
				return true
			}
		}
	}
	return false
}

func (s *memStore) CreateFlow(_ context.Context, f automation.Flow) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.routeHeld(f.ID, f.Routes()) {
		return automation.Conflict("ROUTE_CONFLICT", "webhook route is taken")
	}
	s.flows = append(s.flows, f)
	return nil
}

func (s *memStore) Flow(_ context.Context, project, id string) (automation.Flow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.flows {
		if f.ID == id && f.Project == project {
			return f, nil
		}
	}
	return automation.Flow{}, automation.NotFound("flow", id)
}

func (s *memStore) FlowByID(_ context.Context, id string) (automation.Flow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range s.flows {
		if f.ID == id {
			return f, nil
		}
	}
	return automation.Flow{}, automation.NotFound("flow", id)
}

func (s *memStore) PutFlow(_ context.Context, f automation.Flow) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, old := range s.flows {
		if old.ID == f.ID && old.Project == f.Project {
			if old.Version != f.Version-1 {
				return automation.Conflict("FLOW_MODIFIED", "flow was modified")
			}
			if s.routeHeld(f.ID, f.Routes()) {
				return automation.Conflict("ROUTE_CONFLICT", "webhook route is taken")
			}
			f.Stats = old.Stats
			s.flows[i] = f
			return nil
		}
	}
	return automation.NotFound("flow", f.ID)
}

func (s *memStore) DeleteFlow(_ context.Context, project, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.flows {
		if f.ID == id && f.Project == project {
			s.flows = slices.Delete(s.flows, i, i+1)
			return nil
		}
	}
	return automation.NotFound("flow", id)
}

// page returns the items after position after (an ID) that keep, at most
// limit, and the position of the last one when more follow.
func page[T any](items []T, id func(T) string, q automation.ListQuery, keep func(T) bool) automation.Page[T] {
	start := 0
	if q.After != "" {
		start = len(items)
		for i, it := range items {
			if id(it) == q.After {
				start = i + 1
			}
		}
	}
	var out automation.Page[T]
	for _, it := range items[start:] {
		if !keep(it) {
			continue
		}
		if len(out.Items) == q.Limit {
			out.Next = id(out.Items[len(out.Items)-1])
			break
		}
		out.Items = append(out.Items, it)
	}
	return out
}

func (s *memStore) ListFlows(_ context.Context, project string, q automation.ListQuery) (automation.Page[automation.Flow], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return page(s.flows, func(f automation.Flow) string { return f.ID }, q, func(f automation.Flow) bool {
		return f.Project == project && (q.Status == "" || string(f.Status) == q.Status)
	}), nil
}

func (s *memStore) RouteFlows(_ context.Context, path string) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for _, f := range s.flows {
		for _, r := range f.Routes() {
			if r.Path == path {
				out[r.Method] = f.ID
			}
		}
	}
	return out, nil
}

func (s *memStore) CreateConnection(_ context.Context, c automation.Connection) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, c)
	return nil
}

func (s *memStore) Connection(_ context.Context, project, id string) (automation.Connection, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		if c.ID == id && c.Project == project {
			return c, nil
		}
	}
	return automation.Connection{}, automation.NotFound("connection", id)
}

func (s *memStore) ListConnections(_ context.Context, project string, q automation.ListQuery) (automation.Page[automation.Connection], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return page(s.conns, func(c automation.Connection) string { return c.ID }, q, func(c automation.Connection) bool {
		return c.Project == project
	}), nil
}

func (s *memStore) DeleteConnection(_ context.Context, project, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.conns {
		if c.ID == id && c.Project == project {
			s.conns = slices.Delete(s.conns, i, i+1)
			return nil
		}
	}
	return automation.NotFound("connection", id)
}

func (s *memStore) SetConnectionStatus(_ context.Context, project, id string, st automation.ConnectionStatus, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range s.conns {
		if c.ID == id && c.Project == project {
			s.conns[i].Status, s.conns[i].Updated = st, at
			return nil
		}
	}
	return automation.NotFound("connection", id)
}

type memSecrets struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (s *memSecrets) PutSecret(_ context.Context, project, name string, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[project+"/"+name] = slices.Clone(v)
	return nil
}

func (s *memSecrets) Secret(_ context.Context, project, name string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[project+"/"+name]
	if !ok {
		return nil, automation.NotFound("secret", name)
	}
	return slices.Clone(v), nil
}

func (s *memSecrets) DeleteSecret(_ context.Context, project, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, project+"/"+name)
	return nil
}
