package automation

import "context"

// expressionKey evaluates the webhook's idempotencyKey over the delivery.
// A delivery for which it fails or gives nothing (an event without the
// field) is not deduplicated: refusing it would lose the event. The key
// has a namespace of its own, so that a header value and an expression
// value never name the same first delivery.
func (s *FlowService) expressionKey(ctx context.Context, f Flow, td TriggerData) string {
	w := f.Trigger.Webhook
	if w == nil || w.IdempotencyKey == "" || s.checker == nil {
		return ""
	}
	k, err := s.checker.TriggerKey(ctx, w.IdempotencyKey, td)
	if err != nil || k == "" {
		return ""
	}
	return "\x00key\x00" + k
}
