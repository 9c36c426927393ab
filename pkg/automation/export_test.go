package automation

import (
	"context"
	"time"
)

// ReceiveWebhook starts the run of trigger data already built, as Accept
// does after its checks, for tests of what follows the start (the run is
// not awaited: an ON_COMPLETION flow's run comes back claimed).
func (s *RunService) ReceiveWebhook(ctx context.Context, f Flow, td TriggerData) (Run, error) {
	return s.receive(ctx, f, td)
}

// ReceiveWebhookWithin is ReceiveWebhook with the one-commit path's wait.
func (s *RunService) ReceiveWebhookWithin(ctx context.Context, f Flow, td TriggerData, wait time.Duration) (Run, error) {
	if r, done, err := s.runPure(ctx, f, td, wait); done {
		return r, err
	}
	return s.receive(ctx, f, td)
}

// LowerSearchBounds sets the flow search's and the filtered audit log's
// read bounds for one test.
func LowerSearchBounds(t interface{ Cleanup(func()) }, flows, audit int) {
	f, a := maxFlowSearch, maxAuditScan
	maxFlowSearch, maxAuditScan = flows, audit
	t.Cleanup(func() { maxFlowSearch, maxAuditScan = f, a })
}
