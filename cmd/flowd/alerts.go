package main

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"flowservice/pkg/alerts"
	"flowservice/pkg/engine"
	"flowservice/pkg/sqlitestore"
)

// alertsPoll is how often the sender looks for due retries when no event
// woke it.
const alertsPoll = time.Second

// alertsBatch is how many deliveries the sender makes at once.
const alertsBatch = 16

// newAlerts is the event subscription service over the embedded store:
// deliveries go through the HTTP step's SSRF-guarded transport.
func newAlerts(store *sqlitestore.Store, allowPrivate bool, log *slog.Logger) (*alerts.Service, error) {
	return alerts.NewService(alerts.Config{
		Store: store, Flows: store, Log: log, UserAgent: "flowd-alerts",
		Client: &http.Client{
			Transport: engine.GuardedTransport(allowPrivate),
			// A redirect is not followed: the receiver is the subscription's URL.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	})
}

// sendAlerts delivers due events until ctx ends: woken at once by a new
// event, and every alertsPoll for retries. At start every claim is a dead
// process's (one flowd holds the data directory), so those deliveries are
// made again: at least once, with the same webhook-id.
func sendAlerts(ctx context.Context, svc *alerts.Service, store *sqlitestore.Store, log *slog.Logger) {
	if n, err := store.ReleaseAlertClaims(ctx); err != nil {
		log.Error("release alert claims", "err", err)
	} else if n > 0 {
		log.Info("resending alerts left by a previous process", "count", n)
	}
	wake := store.AlertsWritten()
	tick := time.NewTicker(alertsPoll)
	defer tick.Stop()
	purge := time.NewTicker(time.Hour)
	defer purge.Stop()
	for {
		n, err := svc.DeliverDue(ctx, alertsBatch)
		if err != nil && ctx.Err() == nil {
			log.Error("deliver alerts", "err", err)
		}
		if n == alertsBatch {
			continue // more may be due
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-tick.C:
		case <-purge.C:
			if n, err := store.PurgeDeliveries(ctx, time.Now().Add(-alerts.Retention), 10_000); err != nil && ctx.Err() == nil {
				log.Error("purge alert deliveries", "err", err)
			} else if n > 0 {
				log.Info("purged alert deliveries", "count", n)
			}
		}
	}
}

// sweepAlerts sends due deliveries every alertsPoll until ctx ends: flowd's
// aws backend in place of the stage's sweep schedule.
func sweepAlerts(ctx context.Context, svc *alerts.Service, log *slog.Logger) {
	tick := time.NewTicker(alertsPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := svc.DeliverDue(ctx, alertsBatch); err != nil && ctx.Err() == nil {
			log.Error("deliver alerts", "err", err)
		}
	}
}
