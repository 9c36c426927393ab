package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"flowservice/pkg/automation"
	"flowservice/pkg/datadir"
	"flowservice/pkg/metrics"
	"flowservice/pkg/pgstore"
	"flowservice/pkg/sealedsecrets"
	"flowservice/pkg/tracing"
)

// cluster is what a node on a shared database has beyond its store: the
// leases of the cluster duties and the listener of runs made due by other
// nodes.
type cluster struct {
	duties map[string]*duty
	listen func(ctx context.Context, onDue func())
}

// openPostgres wires a flowd node on PostgreSQL (FLOWD_BACKEND=postgres):
// the same Service, engine and worker pool as the embedded backend over
// pgstore, secrets sealed with FLOWD_SECRET_KEY, and the cluster duties
// (cron and POLL, the alert sender, retention) done by the node that holds
// each one's lease. Any number of nodes may run on one database.
func openPostgres(ctx context.Context, cfg config, code automation.CodeRunner, tracer *tracing.Tracer, log *slog.Logger, m *metrics.Metrics) (*backend, error) {
	// No flow cache: a flow saved on another node must be served here at
	// once, and the write lock, not these reads, is the cluster's ceiling.
	store, err := pgstore.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if err := store.CheckSecretKey(ctx, cfg.SecretKey); err != nil {
		store.Close()
		if errors.Is(err, pgstore.ErrWrongSecretKey) {
			return nil, fmt.Errorf("refusing to start: %w", err)
		}
		return nil, err
	}
	secrets, err := sealedsecrets.New(store, cfg.SecretKey)
	if err != nil {
		store.Close()
		return nil, err
	}
	// No ReleaseLeases here, unlike the embedded backend: the leases in
	// the database may be other nodes' live ones. A dead node's runs are
	// taken when their leases run out.
	name := nodeName()
	log.Info("cluster node", "node", name, "dutyLease", cfg.DutyLease.String())
	c := &cluster{duties: map[string]*duty{}, listen: store.ListenDue}
	for _, d := range []string{dutyCron, dutyAlerts, dutySweep} {
		c.duties[d] = newDuty(d, name, store, cfg.DutyLease, log)
	}
	return wireNode(ctx, cfg, code, tracer, log, m, node{
		store: store, users: store, waitpoints: store, secrets: secrets, cluster: c,
		// Quotas are the project's across the nodes, not each node's.
		buckets: store.Buckets(),
		// Derived as a data directory derives it from its key file, so
		// that every node accepts the cursors and sessions of the others.
		cursorKey: datadir.CursorKey(cfg.SecretKey),
		close:     func() { store.Close() },
		queue: func(ctx context.Context) (metrics.QueueStats, error) {
			st, err := store.QueueState(ctx)
			return queueStats(st.Depth, st.Parked, st.OldestDue), err
		},
	})
}
