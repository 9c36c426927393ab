package pgstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"flowservice/pkg/automation"
)

// flowStops is the in-memory record of when each flow was last disabled
// (automation.Flow.StoppedAt), which AppendSteps checks so that a running
// run stops at its next step without a read per step. A disable made on
// any node reaches every node's record through changesChannel at its
// commit (wake.go), and the listener reads the whole record again from
// the flows each time it connects, so a node that was cut off (or just
// started) misses none. A run the record misses while the listener is
// down is stopped by the flow its next attempt reads. One entry per
// disabled flow, dropped with the flow.
type flowStops struct {
	mu sync.RWMutex
	at map[string]time.Time
}

// loadStops replaces the record with what the flows hold. Called by the
// listener after LISTEN: a disable committed after this read arrives as a
// notification, handled after it.
func (s *Store) loadStops(ctx context.Context) error {
	rows, err := s.r.QueryContext(ctx, `SELECT id, doc->>'stoppedAt' FROM flows WHERE doc->>'stoppedAt' IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("pgstore: load flow stops: %w", err)
	}
	defer rows.Close()
	at := map[string]time.Time{}
	for rows.Next() {
		var id, ts string
		if err := rows.Scan(&id, &ts); err != nil {
			return fmt.Errorf("pgstore: load flow stops: %w", err)
		}
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return fmt.Errorf("pgstore: load flow stops: flow %s: %w", id, err)
		}
		at[id] = t.UTC()
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("pgstore: load flow stops: %w", err)
	}
	s.stops.mu.Lock()
	s.stops.at = at
	s.stops.mu.Unlock()
	return nil
}

func (f *flowStops) set(flowID string, at *time.Time) {
	if at == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == nil {
		f.at = map[string]time.Time{}
	}
	f.at[flowID] = *at
}

func (f *flowStops) drop(flowID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.at, flowID)
}

// stops reports whether the flow was disabled since the run was created.
func (f *flowStops) stops(r automation.Run) bool {
	f.mu.RLock()
	at, ok := f.at[r.FlowID]
	f.mu.RUnlock()
	return ok && automation.StopsRun(&at, r.Created)
}

// stoppedAtKey is the member of a flow's stored document that holds
// StoppedAt (which the API's JSON of a flow leaves out).
const stoppedAtKey = `"stoppedAt"`

// withStoppedAt adds f.StoppedAt to the flow's document doc.
func withStoppedAt(doc []byte, f automation.Flow) []byte {
	if f.StoppedAt == nil || len(doc) < 2 {
		return doc
	}
	out := append(doc[:len(doc)-1:len(doc)-1], ","+stoppedAtKey+":"...)
	out = append(out, '"')
	out = append(out, formatTime(*f.StoppedAt)...)
	return append(out, '"', '}')
}

// readStoppedAt sets f.StoppedAt from the flow's document doc.
func readStoppedAt(doc []byte, f *automation.Flow) error {
	if !bytes.Contains(doc, []byte(stoppedAtKey)) {
		return nil // never disabled: skips a second decode
	}
	var v struct {
		StoppedAt *time.Time `json:"stoppedAt"`
	}
	if err := json.Unmarshal(doc, &v); err != nil {
		return fmt.Errorf("decode stoppedAt: %w", err)
	}
	f.StoppedAt = v.StoppedAt
	return nil
}
