package automation

// Route is one (path, method) pair a workflow builder flow answers on.
type Route struct {
	Path   string
	Method string // GET, POST, PUT or DELETE; ANY is stored as all four
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
	routes := make([]Route, len(methods))
	for i, m := range methods {
		routes[i] = Route{Path: w.Path, Method: m}
	}
	return routes
}

// PathTaken is the conflict of a route whose path a flow of another project
// holds: workflow builder paths are one namespace, so that no project can
// answer, or take over the CORS preflight of, another project's path. The
// message names the path and method, never the holder.
func PathTaken(r Route) *Error {
	return Conflict("ROUTE_CONFLICT",
		"%s on webhook path %q: the path is used by a flow of another project; choose another path", r.Method, r.Path)
}
