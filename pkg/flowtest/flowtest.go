// Package flowtest builds a Service the way flowd does, for the tests of
// every package that needs a whole one: a real SQLite data directory in
// t.TempDir(), sealed secrets, and the real engine (allowed to reach
// loopback, where tests run their fake services). One helper, so that the
// wiring tests exercise is the wiring flowd runs.
package flowtest

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"flowservice/pkg/apps"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/datadir"
	"flowservice/pkg/engine"
	"flowservice/pkg/jscode"
	"flowservice/pkg/oauth"
	"flowservice/pkg/passwords"
	"flowservice/pkg/sqlitestore"
)

// Options vary an Env. Zero fields take the defaults.
type Options struct {
	Policy    automation.RunPolicy
	Clock     func() time.Time // default time.Now
	Scheduler automation.Scheduler
	// Queue returns the run queue the Service accepts runs into, given the
	// store (which is the embedded queue), for a test that watches or
	// redirects accepted runs: a worker pool's Notifying, a recording
	// queue. nil: the store.
	Queue func(*sqlitestore.Store) automation.RunQueue
	// Store wraps the store the Service sees, for fault injection; nil:
	// the store as is. Env.Store stays the real one.
	Store func(automation.Store) automation.Store
	// Runs wraps the run store the Service sees, as Store does.
	Runs                   func(automation.RunStore) automation.RunStore
	EngineURL, WorkflowURL string // default http://engine.test and http://workflow.test
	StopInlineAtAnswer     bool   // RunRuntime.StopInlineAtAnswer
	// NoFinishedRuns turns off the one-commit path of ON_COMPLETION runs
	// without side effects (RunRuntime.Finished), for a test that compares
	// it with the usual path. PureBudget is RunRuntime.PureBudget.
	NoFinishedRuns bool
	PureBudget     time.Duration
	// OAuth exchanges and refreshes OAuth2 tokens; the data directory
	// keeps the operator's apps. nil: the real client, allowed to reach
	// loopback.
	OAuth automation.OAuthClient
	Log   *slog.Logger
	// Tracer records runs as spans (automation.Config.Tracer); nil: off.
	Tracer automation.Tracer
	// Passwords hashes people's passwords; nil: TestPasswords.
	Passwords automation.PasswordHasher
	// RateBuckets counts the rate quotas as instances sharing a store do
	// (automation.Config.RateBuckets); nil: in memory.
	RateBuckets automation.RateBuckets
	// RootCAs are what EMAIL steps trust (an SMTP test server's pool);
	// nil: the system's.
	RootCAs *x509.CertPool
	// Dir is the data directory to build on, for a test that reopens one
	// (read-only, say); the caller closes it. nil: a fresh one in
	// t.TempDir(), closed when the test ends.
	Dir *datadir.Dir
}

// TestPasswords hashes with argon2id at its cheapest (1 MiB, one pass):
// the same code as flowd, at a cost loaded test machines can afford.
var TestPasswords = passwords.Hasher{Params: passwords.Params{MemoryKiB: 1024, Passes: 1, Lanes: 1}}

// Env is a Service over a fresh data directory.
type Env struct {
	Svc   *automation.Service
	Dir   *datadir.Dir
	Store *sqlitestore.Store
}

