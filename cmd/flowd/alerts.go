package main

import (
	"context"
	"log/slog"
	"time"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/engine"
)

// alertStore is the alert outbox of a flowd store (sqlitestore's and
// pgstore's): the alerts.Service's store, and what flowd's background work
// asks of it.
type alertStore interface {
	alerts.Store
	alerts.FlowReader
	// AlertsWritten is signalled when this process writes an event.
	AlertsWritten() <-chan struct{}
	ReleaseAlertClaims(ctx context.Context) (int, error)
	PurgeDeliveries(ctx context.Context, before time.Time, limit int) (int, error)
}

// alertsPoll is how often the sender looks for due retries when no event
// woke it.
const alertsPoll = time.Second

// newAlerts is the event subscription service over the embedded store:
// deliveries go through the HTTP step's SSRF-guarded transport, say who
// sends them as HTTP steps do (engine.UserAgent of engineURL), and count
// in the project's outboundPerMinute bucket, the one the engine's steps
// take from (outbound: the automation.Service).
func newAlerts(store alertStore, allowPrivate bool, engineURL string, outbound automation.OutboundGate, log *slog.Logger) (*alerts.Service, error) {
	return alerts.NewService(alerts.Config{
		Store: store, Flows: store, Log: log, UserAgent: engine.UserAgent(engineURL), Outbound: outbound,
		Client: alerts.NewClient(engine.GuardedTransport(allowPrivate)),
	})
}

// sendAlerts delivers due events until ctx ends: woken at once by a new
// event, and every alertsPoll for retries (alerts.Service.Run). At start
// every claim is a dead process's (one flowd holds the data directory), so
// those deliveries are made again: at least once, with the same
// webhook-id.
func sendAlerts(ctx context.Context, svc *alerts.Service, store alertStore, log *slog.Logger) {
	if n, err := store.ReleaseAlertClaims(ctx); err != nil {
		log.Error("release alert claims", "err", err)
	} else if n > 0 {
		log.Info("resending alerts left by a previous process", "count", n)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		purgeDeliveries(ctx, store, log)
	}()
	svc.Run(ctx, store.AlertsWritten(), alertsPoll)
	<-done
}

// purgeDeliveries deletes deliveries past alerts.Retention every hour
// until ctx ends.
func purgeDeliveries(ctx context.Context, store alertStore, log *slog.Logger) {
	purge := time.NewTicker(time.Hour)
	defer purge.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-purge.C:
		}
		if n, err := store.PurgeDeliveries(ctx, time.Now().Add(-alerts.Retention), 10_000); err != nil && ctx.Err() == nil {
			log.Error("purge alert deliveries", "err", err)
		} else if n > 0 {
			log.Info("purged alert deliveries", "count", n)
		}
	}
}

// sweepAlerts sends due deliveries every alertsPoll until ctx ends: flowd's
// aws backend in place of the stage's sweep schedule.
func sweepAlerts(ctx context.Context, svc *alerts.Service) {
	svc.Run(ctx, nil, alertsPoll)
}
