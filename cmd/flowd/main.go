// Command flowd is the flow service on one machine: the management API and
// both webhook receivers over HTTP, on an embedded SQLite store in a data
// directory, with no AWS at all. Configuration is FLOWD_* environment
// variables; see flowd --help and docs/operations.md.
package main

import (
	"context"
	"flowservice/pkg/apps"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"syscall"
	"time"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/cronscheduler"
	"flowservice/pkg/dashboard"
	"flowservice/pkg/datadir"
	"flowservice/pkg/engine"
	"flowservice/pkg/httpapi"
	"flowservice/pkg/jscode"
	"flowservice/pkg/metrics"
	"flowservice/pkg/oauth"
	"flowservice/pkg/runworker"
	"flowservice/pkg/sandbox"
	"flowservice/pkg/sqlitestore"
)

func main() {
	// A copy of this binary started by the code sandbox serves scripts
	// and never reaches the server below.
	sandbox.MaybeServe()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if done, err := commandLine(os.Args[1:], os.Stdout, systemMemory(os.Getenv)); done || err != nil {
		if err != nil {
			fmt.Fprintln(os.Stderr, "flowd:", err)
			os.Exit(2)
		}
		return
	}
	if err := run(ctx, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "flowd:", err)
		os.Exit(1)
	}
}

