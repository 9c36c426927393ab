package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// testRouteShapes: parameter paths are stored by shape (users/:id and
// users/:name are one path), listed by segment count with their project,
// and a shape that CheckShapeClash refuses is ROUTE_CONFLICT, whether the
// flow is created or moved; deleting or moving a flow frees its shape.
func testRouteShapes(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	p1, p2 := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)
	conflict := func(err error) bool {
		var e *automation.Error
		return errors.As(err, &e) && e.Code == "ROUTE_CONFLICT"
	}
	byID := webhookFlow(p1, "by id", "GET", "users/:id/orders", base)
	if err := s.CreateFlow(ctx, byID); err != nil {
		t.Fatal(err)
	}
	routes, err := s.RouteFlows(ctx, "users/:/orders")
	if err != nil || routes["GET"] != byID.ID {
		t.Fatalf("routes of the shape = %v, %v", routes, err)
	}
	shapes, err := s.RouteShapes(ctx, 3)
	if err != nil || !slices.Contains(shapes, automation.ShapeOwner{Shape: "users/:/orders", Project: p1}) {
		t.Fatalf("shapes = %v, %v", shapes, err)
	}
	if other, _ := s.RouteShapes(ctx, 2); slices.ContainsFunc(other, func(o automation.ShapeOwner) bool { return o.Shape == "users/:/orders" }) {
		t.Errorf("a 3-segment shape listed for 2 segments: %v", other)
	}

	for _, tt := range []struct {
		name string
		f    automation.Flow
		ok   bool
	}{
		{"same shape, same method", webhookFlow(p1, "by name", "GET", "users/:name/orders", base), false},
		{"same shape, other method", webhookFlow(p1, "by name post", "POST", "users/:name/orders", base), true},
		{"same shape, other project", webhookFlow(p2, "theirs", "PUT", "users/:uid/orders", base), false},
		{"overlapping shape", webhookFlow(p1, "overlap", "PATCH", ":org/42/orders", base), false},
		{"overlapping shape, other project", webhookFlow(p2, "overlap2", "PATCH", "users/7/:what", base), false},
		{"literal path, same project", webhookFlow(p1, "me", "GET", "users/me/orders", base), true},
		{"literal path, other project", webhookFlow(p2, "steal", "GET", "users/42/orders", base), false},
		{"other length", webhookFlow(p2, "short", "GET", "users/:id", base), true},
	} {
		err := s.CreateFlow(ctx, tt.f)
		if tt.ok && err != nil {
			t.Errorf("%s: %v", tt.name, err)
		}
		if !tt.ok && !conflict(err) {
			t.Errorf("%s: err = %v, want ROUTE_CONFLICT", tt.name, err)
		}
	}
	// A parameter shape over another project's literal path is refused too.
	lit := webhookFlow(p2, "literal", "GET", "teams/blue", base)
	if err := s.CreateFlow(ctx, lit); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateFlow(ctx, webhookFlow(p1, "teams", "GET", "teams/:team", base)); !conflict(err) {
		t.Errorf("shape over another project's literal path: %v", err)
	}
	// Moving a flow onto an overlapping shape is refused; moving it away
	// frees its shape.
	mover := webhookFlow(p2, "mover", "GET", "shops/:id", base)
	if err := s.CreateFlow(ctx, mover); err != nil {
		t.Fatal(err)
	}
	moved := mover
	moved.Version = 2
	moved.Trigger.Webhook = &automation.Webhook{HTTPMethod: "GET", Path: ":x/42/orders", ResponseMode: automation.RespondImmediately}
	if err := s.PutFlow(ctx, moved); !conflict(err) {
		t.Errorf("move onto an overlapping shape: %v", err)
	}
	moved.Trigger.Webhook.Path = "shops/:id/items"
	if err := s.PutFlow(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if shapes, _ := s.RouteShapes(ctx, 2); slices.ContainsFunc(shapes, func(o automation.ShapeOwner) bool { return o.Shape == "shops/:" }) {
		t.Errorf("the old shape is still listed: %v", shapes)
	}
	if err := s.DeleteFlow(ctx, p1, byID.ID); err != nil {
		t.Fatal(err)
	}
	// users/:/orders is still held by the POST flow of p1.
	if shapes, _ := s.RouteShapes(ctx, 3); !slices.Contains(shapes, automation.ShapeOwner{Shape: "users/:/orders", Project: p1}) {
		t.Errorf("shape dropped while a flow holds it: %v", shapes)
	}
}

// testRouteShapesRace: two flows saved at once with different shapes that
// can match one URL: exactly one is stored, in every round.
func testRouteShapesRace(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for round := range 5 {
		p1, p2 := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)
		seg := fmt.Sprintf("r%d", round)
		flows := []automation.Flow{
			webhookFlow(p1, "left", "GET", seg+"/:id/x"+seg, base),
			webhookFlow(p2, "right", "POST", ":id/"+seg+"/x"+seg, base),
		}
		errs := make([]error, len(flows))
		var wg sync.WaitGroup
		for i, f := range flows {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.CreateFlow(ctx, f)
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			var e *automation.Error
			switch {
			case err == nil:
				ok++
			case errors.As(err, &e) && e.Code == "ROUTE_CONFLICT":
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if ok != 1 {
			t.Errorf("round %d: %d of two overlapping shapes stored (errors %v)", round, ok, errs)
		}
	}
}
