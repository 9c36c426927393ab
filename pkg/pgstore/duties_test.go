package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/pgstore"
)

// TestDutyTakenOverWhenHolderStops: of two nodes one holds a duty; while
// it renews the other never gets it, and once it stops renewing (dies) the
// other has it within 30 s of its last renewal, on an injected clock.
func TestDutyTakenOverWhenHolderStops(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	now := time.Unix(1_700_000_000, 0)
	holds := func(node string) bool {
		t.Helper()
		ok, err := s.HoldDuty(ctx, "cron", node, now, pgstore.DutyLease)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !holds("a") || holds("b") {
		t.Fatal("first asker a should hold the duty, b not")
	}
	for range 10 { // a renews; b asks at every renewal
		now = now.Add(pgstore.DutyRenew)
		if !holds("a") || holds("b") {
			t.Fatalf("at %s: a should keep the duty while it renews", now)
		}
	}
	died := now
	for !holds("b") {
		now = now.Add(time.Second)
		if now.Sub(died) > 30*time.Second {
			t.Fatal("b did not take the duty within 30 s of a's last renewal")
		}
	}
	if d := now.Sub(died); d < pgstore.DutyLease {
		t.Fatalf("b took the duty %s after a's renewal, before its lease ran out", d)
	}
	if holds("a") {
		t.Fatal("a came back and took the duty from b while b's lease holds")
	}
	if err := s.ReleaseDuty(ctx, "cron", "b"); err != nil || !holds("a") {
		t.Fatalf("after b released the duty, a should take it at once: %v", err)
	}
}

// TestSecretKeyCheck: the first key is recorded; the same key passes, and
// another is refused naming FLOWD_SECRET_KEY.
func TestSecretKeyCheck(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	key := make([]byte, 32)
	if err := s.CheckSecretKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSecretKey(ctx, key); err != nil {
		t.Fatalf("same key: %v", err)
	}
	other := make([]byte, 32)
	other[0] = 1
	err := s.CheckSecretKey(ctx, other)
	if !errors.Is(err, pgstore.ErrWrongSecretKey) || !strings.Contains(err.Error(), "FLOWD_SECRET_KEY") {
		t.Fatalf("other key: %v, want an error naming FLOWD_SECRET_KEY", err)
	}
}
