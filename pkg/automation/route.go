package automation

import "strings"

// Route is one (path, method) pair a workflow builder flow answers on.
// Path is the shape of the flow's path: each :name parameter is ":", so that
// users/:id and users/:name are one path (one flow per method, one
// project), and a literal path is its own shape.
type Route struct {
	Path   string
	Method string // one of WebhookMethods; ANY is stored as all of them
}

// Routes lists the routes f holds: none unless it is a workflow builder flow
// with a webhook trigger. A route belongs to its flow whatever the flow's
// status, so enabling a flow can never clash.
func (f Flow) Routes() []Route {
	if f.Engine != WorkflowBuilder || f.Trigger.Type != TriggerWebhook || f.Trigger.Webhook == nil {
		return nil
	}
	w := f.Trigger.Webhook
	methods := []string{w.HTTPMethod}
	if w.HTTPMethod == MethodAny {
		methods = WebhookMethods
	}
	shape := PathShape(w.Path)
	routes := make([]Route, len(methods))
	for i, m := range methods {
		routes[i] = Route{Path: shape, Method: m}
	}
	return routes
}

// PathShape is a path pattern with every :name parameter replaced by ":".
func PathShape(pattern string) string {
	if !strings.Contains(pattern, ":") {
		return pattern
	}
	segs := strings.Split(pattern, "/")
	for i, s := range segs {
		if strings.HasPrefix(s, ":") {
			segs[i] = ":"
		}
	}
	return strings.Join(segs, "/")
}

// IsPattern reports whether a path shape holds a parameter.
func IsPattern(shape string) bool { return strings.Contains(shape, ":") }

// Segments counts the segments of a path or shape.
func Segments(p string) int { return strings.Count(p, "/") + 1 }

// ShapeMatches reports whether a request path matches a shape.
func ShapeMatches(shape, path string) bool {
	s, p := strings.Split(shape, "/"), strings.Split(path, "/")
	if len(s) != len(p) {
		return false
	}
	for i := range s {
		if s[i] != ":" && s[i] != p[i] {
			return false
		}
	}
	return true
}

// ShapesOverlap reports whether some URL matches both shapes.
func ShapesOverlap(a, b string) bool {
	x, y := strings.Split(a, "/"), strings.Split(b, "/")
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i] != ":" && y[i] != ":" && x[i] != y[i] {
			return false
		}
	}
	return true
}

// PathParams reads the values of pattern's :name parameters from path
// (which matches it); nil when the pattern has none.
func PathParams(pattern, path string) map[string]string {
	if !strings.Contains(pattern, ":") {
		return nil
	}
	s, p := strings.Split(pattern, "/"), strings.Split(path, "/")
	out := map[string]string{}
	for i := range s {
		if name, ok := strings.CutPrefix(s[i], ":"); ok && i < len(p) {
			out[name] = p[i]
		}
	}
	return out
}

// ShapeOwner is a path shape in use and the project whose flows hold it.
type ShapeOwner struct {
	Shape, Project string
}

// CheckShapeClash is the rule every store applies, inside its write, to the
// shape a flow of project takes, against the shapes already held (by other
// flows) with as many segments. Two parameter shapes that can match one URL
// are ambiguous (users/:/orders beside :/42/orders), whoever holds them. A
// literal path and a parameter shape matching it may live together within
// one project (the literal path wins), never across projects: one project
// would take the other's deliveries.
func CheckShapeClash(shape, project string, held []ShapeOwner) error {
	for _, h := range held {
		if h.Shape == shape || !ShapesOverlap(shape, h.Shape) {
			continue
		}
		switch {
		case IsPattern(shape) && IsPattern(h.Shape):
			return Conflict("ROUTE_CONFLICT",
				"webhook path %q can match the same URLs as another flow's path %q; make a literal segment tell them apart", shape, h.Shape)
		case h.Project != project:
			return Conflict("ROUTE_CONFLICT",
				"webhook path %q overlaps a path used by a flow of another project; choose another path", shape)
		}
	}
	return nil
}

// PathTaken is the conflict of a route whose path a flow of another project
// holds: workflow builder paths are one namespace, so that no project can
// answer, or take over the CORS preflight of, another project's path. The
// message names the path and method, never the holder.
func PathTaken(r Route) *Error {
	return Conflict("ROUTE_CONFLICT",
		"%s on webhook path %q: the path is used by a flow of another project; choose another path", r.Method, r.Path)
}
