package httpapi

// This file is the one place where tests start the API on its backends:
// pkg/flowtest's real SQLite store and sealed secrets in t.TempDir().

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
	"flowservice/pkg/sqlitestore"
)

// testServer is a server under test on 127.0.0.1. Made by newTestServer
// it also carries what the API runs on, for tests that need the Service
// itself (making projects and keys), the API's log lines or its run queue.
type testServer struct {
	*httptest.Server
	svc  *automation.Service
	log  *syncBuffer // the API's JSON log lines
	runs *testQueue  // the run queue, for draining and counting runs
}

// serve starts h on 127.0.0.1 until the test ends. Its client validates
// every exchange against the OpenAPI document.
func serve(t *testing.T, h http.Handler) *testServer {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	srv.Client().Transport = newValidatingTransport(t, srv.Client().Transport)
	return &testServer{Server: srv}
}

// newTestServer starts the API on 127.0.0.1 over fresh backends (flowtest's
// SQLite data directory), with an ENTERPRISE project and its key.
func newTestServer(t *testing.T) (*testServer, string) {
	t.Helper()
	return newTestServerClock(t, nil)
}

// newTestServerClock is newTestServer with the Service's clock injected
// (nil: time.Now), for tests of expiry.
func newTestServerClock(t *testing.T, clock func() time.Time) (*testServer, string) {
	t.Helper()
	var runs *testQueue
	svc := flowtest.New(t, flowtest.Options{Clock: clock, Queue: func(s *sqlitestore.Store) automation.RunQueue {
		runs = &testQueue{store: s}
		return runs
	}}).Svc
	logs := &syncBuffer{}
	srv := serve(t, NewAPI(svc, slog.New(slog.NewJSONHandler(logs, nil))))
	srv.svc, srv.log, srv.runs = svc, logs, runs
	return srv, newProjectKey(t, srv, automation.PlanEnterprise)
}

// newProjectKey creates another project on plan and returns a key for it.
func newProjectKey(t *testing.T, srv *testServer, plan automation.Plan) string {
	t.Helper()
	ctx := context.Background()
	name := strings.ToLower(string(plan)) + "-" + automation.NewID("")[:8]
	p, err := srv.svc.CreateProject(ctx, name, plan)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := srv.svc.CreateAPIKey(ctx, p.ID)
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
