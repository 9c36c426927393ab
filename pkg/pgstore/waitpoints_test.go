package pgstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/pgstore/pgtest"
)

// TestWaitpoints: a waitpoint is created once, found by its token's hash
// and listed in the inbox; a change that decides is written with it, and a
// second store on the same database (another node) reads the decision.
func TestWaitpoints(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	a, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	created, err := a.UpdateWaitpoint(ctx, "p1", "run_1", "approve", func(w *automation.Waitpoint, found bool) (bool, error) {
		if found {
			t.Fatal("a new waitpoint was found")
		}
		w.Kind, w.Status, w.TokenHash, w.Created = automation.WaitApproval, "PENDING", "hash1", now
		return false, nil
	})
	if err != nil || created.RunID != "run_1" {
		t.Fatalf("create: %+v %v", created, err)
	}
	if w, err := b.WaitpointByToken(ctx, "hash1"); err != nil || w.Step != "approve" || w.Project != "p1" {
		t.Fatalf("by token on the other node: %+v %v", w, err)
	}
	if _, err := b.Waitpoint(ctx, "p2", "run_1", "approve"); !errors.Is(err, automation.ErrNotFound) {
		t.Fatalf("another project's waitpoint: %v, want not found", err)
	}
	page, err := b.ListWaitpoints(ctx, "p1", automation.ListQuery{Status: "PENDING", Limit: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("inbox: %+v %v", page, err)
	}
	if _, err := b.UpdateWaitpoint(ctx, "p1", "run_1", "approve", func(w *automation.Waitpoint, found bool) (bool, error) {
		if !found || w.Status != "PENDING" {
			t.Fatalf("the other node reads %+v (found %v)", w, found)
		}
		w.Status = "DECIDED"
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if w, err := a.Waitpoint(ctx, "p1", "run_1", "approve"); err != nil || w.Status != "DECIDED" {
		t.Fatalf("decision on node a: %+v %v", w, err)
	}
	if page, _ := a.ListWaitpoints(ctx, "p1", automation.ListQuery{Status: "PENDING", Limit: 10}); len(page.Items) != 0 {
		t.Fatalf("a decided waitpoint is still pending: %+v", page.Items)
	}
}
