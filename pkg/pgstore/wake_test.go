package pgstore_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/pgstore"
)

// TestEnqueueWakesOtherNode: a run enqueued through one store (node A)
// wakes the listener of another store on the same database (node B), and
// B claims it.
func TestEnqueueWakesOtherNode(t *testing.T) {
	ctx := context.Background()
	a := open(t)
	b, err := pgstore.Open(ctx, a.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	woken := make(chan struct{}, 16)
	b.ListenDue(ctx, func() { woken <- struct{}{} })
	wait := func(what string) {
		t.Helper()
		select {
		case <-woken:
		case <-time.After(time.Minute): // a failure bound only: the event ends the wait
			t.Fatalf("no wake-up %s", what)
		}
	}
	wait("when the listener connected")
	r := automation.Run{ID: "run_wake", Project: "prj_w", FlowID: "flw_w", Status: automation.RunRunning,
		Created: time.Now().UTC(), Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}}
	if err := a.Enqueue(ctx, r); err != nil {
		t.Fatal(err)
	}
	wait("after A's enqueue")
	e, ok, err := b.ClaimDue(ctx, time.Now(), time.Minute)
	if err != nil || !ok || e.RunID != r.ID {
		t.Fatalf("B's claim = %+v, %v, %v; want %s", e, ok, err, r.ID)
	}
}
