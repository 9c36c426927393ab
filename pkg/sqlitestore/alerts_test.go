package sqlitestore_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/automation/storetest"
)

func TestAlertsContract(t *testing.T) {
	storetest.RunAlerts(t, func(t *testing.T) storetest.AlertsEnv {
		s := openAt(t, filepath.Join(t.TempDir(), "alerts.db"))
		return storetest.AlertsEnv{
			RunEnv: storetest.RunEnv{Store: s, Runs: s, Create: s.Enqueue, CreateClaimed: s.EnqueueClaimed, InsertFinished: s.InsertFinishedRun},
			Alerts: s, Waitpoints: s,
		}
	})
}

// TestPurgeDeliveries: finished deliveries of events older than the cut
// go, with their events; pending ones and newer ones stay.
func TestPurgeDeliveries(t *testing.T) {
	ctx := t.Context()
	s := openAt(t, filepath.Join(t.TempDir(), "purge.db"))
	sub := alerts.Subscription{ID: "sub_1", Project: "prj_a", URL: "https://x.example/", Events: []string{alerts.EventPing},
		Status: alerts.StatusActive, Secret: alerts.NewSecret(), Created: time.Now()}
	if err := s.CreateSubscription(ctx, sub); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-31 * 24 * time.Hour)
	add := func(at time.Time, final bool) alerts.Delivery {
		t.Helper()
		e, err := alerts.NewEvent("prj_a", alerts.EventPing, "", map[string]string{}, at)
		if err != nil {
			t.Fatal(err)
		}
		d := alerts.NewDelivery(e, sub.ID)
		if err := s.AddEvent(ctx, e, []alerts.Delivery{d}); err != nil {
			t.Fatal(err)
		}
		if final {
			d = alerts.Next(d, alerts.Attempt{At: at, StatusCode: 204}, at)
			if err := s.RecordAttempt(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	gone, pending, recent := add(old, true), add(old, false), add(time.Now(), true)
	n, err := s.PurgeDeliveries(ctx, time.Now().Add(-alerts.Retention), 100)
	if err != nil || n != 1 {
		t.Fatalf("PurgeDeliveries = %d, %v; want 1", n, err)
	}
	if _, err := s.Delivery(ctx, "prj_a", sub.ID, gone.ID); !errors.Is(err, automation.ErrNotFound) {
		t.Errorf("the old finished delivery: %v, want it gone", err)
	}
	for _, d := range []alerts.Delivery{pending, recent} {
		if _, err := s.Delivery(ctx, "prj_a", sub.ID, d.ID); err != nil {
			t.Errorf("delivery %s (%s): %v, want it kept", d.ID, d.Status, err)
		}
	}
	// The pending delivery's event is still there to send.
	due, err := s.ClaimDeliveries(ctx, time.Now().Add(time.Hour), time.Minute, 10, nil)
	if err != nil || len(due) != 1 || due[0].Delivery.ID != pending.ID || len(due[0].Event.Payload) == 0 {
		t.Fatalf("claim after the purge = %+v, %v; want the pending delivery with its payload", due, err)
	}
}
