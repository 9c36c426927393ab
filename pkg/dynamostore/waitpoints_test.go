package dynamostore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/dynamostore"
)

// TestWaitpointTooLarge: a callback body that would pass the item limit is
// a 400 PAYLOAD_TOO_LARGE naming the bound, and the waitpoint stays
// pending, not a failed write (a 500).
func TestWaitpointTooLarge(t *testing.T) {
	t.Parallel()
	_, client, tables := newStore(t)
	s := dynamostore.New(client, tables)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	_, hash := automation.NewWaitpointToken()
	if _, err := s.UpdateWaitpoint(ctx, "prj_a", "run_1", "job", func(w *automation.Waitpoint, found bool) (bool, error) {
		*w = automation.Waitpoint{Kind: automation.WaitCallback, Status: automation.WaitpointPending, Created: now,
			ExpiresAt: now.Add(time.Hour), TokenHash: hash}
		return false, nil
	}); err != nil {
		t.Fatal(err)
	}
	_, err := s.UpdateWaitpoint(ctx, "prj_a", "run_1", "job", func(w *automation.Waitpoint, found bool) (bool, error) {
		w.Status, w.Callback = automation.WaitpointDecided, &automation.Callback{Body: strings.Repeat("x", 500_000), ReceivedAt: now}
		return true, nil
	})
	var e *automation.Error
	if !errors.As(err, &e) || e.Code != "PAYLOAD_TOO_LARGE" || !strings.Contains(e.Message, "350000") {
		t.Fatalf("a 500 KB callback = %v, want 400 PAYLOAD_TOO_LARGE naming 350000", err)
	}
	if w, err := s.Waitpoint(ctx, "prj_a", "run_1", "job"); err != nil || w.Decided() {
		t.Fatalf("after the refusal: %+v, %v; want it pending", w, err)
	}
}
