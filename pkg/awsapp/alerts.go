package awsapp

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/pkg/alerts"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/engine"
)

// AlertsSweepBody is the body of the message a schedule sends to the run
// queue every minute (docs/alerts.md): the runner that receives it sends
// the deliveries that are due (retries, and any a crashed runner left),
// and acknowledges it.
const AlertsSweepBody = `{"alertsSweep":true}`

// alertsBatch is how many deliveries a runner claims at a time, and
// alertsRounds how many batches it sends per invocation at most.
const (
	alertsBatch  = 16
	alertsRounds = 8
)

// newAlerts is the event subscription service of a function, or nil when
// the stage has no alerts table (TABLE_ALERTS unset). Deliveries go
// through the HTTP step's SSRF-guarded transport.
func newAlerts(store *dynamostore.Store, cfg Config, log *slog.Logger) (*alerts.Service, error) {
	if cfg.Tables.Alerts == "" {
		return nil, nil
	}
	return alerts.NewService(alerts.Config{
		Store: store, Flows: store, Log: log, UserAgent: "flowd-alerts",
		Client: &http.Client{
			Transport:     engine.GuardedTransport(cfg.AllowPrivateNetworks),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	})
}

// WithAlerts wraps a runner: sweep messages are acknowledged and not
// handed to next, and after the batch the due deliveries are sent when the
// batch wrote events (written reports it) or held a sweep. A batch that
// did neither makes no request for alerts. svc nil: next as is.
func WithAlerts(next SQSHandler, svc *alerts.Service, written func() bool, log *slog.Logger) SQSHandler {
	if svc == nil {
		return next
	}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		sweep := false
		runs := ev.Records[:0:0]
		for _, m := range ev.Records {
			if m.Body == AlertsSweepBody {
				sweep = true
				continue
			}
			runs = append(runs, m)
		}
		ev.Records = runs
		resp, err := next(ctx, ev)
		if written() || sweep {
			for range alertsRounds {
				n, derr := svc.DeliverDue(ctx, alertsBatch)
				if derr != nil {
					log.ErrorContext(ctx, "deliver alerts", "err", derr)
				}
				if n < alertsBatch || ctx.Err() != nil {
					break
				}
			}
		}
		return resp, err
	}
}

// WithAlerts is the package's WithAlerts with this App's alerts: the
// runner function's wrapping, and flowd's aws backend's.
func (a *App) WithAlerts(h SQSHandler) SQSHandler {
	return WithAlerts(h, a.Alerts, a.alertsWritten, a.Log)
}
