package httpapi

// This file is the one place where tests wire the API to its backends:
// the real SQLite store and sealed secrets in a temporary directory.

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/datadir"
	"flowservice/pkg/engine"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/sqlitestore"
)

// testEnv is what a test server is made of, for helpers that need the
// Service itself (making projects and keys).
type testEnv struct {
	svc  *automation.Service
	log  *syncBuffer // the API's JSON log lines
	runs *testQueue  // the run queue, for draining and counting runs
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
func openBackends(t *testing.T) (*sqlitestore.Store, automation.Secrets, automation.Checker) {
	t.Helper()
	dir, err := datadir.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dir.Close() })
	return dir.Store, dir.Secrets, engine.Checker{}
}

// newTestServer starts the API on 127.0.0.1 over fresh backends, with an
// ENTERPRISE project and its key. Its client validates every exchange
// against the OpenAPI document.
func newTestServer(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	return newTestServerClock(t, nil)
}

// newTestServerClock is newTestServer with the Service's clock injected
// (nil: time.Now), for tests of expiry.
func newTestServerClock(t *testing.T, clock func() time.Time) (*httptest.Server, string) {
	t.Helper()
	var runs *testQueue
	svc := flowtest.New(t, flowtest.Options{Clock: clock, Queue: func(s *sqlitestore.Store) automation.RunQueue {
		runs = &testQueue{store: s}
		return runs
	}}).Svc
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	srv := httptest.NewServer(NewAPI(svc, log))
	t.Cleanup(srv.Close)
	srv.Client().Transport = newValidatingTransport(t, srv.Client().Transport)

	envMu.Lock()
	envs[srv] = &testEnv{svc: svc, log: logs, runs: runs}
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
