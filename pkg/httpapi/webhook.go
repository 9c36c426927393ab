package httpapi

import (
	"net/http"
	"strings"

	"flowservice/pkg/automation"
)

// webhookPrefix is where the flow builder receiver listens.
const webhookPrefix = "/api/v1/webhooks/"

// Webhook is the flow builder receiver, {engine_url}/api/v1/webhooks/{flowId}
// (docs/api.md, "Webhook receivers").
type Webhook struct{ rc receiver }

// NewWebhook returns the flow builder receiver: POST a JSON body to an
// ACTIVE flow's URL and it answers 200 {"runId", "status": "RUNNING"} once
// the run is durably queued. While the flow's Test Trigger is armed, the
// next delivery is also kept as its sample, and runs even if the flow is
// INACTIVE.
func NewWebhook(svc Receiving, cfg HookConfig) http.Handler {
	return &Webhook{rc: receiver{svc: svc, cfg: cfg.withDefaults()}}
}

// ServeHTTP handles one delivery.
func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.rc.serve(w, r, "POST "+webhookPrefix+"{flowId}", h.receive)
}

func (h *Webhook) receive(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutPrefix(r.URL.Path, webhookPrefix)
	if !ok || strings.Contains(id, "/") {
		infoOf(r.Context()).route = ""
		writeError(w, r, http.StatusNotFound, "NOT_FOUND", "no such route; webhooks are POST "+webhookPrefix+"{flowId}")
		return
	}
	// The method is checked before the lookup, so that it says nothing
	// about which flows exist.
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "flow builder webhooks take POST")
		return
	}
	if !validID(id) {
		h.rc.fail(w, r, automation.NotFound("flow", clip(id)))
		return
	}
	f, err := h.rc.svc.WebhookFlow(r.Context(), id)
	if err != nil {
		h.rc.fail(w, r, err)
		return
	}
	infoOf(r.Context()).flowID = f.ID
	ans, err := h.rc.deliver(w, r, automation.Delivery{Flow: f}, decodeEngineBody(r.Header.Get("Content-Type")))
	if err != nil {
		h.rc.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, started{RunID: ans.Run.ID, Status: ans.Run.Status})
}

// decodeEngineBody reads a flow builder body: every body type the
// workflow builder takes (GitHub's default is a form, Slack's commands are
// forms); a body with no Content-Type is read as JSON, as senders of JSON
// often omit it. An empty body is refused.
func decodeEngineBody(ct string) func([]byte) (automation.DecodedBody, error) {
	if ct == "" {
		ct = "application/json"
	}
	return func(raw []byte) (automation.DecodedBody, error) {
		if len(raw) == 0 {
			return automation.DecodedBody{}, invalidJSON("the webhook body is empty: send JSON, a form or any other body")
		}
		return decodeHookBody(ct, raw)
	}
}
