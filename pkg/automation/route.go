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