// run starts flowd and blocks until ctx ends, then shuts down gracefully.
func run(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := newLogger(stderr, cfg.LogLevel)
	applyMemoryLimit(cfg, getenv, log)
	// After applyMemoryLimit, so that the runtime's soft limit is read as
	// set.
	cfg.Memory = decideMemory(systemMemory(getenv), cfg.MemoryLimit)
	log.Info("memory budget "+cfg.Memory.String(), "source", cfg.Memory.Source, "limit", cfg.Memory.Limit, "budget", cfg.Memory.Budget)
	applyGCPercent(getenv)
	if err := startPprof(ctx, getenv("FLOWD_PPROF_ADDR"), log); err != nil {
		return err
	}
	m := metrics.New()
	// The ports are bound before anything is created: a second flowd on a
	// taken port stops here, before it makes a project or AWS resources.
	lns, err := bind(cfg)
	if err != nil {
		return err
	}
	defer func() {
		for _, ln := range lns {
			ln.Close() // after Serve took them, a second Close is harmless
		}
	}()
	// CODE steps run in child processes of this binary (pkg/sandbox).
	var code automation.CodeRunner
	if cfg.CodeSandbox {
		pool, err := sandbox.New(sandbox.Config{Log: log})
		if err != nil {
			return fmt.Errorf("%w (FLOWD_CODE_SANDBOX=false starts without CODE steps)", err)
		}
		defer pool.Close()
		code = pool
	}
	var b *backend
	if cfg.Backend == "aws" {
		// The AWS backend keeps nothing in the data directory but the
		// initial key; the lock keeps a second flowd from overwriting it.
		unlock, lerr := datadir.Lock(cfg.DataDir)
		if lerr != nil {
			return lerr
		}
		defer unlock()
		b, err = openAWS(ctx, cfg, code, getenv, log, stderr)
	} else {
		b, err = openEmbedded(ctx, cfg, code, log, m)
	}
	if err != nil {
		return err
	}
	defer b.close()
	if err := bootstrap(ctx, b.svc, cfg.DataDir, stdout); err != nil {
		return err
	}

	hooks := httpapi.HookConfig{
		MaxBody: cfg.MaxBody, SyncTimeout: cfg.SyncTimeout, TrustedProxies: cfg.TrustedProxies, Log: log,
		Bodies: httpapi.NewBodyBudget(bodyBytes(cfg.Memory.Budget), cfg.MaxBody),
	}
	keyFile := ""
	if cfg.Backend == "embedded" {
		keyFile = filepath.Join(cfg.DataDir, datadir.InitialKeyFile)
	}
	servers := listen(cfg, lns, surfaces{
		api: httpapi.NewAPI(b.svc, log, httpapi.WithClientIP(httpapi.TrustedClientIP(cfg.TrustedProxies)),
			httpapi.WithRateLimit(httpapi.RateLimit{PerSecond: cfg.RateLimit, Burst: int(2*cfg.RateLimit) + 1}),
			httpapi.WithHealth(b.ping), httpapi.WithAlerts(b.alerts),
			httpapi.WithMetrics(m.Handler(metrics.HandlerOptions{
				Token: cfg.MetricsToken, Open: metrics.IsLoopback(cfg.Addr), Ping: b.ping, Refuse: httpapi.WriteError,
			}))),
		engine:   m.Receiver("flow_builder", httpapi.NewWebhook(b.svc, hooks)),
		workflow: m.Receiver("workflow_builder", httpapi.NewWorkflowHook(b.svc, hooks)),
		dashboard: dashboard.New(b.svc, dashboard.Options{
			Key: b.sessionKey, TrustedProxies: cfg.TrustedProxies, Log: log, InitialKeyFile: keyFile,
			OpenAPI: httpapi.OpenAPIDocument(), Alerts: b.alerts, ClientIP: httpapi.TrustedClientIP(cfg.TrustedProxies),
		}),
	})
	// Background work stops after the servers: a webhook accepted while
	// shutting down is still durable, and its run resumes at the next start.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	var background sync.WaitGroup
	b.start(workCtx, &background)

	errc := make(chan error, len(servers))
	for _, s := range servers {
		log.Info("listening", "addr", s.ln.Addr().String(), "serves", s.serves, "backend", cfg.Backend)
		go func() { errc <- s.srv.Serve(s.ln) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}
	log.Info("shutting down", "grace", cfg.ShutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	for _, s := range servers {
		if err := s.srv.Shutdown(sctx); err != nil {
			log.Warn("shutdown", "addr", s.ln.Addr().String(), "err", err)
		}
	}
	b.stop(sctx)
	stopWork()
	background.Wait()
	return nil
}

// backend is a Service over one kind of adapters, with the background work
// that runs its flows.
type backend struct {
	svc *automation.Service
	// ping checks that the store answers (GET /healthz); nil: no check.
	ping func(context.Context) error
	// sessionKey signs dashboard sessions: secret, and stable across
	// restarts so that a restart does not sign everyone out.
	sessionKey []byte
	start      func(ctx context.Context, wg *sync.WaitGroup) // until ctx ends
	stop       func(ctx context.Context)                     // before ctx ends: drain what must finish
	close      func()
	// alerts serves event subscriptions; nil: none on this backend.
	alerts *alerts.Service
}

// openEmbedded wires the SQLite store, sealed secrets, the worker pool and
// the in-process scheduler of a data directory, with m observing runs, the
// queue and the store, and code running CODE steps.
func openEmbedded(ctx context.Context, cfg config, code automation.CodeRunner, log *slog.Logger, m *metrics.Metrics) (*backend, error) {
	// flowd is the one process that writes flows, so the receivers' flow
	// and route lookups are cached and dropped on every change; the TTL
	// only bounds a change made behind its back.
	dir, err := datadir.Open(ctx, cfg.DataDir, sqlitestore.CacheFlows(2*time.Second))
	if err != nil {
		return nil, err
	}
	// One flowd executes the runs of a data directory: with the lock held,
	// every lease in the store belongs to a process that is gone, so the
	// runs it was executing are taken up again at once.
	unlock, err := dir.LockExclusive()
	if err != nil {
		dir.Close()
		return nil, err
	}
	closeAll := func() { unlock(); dir.Close() }
	if n, err := dir.Store.ReleaseLeases(ctx); err != nil {
		closeAll()
		return nil, err
	} else if n > 0 {
		log.Info("resuming runs left by a previous process", "count", n)
	}

	m.WatchQueue(func(ctx context.Context) (metrics.QueueStats, error) {
		st, err := dir.Store.QueueState(ctx)
		if err != nil {
			return metrics.QueueStats{}, err
		}
		out := metrics.QueueStats{Depth: st.Depth, Parked: st.Parked}
		if !st.OldestDue.IsZero() {
			out.OldestAge = max(0, time.Since(st.OldestDue))
		}
		return out, nil
	})
	// Built in the order they need each other: the pool's queue and the
	// scheduler exist before the Service that takes them, and are started
	// with it (pool.Run, sched.Start).
	pool := runworker.New(dir.Store, runworker.Config{Workers: cfg.Workers, Policy: cfg.RunPolicy, Log: log, MaxBytes: runBytes(cfg.Memory.Budget)})
	sched := cronscheduler.New(log)
	svc, err := automation.NewService(automation.Config{
		Store: dir.Store, Secrets: dir.Secrets, Polls: dir.Store, CursorKey: dir.CursorKey,
		Checker: engine.Checker{}, CodeChecker: jscode.Checker{},
		// Token endpoints are outbound calls like HTTP steps: the same guard.
		OAuthApps: dir.Store, OAuth: oauth.New(engine.GuardedTransport(cfg.AllowPrivate)),
		EngineURL: cfg.EngineURL, WorkflowURL: cfg.WorkflowURL, Log: log, Scheduler: sched,
		Apps: apps.MustLoad(),
		Runtime: &automation.RunRuntime{
			Runs: m.RunStore(dir.Store), Queue: m.RunQueue(pool.Notifying(dir.Store)), Inline: dir.Store, Policy: cfg.RunPolicy,
			Finished: m.FinishedRuns(dir.Store), SlotWaker: pool.Waking(dir.Store),
			// The store makes a caller due in the write that finishes its
			// child; the pool's waker only has an idle worker take it now.
			Waker: pool.Waker(),
			NewExecutor: func(env automation.ExecEnv) automation.Executor {
				return engine.New(engine.Config{Env: env, AllowPrivateNetworks: cfg.AllowPrivate, Code: code, Log: log,
					UserAgent: engine.UserAgent(cfg.EngineURL)})
			},
		},
	})
	if err != nil {
		closeAll()
		return nil, err
	}
	scheduled, err := svc.ScheduledFlows(ctx)
	if err != nil {
		closeAll()
		return nil, err
	}
	if err := sched.Load(ctx, scheduled); err != nil {
		// A flow whose schedule no longer parses must not keep the rest
		// from running.
		log.Error("load schedules", "err", err)
	}
	alertSvc, err := newAlerts(dir.Store, cfg.AllowPrivate, cfg.EngineURL, svc, log)
	if err != nil {
		closeAll()
		return nil, err
	}
	return &backend{
		svc: svc, ping: dir.Store.Ping, alerts: alertSvc,
		sessionKey: dir.CursorKey, // the dashboard derives its own keys from it
		start: func(ctx context.Context, wg *sync.WaitGroup) {
			wg.Go(func() { pool.Run(ctx, svc) })
			wg.Go(func() { purgeLoop(ctx, svc, log) })
			wg.Go(func() { sendAlerts(ctx, alertSvc, dir.Store, log) })
			sched.Start(svc)
		},
		stop: func(ctx context.Context) {
			if err := sched.Stop(ctx); err != nil {
				log.Warn("stop scheduler", "err", err)
			}
		},
		close: closeAll,
	}, nil
}

// purgeLoop deletes runs past their retention once soon after start and
// then every hour.
func purgeLoop(ctx context.Context, svc *automation.Service, log *slog.Logger) {
	t := time.NewTimer(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := svc.PurgeRuns(ctx); err != nil && ctx.Err() == nil {
			log.Error("purge expired runs", "err", err)
		} else if n > 0 {
			log.Info("purged expired runs", "count", n)
		}
		t.Reset(time.Hour)
	}
}

// bootstrap creates the first project and key of an empty data directory,
// prints the key once and leaves it in a 0600 file for scripts.
func bootstrap(ctx context.Context, svc *automation.Service, dataDir string, stdout io.Writer) error {
	key, err := svc.Bootstrap(ctx)
	if err != nil || key == "" {
		return err
	}
	path := filepath.Join(dataDir, datadir.InitialKeyFile)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dataDir, err)
	}
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fmt.Fprintf(stdout, "Created project %q (ENTERPRISE) and its first API key, shown only this once:\n\n    %s\n\nIt is also in %s (mode 0600). Create more with: flowctl keys create --project %s\n\n",
		automation.DefaultProject, key, path, automation.DefaultProject)
	return nil
}

