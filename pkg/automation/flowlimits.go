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
