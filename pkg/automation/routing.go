package automation

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Which flow a delivery addresses (FlowService), for the receivers: a flow
// builder flow by its ID, a workflow builder flow by path and method
// (literal paths before parameter shapes, route.go), each with its secrets
// revealed for the receiver's checks.

// MethodError is a 405: the path exists for other methods.
type MethodError struct {
	Err     *Error
	Allowed []string // for the Allow header
}

func (e *MethodError) Error() string { return e.Err.Message }

// Unwrap exposes the client-facing *Error (kind ErrMethodNotAllowed).
func (e *MethodError) Unwrap() error { return e.Err }

// WebhookFlow returns the flow builder flow a webhook addresses by ID, with
// its secrets revealed for the receiver's checks: an ACTIVE flow, or an
// INACTIVE one whose Test Trigger is armed (Accept then lets one
// delivery through). Unknown and workflow builder flows are the same 404;
// another inactive flow is a 404 FLOW_INACTIVE that says how to enable it.
func (s *FlowService) WebhookFlow(ctx context.Context, flowID string) (Flow, error) {
	f, err := s.store.FlowByID(ctx, flowID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Flow{}, wrap("find webhook flow", err)
	}
	if err != nil || f.Engine != FlowBuilder || f.Trigger.Type != TriggerWebhook {
		return Flow{}, NotFound("flow", flowID)
	}
	if f.Status != FlowActive {
		armed, err := s.armed(ctx, f)
		if err != nil {
			return Flow{}, err
		}
		if !armed {
			return Flow{}, InactiveFlow(flowID)
		}
	}
	return s.RevealFlow(ctx, f)
}

// RouteFlow returns the ACTIVE workflow builder flow registered on path for
// method, secrets revealed. A path no flow serves is a 404, one an
// INACTIVE flow holds a 404 FLOW_INACTIVE; a path served for other methods
// only is a *MethodError (405).
func (s *FlowService) RouteFlow(ctx context.Context, path, method string) (Flow, error) {
	return s.routeFlow(ctx, path, method, func(_ context.Context, f Flow) (bool, error) {
		if f.Status != FlowActive {
			return false, InactiveFlow(f.ID)
		}
		return true, nil
	})
}

// routeFlow finds the flow registered on path for method; usable decides
// whether the flow answers there now (a flow that does not is a 404). For
// each method, a literal path wins over a parameter path (route.go).
func (s *FlowService) routeFlow(ctx context.Context, path, method string, usable func(context.Context, Flow) (bool, error)) (Flow, error) {
	routes, err := s.routeMethods(ctx, path, method)
	if err != nil {
		return Flow{}, err
	}
	notFound := NotFound("webhook", path)
	var allowed []string
	var target string
	for _, m := range WebhookMethods {
		id, ok := routes[m]
		if !ok {
			continue
		}
		if m == method {
			target = id
		}
		allowed = append(allowed, m)
	}
	if len(allowed) == 0 {
		return Flow{}, notFound
	}
	if target == "" {
		return Flow{}, &MethodError{
			Err:     &Error{Kind: ErrMethodNotAllowed, Code: "METHOD_NOT_ALLOWED", Message: fmt.Sprintf("webhook %q takes %v, not %s", path, allowed, method)},
			Allowed: allowed,
		}
	}
	f, err := s.store.FlowByID(ctx, target)
	if errors.Is(err, ErrNotFound) {
		return Flow{}, notFound
	} else if err != nil {
		return Flow{}, wrap("find route flow", err)
	}
	ok, err := usable(ctx, f)
	if err != nil {
		return Flow{}, err
	}
	if !ok {
		return Flow{}, notFound
	}
	return s.RevealFlow(ctx, f)
}

// routeMethods is method -> flow ID for a request path: the literal path's
// routes, completed by those of the parameter shape that matches it (the
// most literal one, should two). The shapes are read only when the literal
// path lacks the method asked for.
func (s *FlowService) routeMethods(ctx context.Context, path, method string) (map[string]string, error) {
	routes, err := s.store.RouteFlows(ctx, path)
	if err != nil {
		return nil, wrap("find route", err)
	}
	if _, ok := routes[method]; ok && method != "" {
		return routes, nil
	}
	held, err := s.store.RouteShapes(ctx, Segments(path))
	if err != nil {
		return nil, wrap("find route shapes", err)
	}
	best := ""
	for _, h := range held {
		if IsPattern(h.Shape) && ShapeMatches(h.Shape, path) && (best == "" || moreLiteral(h.Shape, best)) {
			best = h.Shape
		}
	}
	if best == "" {
		return routes, nil
	}
	byShape, err := s.store.RouteFlows(ctx, best)
	if err != nil {
		return nil, wrap("find route", err)
	}
	out := make(map[string]string, len(routes)+len(byShape))
	for m, id := range byShape {
		out[m] = id
	}
	for m, id := range routes {
		out[m] = id // the literal path wins
	}
	return out, nil
}

// moreLiteral reports whether shape a has a literal segment where b, the
// first time they differ, has a parameter.
func moreLiteral(a, b string) bool {
	x, y := strings.Split(a, "/"), strings.Split(b, "/")
	for i := range min(len(x), len(y)) {
		if x[i] != y[i] {
			return y[i] == ":"
		}
	}
	return false
}

// TestRouteFlow is RouteFlow for the workflow builder test URL: it finds the
// flow on path for method whatever its status, but only while its Test
// Trigger is armed; otherwise the path is a 404.
func (s *FlowService) TestRouteFlow(ctx context.Context, path, method string) (Flow, error) {
	return s.routeFlow(ctx, path, method, s.armed)
}
