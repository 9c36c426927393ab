package engine

import (
	"context"
	"fmt"
)

// admitOutbound waits, before a request is sent, until the run's project
// may send it under its outboundPerMinute quota (automation.OutboundGate):
// a step over the quota waits, it does not fail. The wait does not count
// towards the request's own timeout; the run's does bound it.
func (x *execution) admitOutbound(ctx context.Context, where string) *stepError {
	if x.e.outbound == nil {
		return nil
	}
	if err := x.e.outbound.AdmitOutbound(ctx, x.flow.Project); err != nil {
		if ctx.Err() != nil {
			return &stepError{msg: where + ": the run ended while the request waited for the project's outboundPerMinute quota", retryable: true}
		}
		return &stepError{msg: fmt.Sprintf("%s: reading the project's outboundPerMinute quota failed: %v", where, err), retryable: true}
	}
	return nil
}
