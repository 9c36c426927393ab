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
	"flowservice/pkg/mcpserver"
	"flowservice/pkg/metrics"
	"flowservice/pkg/oauth"
	"flowservice/pkg/passwords"
	"flowservice/pkg/runworker"
	"flowservice/pkg/sandbox"
	"flowservice/pkg/sqlitestore"
	"flowservice/pkg/tracing"
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
	// Traces (OTEL_* variables, off without an OTLP endpoint): spans still
	// queued are sent at the end, within the shutdown grace.
	tracer, err := tracing.FromEnv(ctx, "flowd", log)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
		defer cancel()
		if err := tracer.Shutdown(sctx); err != nil {
			log.Warn("traces not all sent", "err", err)
		}
	}()
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
		b, err = openAWS(ctx, cfg, code, tracer, getenv, log, stderr)
	} else if cfg.Backend == "postgres" {
		b, err = openPostgres(ctx, cfg, code, tracer, log, m)
	} else {
		b, err = openEmbedded(ctx, cfg, code, tracer, log, m)
	}
	if err != nil {
		return err
	}
	defer b.close()
	if err := bootstrap(ctx, b.svc, cfg.DataDir, stdout); err != nil && cfg.Backend == "postgres" {
		// Nodes starting together on an empty database race to create the
		// first project; the one that lost finds it made.
		if err = bootstrap(ctx, b.svc, cfg.DataDir, stdout); err != nil {
			return err
		}
	} else if err != nil {
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
			httpapi.WithMCP(mcpserver.New(b.svc, mcpserver.Options{Wait: cfg.MCPWait, Version: version(), Log: log})),
			httpapi.WithMetrics(m.Handler(metrics.HandlerOptions{
				Token: cfg.MetricsToken, Open: metrics.IsLoopback(cfg.Addr), Ping: b.ping, Refuse: httpapi.WriteError,
			}))),
		engine:   m.Receiver("flow_builder", httpapi.NewWebhook(b.svc, hooks)),
		workflow: m.Receiver("workflow_builder", httpapi.NewWorkflowHook(b.svc, hooks)),
		dashboard: dashboard.New(b.svc, dashboard.Options{
			Key: b.sessionKey, TrustedProxies: cfg.TrustedProxies, Log: log, InitialKeyFile: keyFile,
			OpenAPI: httpapi.OpenAPIDocument(), Alerts: b.alerts, ClientIP: httpapi.TrustedClientIP(cfg.TrustedProxies),
			OIDC: cfg.OIDC,
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
func openEmbedded(ctx context.Context, cfg config, code automation.CodeRunner, tracer *tracing.Tracer, log *slog.Logger, m *metrics.Metrics) (*backend, error) {
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

	return wireNode(ctx, cfg, code, tracer, log, m, node{
		store: dir.Store, users: dir.Store, waitpoints: dir.Store, secrets: dir.Secrets, cursorKey: dir.CursorKey, close: closeAll,
		queue: func(ctx context.Context) (metrics.QueueStats, error) {
			st, err := dir.Store.QueueState(ctx)
			return queueStats(st.Depth, st.Parked, st.OldestDue), err
		},
	})
}

// queueStats is the metrics' view of a store's queue state.
func queueStats(depth, parked int, oldestDue time.Time) metrics.QueueStats {
	out := metrics.QueueStats{Depth: depth, Parked: parked}
	if !oldestDue.IsZero() {
		out.OldestAge = max(0, time.Since(oldestDue))
	}
	return out
}

// nodeStore is what a flowd process runs on: sqlitestore's Store (one
// process on a data directory) and pgstore's (nodes on one database).
type nodeStore interface {
	automation.Store
	automation.WorkQueue
	automation.RunStore
	automation.RunQueue
	automation.InlineQueue
	automation.FinishedRuns
	automation.SlotWaker
	automation.PollStore
	automation.OAuthAppStore
	alertStore
	Ping(ctx context.Context) error
}

// node is a store and what goes with it, for wireNode.
type node struct {
	store nodeStore
	users automation.UserStore // nil: people cannot sign in (API keys only)
	// waitpoints keeps approvals and callbacks; nil: APPROVAL steps and
	// WAIT for a callback fail with a message saying so.
	waitpoints automation.WaitpointStore
	secrets    automation.Secrets
	// buckets counts the projects' rate quotas where nodes share a
	// database; nil: in this process's memory (one process).
	buckets   automation.RateBuckets
	cursorKey []byte
	queue     func(context.Context) (metrics.QueueStats, error)
	close     func()
	// cluster is set on nodes that share their database: the duties are
	// held through its leases, and runs are announced through its
	// listener. nil: this process is alone and does every duty.
	cluster *cluster
}

// wireNode builds the Service over n's store with the worker pool, the
// scheduler and the alert sender, the same on every backend flowd runs
// runs for itself.
func wireNode(ctx context.Context, cfg config, code automation.CodeRunner, tracer *tracing.Tracer, log *slog.Logger, m *metrics.Metrics, n node) (*backend, error) {
	m.WatchQueue(n.queue)
	// Built in the order they need each other: the pool's queue and the
	// scheduler exist before the Service that takes them, and are started
	// with it (pool.Run, sched.Start).
	pool := runworker.New(n.store, runworker.Config{Workers: cfg.Workers, Policy: cfg.RunPolicy, Log: log, MaxBytes: runBytes(cfg.Memory.Budget)})
	sched := cronscheduler.New(log)
	testHooks(sched)
	svc, err := automation.NewService(automation.Config{
		Store: n.store, Secrets: n.secrets, Polls: n.store, CursorKey: n.cursorKey,
		Checker: engine.Checker{}, CodeChecker: jscode.Checker{},
		// Token endpoints are outbound calls like HTTP steps: the same guard,
		// and a refresh made for a step is a span of that step.
		OAuthApps: n.store, OAuth: oauth.New(engine.TraceTransport(tracer.Port(), engine.GuardedTransport(cfg.AllowPrivate))),
		EngineURL: cfg.EngineURL, WorkflowURL: cfg.WorkflowURL, Log: log, Scheduler: sched,
		Users: n.users, Passwords: passwords.Hasher{}, RateBuckets: n.buckets,
		Tracer: tracer.Port(),
		Apps:   apps.MustLoad(),
		Runtime: &automation.RunRuntime{
			Runs: m.RunStore(n.store), Queue: m.RunQueue(pool.Notifying(n.store)), Inline: n.store, Policy: cfg.RunPolicy,
			Finished: m.FinishedRuns(n.store), SlotWaker: pool.Waking(n.store),
			// The store makes a caller due in the write that finishes its
			// child; the pool's waker only has an idle worker take it now.
			Waker: pool.Waker(),
			// A decision makes the run's queue entry due in its own write.
			Waitpoints: n.waitpoints,
			NewExecutor: func(env automation.ExecEnv) automation.Executor {
				return engine.New(engine.Config{Env: env, AllowPrivateNetworks: cfg.AllowPrivate, Code: code, Log: log,
					UserAgent: engine.UserAgent(cfg.EngineURL)})
			},
		},
	})
	if err != nil {
		n.close()
		return nil, err
	}
	scheduled, err := svc.ScheduledFlows(ctx)
	if err != nil {
		n.close()
		return nil, err
	}
	if err := sched.Load(ctx, scheduled); err != nil {
		// A flow whose schedule no longer parses must not keep the rest
		// from running.
		log.Error("load schedules", "err", err)
	}
	alertSvc, err := newAlerts(n.store, cfg.AllowPrivate, cfg.EngineURL, svc, log)
	if err != nil {
		n.close()
		return nil, err
	}
	b := &backend{
		svc: svc, ping: n.store.Ping, alerts: alertSvc,
		sessionKey: n.cursorKey, // the dashboard derives its own keys from it
		stop: func(ctx context.Context) {
			if err := sched.Stop(ctx); err != nil {
				log.Warn("stop scheduler", "err", err)
			}
		},
		close: n.close,
	}
	if n.cluster == nil {
		b.start = func(ctx context.Context, wg *sync.WaitGroup) {
			wg.Go(func() { pool.Run(ctx, svc) })
			wg.Go(func() { purgeLoop(ctx, svc, log) })
			wg.Go(func() { sendAlerts(ctx, alertSvc, n.store, log) })
			sched.Start(svc)
		}
		return b, nil
	}
	c := n.cluster
	sched.Gate(c.duties[dutyCron].Held)
	b.start = func(ctx context.Context, wg *sync.WaitGroup) {
		wg.Go(func() { pool.Run(ctx, svc) })
		// A run enqueued on another node wakes an idle worker here.
		c.listen(ctx, pool.Notify)
		for _, d := range c.duties {
			wg.Go(func() { d.keep(ctx) })
		}
		wg.Go(func() {
			c.duties[dutySweep].while(ctx, func(ctx context.Context) {
				go purgeDeliveries(ctx, n.store, log)
				purgeLoop(ctx, svc, log)
			})
		})
		// Claims of deliveries run out by themselves: another node's may
		// be under way, so none is released here.
		wg.Go(func() {
			c.duties[dutyAlerts].while(ctx, func(ctx context.Context) { alertSvc.Run(ctx, n.store.AlertsWritten(), alertsPoll) })
		})
		wg.Go(func() { reloadSchedules(ctx, svc, sched, c.duties[dutyCron].renewEvery(), log) })
		sched.Start(svc)
	}
	return b, nil
}

// reloadSchedules reads the schedule set every period until ctx ends: a
// flow saved on another node changed only that node's scheduler, and the
// holder of the cron duty must fire it.
func reloadSchedules(ctx context.Context, svc *automation.Service, sched *cronscheduler.Scheduler, period time.Duration, log *slog.Logger) {
	t := time.NewTicker(period)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		flows, err := svc.ScheduledFlows(ctx)
		if err == nil {
			err = sched.Reconcile(ctx, flows)
		}
		// The same failure every period is logged once.
		if msg := fmt.Sprint(err); err != nil && msg != last && ctx.Err() == nil {
			log.Error("reload schedules", "err", err)
			last = msg
		} else if err == nil {
			last = ""
		}
	}
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
		// Links and callback URLs are made on the engine URL: the API
		// serves them there too (approvals.go in pkg/httpapi).
		mount(cfg.EngineAddr, "/approvals/", "approval links", h.api)
		mount(cfg.EngineAddr, "/api/v1/callbacks/", "callbacks", h.api)
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
			// ON_COMPLETION webhooks wait up to the sync timeout for their
			// run, MCP tool calls up to theirs.
			WriteTimeout: max(cfg.SyncTimeout, cfg.MCPWait) + 30*time.Second,
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
