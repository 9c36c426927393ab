package alerts_test

import (
	"errors"
	"testing"
	"time"

	"flowservice/pkg/alerts"
)

// TestNextFollowsSchedule walks a delivery through failed attempts: at once,
// then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h, then FAILED.
func TestNextFollowsSchedule(t *testing.T) {
	now := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	d := alerts.Delivery{Status: alerts.DeliveryPending}
	want := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
	for i, wait := range want {
		d = alerts.Next(d, alerts.Attempt{At: now, StatusCode: 503}, now)
		if d.Status != alerts.DeliveryPending || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(now.Add(wait)) {
			t.Fatalf("after attempt %d: %s next %v, want PENDING at +%v", i+1, d.Status, d.NextAttemptAt, wait)
		}
		now = *d.NextAttemptAt
	}
	d = alerts.Next(d, alerts.Attempt{At: now, Error: "connection refused"}, now)
	if d.Status != alerts.DeliveryFailed || d.NextAttemptAt != nil || d.Attempts != 8 {
		t.Fatalf("after the 8th attempt: %+v, want FAILED with no next attempt", d)
	}
	if d.LastStatusCode != nil || d.LastError != "connection refused" {
		t.Fatalf("last = %v %q, want no code and the error", d.LastStatusCode, d.LastError)
	}
}

func TestNextByAnswer(t *testing.T) {
	now := time.Now()
	tests := []struct {
		code   int
		err    error
		status string
	}{
		{200, nil, alerts.DeliverySucceeded},
		{204, nil, alerts.DeliverySucceeded},
		{0, errors.New("dial: refused"), alerts.DeliveryPending},
		{408, nil, alerts.DeliveryPending},
		{429, nil, alerts.DeliveryPending},
		{500, nil, alerts.DeliveryPending},
		{503, nil, alerts.DeliveryPending},
		{301, nil, alerts.DeliveryFailed},
		{400, nil, alerts.DeliveryFailed},
		{401, nil, alerts.DeliveryFailed},
		{404, nil, alerts.DeliveryFailed},
		{410, nil, alerts.DeliveryFailed},
	}
	for _, tt := range tests {
		a := alerts.Attempt{At: now, StatusCode: tt.code}
		if tt.err != nil {
			a.Error = tt.err.Error()
		}
		d := alerts.Next(alerts.Delivery{Status: alerts.DeliveryPending}, a, now)
		if d.Status != tt.status || d.Attempts != 1 || len(d.History) != 1 {
			t.Errorf("answer %d %v: %s after %d attempts (history %d), want %s after 1", tt.code, tt.err, d.Status, d.Attempts, len(d.History), tt.status)
		}
	}
}
