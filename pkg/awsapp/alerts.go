package awsapp

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/dynamostore"
	"flowservice/pkg/engine"
)

// AlertsSweepBody is the body of the message a schedule sends to the run
// queue every minute (docs/alerts.md): the runner that receives it sends
// the deliveries that are due (retries, and any a crashed runner left),
// and acknowledges it.
const AlertsSweepBody = `{"alertsSweep":true}`

// alertsPerInvocation is how many deliveries a runner sends per
// invocation at most (alerts.Service.Drain): the rest wait for the next
// batch or sweep.
const alertsPerInvocation = 128

// newAlerts is the event subscription service of a function, or nil when
// the stage has no alerts table (TABLE_ALERTS unset). Deliveries go
// through the HTTP step's SSRF-guarded transport, say who sends them as
// HTTP steps do, and count in the project's outboundPerMinute bucket of
// this instance, the one its HTTP steps take from (outbound: the
// automation.Service).
func newAlerts(store *dynamostore.Store, cfg Config, outbound automation.OutboundGate, log *slog.Logger) (*alerts.Service, error) {
	if cfg.Tables.Alerts == "" {
		return nil, nil
	}
	return alerts.NewService(alerts.Config{
		Store: store, Flows: store, Log: log, UserAgent: engine.UserAgent(cfg.EngineURL), Outbound: outbound,
		Client: alerts.NewClient(engine.GuardedTransport(cfg.AllowPrivateNetworks)),
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
			if _, derr := svc.Drain(ctx, alertsPerInvocation); derr != nil {
				log.ErrorContext(ctx, "deliver alerts", "err", derr)
			}
		}
		return resp, err
	}
}

// nudgeAlerts hands the deliveries an HTTP invocation wrote (an
// approval.decided of a decision taken through the api or webhook
// function, a flow or connection event, the failure alert of a run a
// receiver finished inline) to a runner at once: one sweep message on the
// run queue, which the runner that receives it drains (WithAlerts). An
// HTTP function sends no alert itself: it answers a caller within API
// Gateway's 29 s and must not wait on a subscriber. If the send fails the
// deliveries are still in the table, due, and the schedule's sweep sends
// them within a minute.
func (a *App) nudgeAlerts(ctx context.Context) {
	if a.Alerts == nil || a.alertsWritten == nil || a.queue == nil || !a.alertsWritten() {
		return
	}
	if err := a.queue.SendControl(context.WithoutCancel(ctx), AlertsSweepBody); err != nil {
		a.Log.WarnContext(ctx, "hand the written alerts to a runner; the sweep sends them within a minute", "err", err)
	}
}

// WithAlerts is the package's WithAlerts with this App's alerts: the
// runner function's wrapping, and flowd's aws backend's.
func (a *App) WithAlerts(h SQSHandler) SQSHandler {
	return WithAlerts(h, a.Alerts, a.alertsWritten, a.Log)
}
