package automation

// Path prefixes of the webhook receivers, under their public bases
// (Config.EngineURL, Config.WorkflowURL). Receivers mount these, and
// WebhookURL builds every URL a client is given from them.
const (
	FlowWebhookPrefix     = "/api/v1/webhooks/" // flow builder: + the flow ID
	WorkflowWebhookPrefix = "/webhook/"         // workflow builder: + the flow's path
	WorkflowTestPrefix    = "/webhook-test/"    // workflow builder Test Trigger: + the path
)

// WebhookURL is the URL that triggers webhook flow f on the receivers at
// engineURL and workflowURL: its live URL, or with test its Test Trigger
// URL (a flow builder flow has one URL for both).
func WebhookURL(engineURL, workflowURL string, f Flow, test bool) string {
	switch {
	case f.Engine == FlowBuilder:
		return trimSlash(engineURL) + FlowWebhookPrefix + f.ID
	case f.Trigger.Webhook == nil:
		return ""
	case test:
		return trimSlash(workflowURL) + WorkflowTestPrefix + f.Trigger.Webhook.Path
	default:
		return trimSlash(workflowURL) + WorkflowWebhookPrefix + f.Trigger.Webhook.Path
	}
}
