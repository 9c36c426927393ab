package runworker

import (
	"context"

	"flowservice/pkg/automation"
)

var _ automation.Waker = notifying{}

// WakeRun tells idle workers that a run waiting for a child is due: the
// embedded store made it due in the write that finished the child
// (automation.Waker), and a worker takes it at once instead of at the next
// poll. A queue that wakes runs itself is told first.
func (n notifying) WakeRun(ctx context.Context, project, runID string) error {
	if w, ok := n.RunQueue.(automation.Waker); ok {
		if err := w.WakeRun(ctx, project, runID); err != nil {
			return err
		}
	}
	n.p.Notify()
	return nil
}