// New opens a data directory in t.TempDir() (unless opts.Dir is set) and
// builds a Service on it; both are closed when the test ends.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	dir := opts.Dir
	if dir == nil {
		var err error
		if dir, err = datadir.Open(context.Background(), t.TempDir()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dir.Close() })
	}
	var (
		store automation.Store    = dir.Store
		runs  automation.RunStore = dir.Store
		queue automation.RunQueue = dir.Store
	)
	if opts.Store != nil {
		store = opts.Store(store)
	}
	if opts.Runs != nil {
		runs = opts.Runs(runs)
	}
	if opts.Queue != nil {
		queue = opts.Queue(dir.Store)
	}
	// ON_COMPLETION runs take the fast path where the queue offers it:
	// the store itself, as in flowd, or a test's queue that passes it on.
	inline, _ := queue.(automation.InlineQueue)
	// Runs without side effects take their one-commit path where the run
	// store offers it, unless the test asks for the usual path.
	finished, _ := runs.(automation.FinishedRuns)
	// A test's queue may stand for SQS: its capabilities are wired as the
	// AWS backend wires the real queue's, and the run store's status read
	// likewise.
	delayer, _ := queue.(automation.Delayer)
	pollDelayer, _ := queue.(automation.PollDelayer)
	waker, _ := queue.(automation.Waker)
	statusReader, _ := runs.(automation.RunStatusReader)
	dueReader, _ := runs.(automation.RunDueReader)
	if opts.NoFinishedRuns {
		finished = nil
	}
	if opts.EngineURL == "" {
		opts.EngineURL = "http://engine.test"
	}
	if opts.WorkflowURL == "" {
		opts.WorkflowURL = "http://workflow.test"
	}
	if opts.Passwords == nil {
		opts.Passwords = TestPasswords
	}
	if opts.OAuth == nil {
		// As flowd wires it: traced when the test traces.
		opts.OAuth = oauth.New(engine.TraceTransport(opts.Tracer, engine.GuardedTransport(true)))
	}
	svc, err := automation.NewService(automation.Config{
		Store: store, Secrets: dir.Secrets, Checker: engine.Checker{}, CodeChecker: jscode.Checker{}, Polls: dir.Store,
		Scheduler: opts.Scheduler,
		OAuthApps: dir.Store, OAuth: opts.OAuth,
		Users: dir.Store, Passwords: opts.Passwords,
		CursorKey: dir.CursorKey, EngineURL: opts.EngineURL, WorkflowURL: opts.WorkflowURL,
		Clock: opts.Clock, Log: opts.Log, Tracer: opts.Tracer, Apps: apps.MustLoad(), RateBuckets: opts.RateBuckets,
		Runtime: &automation.RunRuntime{
			Runs: runs, Queue: queue, Inline: inline, Policy: opts.Policy, StopInlineAtAnswer: opts.StopInlineAtAnswer,
			Finished: finished, PureBudget: opts.PureBudget,
			Delayer: delayer, PollDelayer: pollDelayer, Waker: waker, StatusReader: statusReader, DueReader: dueReader,
			Waitpoints: dir.Store,
			// The engine reads the same clock as the Service, so that a
			// test moves a WAIT's time on instead of sleeping through it.
			NewExecutor: func(env automation.ExecEnv) automation.Executor {
				return engine.New(engine.Config{Env: env, AllowPrivateNetworks: true, Clock: opts.Clock, RootCAs: opts.RootCAs})
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Svc: svc, Dir: dir, Store: dir.Store}
}

// NewExecutor is the RunRuntime.NewExecutor of tests: the real engine,
// allowed to reach private networks (tests' fake services listen on
// 127.0.0.1).
func NewExecutor(env automation.ExecEnv) automation.Executor {
	return engine.New(engine.Config{Env: env, AllowPrivateNetworks: true})
}

// Project creates a project on plan and an API key for it.
func (e *Env) Project(t testing.TB, name string, plan automation.Plan) (automation.Project, string) {
	t.Helper()
	ctx := context.Background()
	p, err := e.Svc.CreateProject(ctx, name, plan)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := e.Svc.CreateAPIKey(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	return p, key
}

// ActiveFlow creates a FLOW_BUILDER flow with the steps in p and enables it.
func (e *Env) ActiveFlow(t testing.TB, p automation.Project, name string, steps ...automation.Step) automation.Flow {
	t.Helper()
	ctx := context.Background()
	eng := automation.FlowBuilder
	f, err := e.Svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps})
	if err != nil {
		t.Fatal(err)
	}
	if f, err = e.Svc.EnableFlow(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	return f
}

// CallStep is an HTTP step named "call" that POSTs {"ref": trigger.body.ref}
// to url: with StartRef, a run whose one outside effect a test can count.
func CallStep(url string) automation.Step {
	return automation.Step{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: url,
		Body: json.RawMessage(`{"ref": "{{ trigger.body.ref }}"}`)}
}

// StartRef starts a run of f triggered by a POST of {"ref":"main"}.
func (e *Env) StartRef(t testing.TB, f automation.Flow) automation.Run {
	t.Helper()
	r, err := e.Svc.StartRun(context.Background(), f, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{"ref":"main"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// StatusServer is a service on 127.0.0.1 that answers with the statuses in
// order, then the last one forever, and counts the requests.
func StatusServer(t testing.TB, statuses ...int) (*httptest.Server, *atomic.Int32) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1))
		w.WriteHeader(statuses[min(n, len(statuses))-1])
		w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}
