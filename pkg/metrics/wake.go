package metrics

import (
	"context"

	"flowservice/pkg/automation"
)

var _ automation.Waker = (*runQueue)(nil)

// WakeRun passes a wake-up (a child run's end, automation.Waker) on to the
// queue it wraps, when that queue takes them.
func (q *runQueue) WakeRun(ctx context.Context, project, runID string) error {
	if w, ok := q.RunQueue.(automation.Waker); ok {
		return w.WakeRun(ctx, project, runID)
	}
	return nil
}