type server struct {
	srv    *http.Server
	ln     net.Listener
	serves string
}

// surfaces are flowd's three HTTP handlers.
type surfaces struct{ api, engine, workflow, dashboard http.Handler }

// bind listens on the management address and, where configured, the
// separate addresses of the receivers.
func bind(cfg config) (map[string]net.Listener, error) {
	lns := map[string]net.Listener{}
	for _, addr := range []string{cfg.Addr, cfg.EngineAddr, cfg.WorkflowAddr} {
		if _, ok := lns[addr]; ok || addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		lns[addr] = ln
	}
	return lns, nil
}

// listen serves the handlers on the bound addresses. On a shared address
// the receivers take their path prefixes and the management API everything
// else.
func listen(cfg config, lns map[string]net.Listener, h surfaces) []server {
	type site struct {
		mux    *httpapi.Site
		serves []string
	}
	sites := map[string]*site{}
	var order []string
	mount := func(addr, pattern, what string, handler http.Handler) {
		st, ok := sites[addr]
		if !ok {
			// A Site, not a ServeMux: no HTML redirects for unclean paths.
			st = &site{mux: httpapi.NewSite()}
			sites[addr] = st
			order = append(order, addr)
		}
		st.mux.Handle(pattern, handler)
		st.serves = append(st.serves, what)
	}
	// A browser opening the bare address lands on the dashboard.
	mount(cfg.Addr, "/", "management API", dashboard.RootRedirect(h.api, nil))
	if h.dashboard != nil {
		mount(cfg.Addr, "/ui/", "dashboard", h.dashboard)
	}
	if cfg.EngineAddr != "" && cfg.EngineAddr != cfg.Addr {
		mount(cfg.EngineAddr, "/", "flow builder webhooks", h.engine)
	} else {
		mount(cfg.Addr, automation.FlowWebhookPrefix, "flow builder webhooks", h.engine)
	}
	if cfg.WorkflowAddr != "" && cfg.WorkflowAddr != cfg.Addr {
		mount(cfg.WorkflowAddr, "/", "workflow builder webhooks", h.workflow)
	} else {
		mount(cfg.Addr, automation.WorkflowWebhookPrefix, "workflow builder webhooks", h.workflow)
		// The Test Trigger URL of workflow builder flows.
		mount(cfg.Addr, automation.WorkflowTestPrefix, "workflow builder test URLs", h.workflow)
	}
	var out []server
	for _, addr := range order {
		// net/http's own error answers (malformed requests, headers
		// above MaxHeaderBytes) go out as JSON too.
		ln := httpapi.JSONErrorListener(lns[addr])
		out = append(out, server{ln: ln, serves: strings.Join(sites[addr].serves, ", "), srv: &http.Server{
			Handler:        sites[addr].mux,
			MaxHeaderBytes: httpapi.MaxHeaderBytes,
			// "OPTIONS *" reaches the site, which answers it in JSON.
			DisableGeneralOptionsHandler: true,
			ReadHeaderTimeout:            10 * time.Second,
			ReadTimeout:                  60 * time.Second,
			// ON_COMPLETION webhooks wait up to the sync timeout for their run.
			WriteTimeout: cfg.SyncTimeout + 30*time.Second,
			IdleTimeout:  120 * time.Second,
		}})
	}
	return out
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // checked in loadConfig
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

// gcPercent is flowd's garbage collection target unless GOGC says
// otherwise: the heap may grow to three times what is live between
// collections instead of twice. Under a webhook load, allocation and
// collection were about a tenth of the CPU; at 200 a webhook takes some 5
// to 10% less CPU for about 8 MB more resident memory, and
// FLOWD_MEMORY_LIMIT still bounds the heap.
const gcPercent = 200

// applyGCPercent sets gcPercent when GOGC is not set.
func applyGCPercent(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

// applyMemoryLimit sets the runtime's soft memory limit from
// FLOWD_MEMORY_LIMIT: near it the garbage collector works harder, so that a
// burst of large payloads slows flowd down instead of growing it past its
// container. GOMEMLIMIT, when set, is the runtime's own and wins.
func applyMemoryLimit(cfg config, getenv func(string) string, log *slog.Logger) {
	if getenv("GOMEMLIMIT") != "" {
		log.Info("memory limit from GOMEMLIMIT", "bytes", debug.SetMemoryLimit(-1))
		return
	}
	if cfg.MemoryLimit > 0 {
		debug.SetMemoryLimit(cfg.MemoryLimit)
		log.Info("memory limit", "bytes", cfg.MemoryLimit)
	}
}
