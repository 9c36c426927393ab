package automation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
)

// FlowState returns a flow's state as expressions see it under `state`.
func (s *FlowService) FlowState(ctx context.Context, project, flowID string) (map[string]any, error) {
	raw, err := s.store.FlowState(ctx, project, flowID)
	if err != nil {
		return nil, wrap("read flow state", err)
	}
	return decodeState(raw)
}

// StoreFlowState sets and deletes keys of a flow's state in one atomic
// change and returns the new state. A state that would exceed
// MaxStateBytes as JSON is refused (ErrInvalid), leaving it as it was.
func (s *FlowService) StoreFlowState(ctx context.Context, project, flowID string, set map[string]any, del []string) (map[string]any, error) {
	enc := make(map[string]json.RawMessage, len(set))
	for k, v := range set {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, Invalid("state key %q: the value is not representable as JSON", ClipID(k))
		}
		enc[k] = b
	}
	var out map[string]json.RawMessage
	err := s.store.UpdateFlowState(ctx, project, flowID, func(cur map[string]json.RawMessage) (map[string]json.RawMessage, error) {
		next := maps.Clone(cur)
		if next == nil {
			next = map[string]json.RawMessage{}
		}
		for _, k := range del {
			delete(next, k)
		}
		maps.Copy(next, enc)
		b, err := json.Marshal(next)
		if err != nil {
			return nil, fmt.Errorf("encode state: %w", err)
		}
		if len(b) > MaxStateBytes {
			return nil, Invalid("the flow's state would be %d bytes of JSON; it holds at most %d (delete keys you no longer need)", len(b), MaxStateBytes)
		}
		out = next
		return next, nil
	})
	if err != nil {
		if errors.Is(err, ErrInvalid) || IsNotFound(err) {
			return nil, err
		}
		return nil, wrap("store flow state", err)
	}
	return decodeState(out)
}

func decodeState(raw map[string]json.RawMessage) (map[string]any, error) {
	out := make(map[string]any, len(raw))
	for k, v := range raw {
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return nil, fmt.Errorf("automation: flow state key %q is not JSON: %w", k, err)
		}
		out[k] = x
	}
	return out, nil
}
