package automation

import (
	"encoding/json"
)

// Limited reports whether f bounds its runs (concurrency or throttle):
// only then does a run of f cost admission bookkeeping of its own.
func (f Flow) Limited() bool { return f.Concurrency != nil || f.Throttle != nil }

// Nullable is a field of an update body that can be absent (keep the
// value), null (remove it) or set.
type Nullable[T any] struct {
	Set   bool // present in the body, null or not
	Value *T   // nil for null
}

// JSONValue is the type the field holds when set, for a strict decoder
// that walks types to find unknown fields (pkg/httpapi).
func (Nullable[T]) JSONValue() any { return (*T)(nil) }

// UnmarshalJSON records that the field was present.
func (n *Nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set = true
	if string(b) == "null" {
		n.Value = nil
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	n.Value = &v
	return nil
}

// validateFlowLimits checks a flow's concurrency and throttle. Messages
// name the field.
func (s *flowValidator) validateFlowLimits(f *Flow) error {
	if c := f.Concurrency; c != nil {
		if c.Limit < 1 || c.Limit > MaxFlowLimit {
			return Invalid("concurrency.limit %d: from 1 to %d", c.Limit, MaxFlowLimit)
		}
		if err := s.checkLimitKey("concurrency.key", c.Key); err != nil {
			return err
		}
	}
	if t := f.Throttle; t != nil {
		if t.Limit < 1 || t.Limit > MaxFlowLimit {
			return Invalid("throttle.limit %d: from 1 to %d", t.Limit, MaxFlowLimit)
		}
		if t.Period == "" {
			return Invalid("throttle.period is required, such as \"1m\"")
		}
		if _, err := t.PeriodDuration(); err != nil {
			return Invalid("throttle.%v", err)
		}
		if err := s.checkLimitKey("throttle.key", t.Key); err != nil {
			return err
		}
	}
	return nil
}

func (s *flowValidator) checkLimitKey(field, key string) error {
	if key == "" {
		return nil
	}
	if len(key) > 1000 {
		return Invalid("%s is longer than 1000 characters", field)
	}
	if s.checker == nil {
		return nil
	}
	if err := s.checker.Expression(key); err != nil {
		return Invalid("%s: %v", field, err)
	}
	return nil
}
