package dashboard

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"flowservice/pkg/automation"
)

// "New flow" asks what starts the flow (starts), which sets the engine and
// the webhook's response mode, and offers ready flows (gallery), each
// created in one click. Both are definitions as POST /api/v1/flows takes
// them; TestGalleryFlowsAreValid saves every one.

// flowStart is a way to start a new flow.
type flowStart struct {
	ID, Label, Help string
	Definition      string
}

var flowStarts = []flowStart{
	{"webhook-reply", "Webhook with a reply", "An HTTP request starts it and gets the flow's answer (a RESPOND step).",
		`{"name": "My flow", "engine": "WORKFLOW_BUILDER", "description": "",
 "trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "my-flow", "responseMode": "ON_COMPLETION"}},
 "steps": [{"name": "reply", "type": "RESPOND", "statusCode": 200, "body": ""}]}`},
	{"webhook", "Webhook", "An HTTP request starts it; the caller gets 202 at once.",
		`{"name": "My flow", "engine": "FLOW_BUILDER", "description": "", "trigger": {"type": "WEBHOOK"}, "steps": []}`},
	{"schedule", "Schedule", "It runs at set times (cron).",
		`{"name": "My flow", "engine": "FLOW_BUILDER", "description": "", "trigger": {"type": "SCHEDULE", "schedule": {"cron": "0 9 * * 1-5"}}, "steps": []}`},
	{"poll", "Poll an API", "Each new item of an API's list starts a run.",
		`{"name": "My flow", "engine": "FLOW_BUILDER", "description": "",
 "trigger": {"type": "POLL", "poll": {"every": "5m", "request": {"method": "GET", "url": "https://api.example.com/items"}, "items": "response.body.items", "key": "item.id"}}, "steps": []}`},
	{"called", "Another flow", "A CALL_FLOW step of another flow starts it, with a body; it answers with its last output.",
		`{"name": "My subflow", "engine": "FLOW_BUILDER", "description": "Called by other flows", "trigger": {"type": "WEBHOOK"},
 "steps": [{"name": "result", "type": "SET", "values": {"received": "{{ trigger.body }}"}}]}`},
}

// startDefinition is the definition a start begins with: the first when
// id names none.
func startDefinition(id string) (flowStart, bool) {
	for _, s := range flowStarts {
		if s.ID == id {
			return s, true
		}
	}
	return flowStarts[0], id == ""
}

// galleryFlow is a ready flow of the gallery.
type galleryFlow struct {
	ID, Name, Help string
	Definition     string
}

var gallery = []galleryFlow{
	{"http-relay", "Call an API and answer with it", "Webhook → HTTP GET → respond with a field of the answer.",
		`{"name": "API relay", "engine": "WORKFLOW_BUILDER", "trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "relay", "responseMode": "ON_COMPLETION"}},
 "steps": [{"name": "call", "type": "HTTP", "method": "GET", "url": "https://api.example.com/items/{{ trigger.body.id }}"},
  {"name": "reply", "type": "RESPOND", "statusCode": 200, "body": {"item": "{{ steps.call.body }}"}}]}`},
	{"github-to-chat", "GitHub pushes to a chat", "A signed GitHub webhook posts each push's commits to a chat.",
		`{"name": "GitHub push to chat", "engine": "FLOW_BUILDER", "trigger": {"type": "WEBHOOK"},
 "steps": [{"name": "signed", "type": "VERIFY_SIGNATURE", "signature": {"preset": "GITHUB", "secret": "replace-me"}},
  {"name": "pushes_only", "type": "FILTER", "condition": "trigger.headers['x-github-event'] == 'push'"},
  {"name": "post", "type": "HTTP", "method": "POST", "url": "https://chat.example.com/hooks/123", "body": {"text": "{{ trigger.body.pusher.name }} pushed to {{ trigger.body.repository.full_name }}"}}]}`},
	{"stripe-router", "Route Stripe events", "Stripe events go to a branch per type.",
		`{"name": "Stripe router", "engine": "FLOW_BUILDER", "trigger": {"type": "WEBHOOK"},
 "steps": [{"name": "route", "type": "SWITCH", "cases": [
   {"when": "trigger.body.type == 'invoice.paid'", "steps": [{"name": "paid", "type": "SET", "values": {"invoice": "{{ trigger.body.data.object.id }}"}}]},
   {"when": "trigger.body.type == 'invoice.payment_failed'", "steps": [{"name": "failed", "type": "HTTP", "method": "POST", "url": "https://ops.example.com/alerts", "body": {"invoice": "{{ trigger.body.data.object.id }}"}}]}],
  "default": [{"name": "ignored", "type": "SET", "values": {"type": "{{ trigger.body.type }}"}}]}]}`},
	{"slack-command", "Answer a Slack slash command", "Replies to the command with text.",
		`{"name": "Slack command", "engine": "WORKFLOW_BUILDER", "trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "slack/command", "responseMode": "ON_COMPLETION"}},
 "steps": [{"name": "reply", "type": "RESPOND", "statusCode": 200, "body": {"response_type": "in_channel", "text": "Hello {{ trigger.body.user_name }}"}}]}`},
	{"daily-digest", "Daily digest", "Every morning, fetch a list and post a summary.",
		`{"name": "Daily digest", "engine": "FLOW_BUILDER", "trigger": {"type": "SCHEDULE", "schedule": {"cron": "0 8 * * *"}},
 "steps": [{"name": "fetch", "type": "HTTP", "method": "GET", "url": "https://api.example.com/contacts"},
  {"name": "summary", "type": "CODE", "code": "return {count: (steps.fetch.body.items || []).length}"},
  {"name": "post", "type": "HTTP", "method": "POST", "url": "https://chat.example.com/hooks/123", "body": {"text": "{{ steps.summary.count }} contacts"}}]}`},
	{"poll-orders", "New orders to a chat", "Polls an orders API; each new order is posted.",
		`{"name": "New orders", "engine": "FLOW_BUILDER",
 "trigger": {"type": "POLL", "poll": {"every": "5m", "request": {"method": "GET", "url": "https://shop.example.com/orders"}, "items": "response.body.orders", "key": "item.id"}},
 "steps": [{"name": "post", "type": "HTTP", "method": "POST", "url": "https://chat.example.com/hooks/123", "body": {"text": "Order {{ trigger.body.id }}"}}]}`},
	{"form-lines", "Form lines to a CRM", "Each line of a submitted form becomes a CRM record.",
		`{"name": "Form to CRM", "engine": "FLOW_BUILDER", "trigger": {"type": "WEBHOOK"},
 "steps": [{"name": "each_line", "type": "FOR_EACH", "items": "trigger.body.lines", "steps": [
   {"name": "record", "type": "HTTP", "method": "POST", "url": "https://crm.example.com/records", "body": {"name": "{{ item.name }}", "qty": "{{ item.qty }}"}}]}]}`},
	{"remember-last", "Remember the last event", "Keeps the last event's id in the flow's state.",
		`{"name": "Remember last", "engine": "FLOW_BUILDER", "trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "idempotencyKey": "trigger.body.id"}},
 "steps": [{"name": "remember", "type": "STORE", "set": {"last": "{{ trigger.body.id }}"}}]}`},
	{"follow-up", "Follow up later", "Waits an hour after an event, then calls an API.",
		`{"name": "Follow up", "engine": "FLOW_BUILDER", "trigger": {"type": "WEBHOOK"},
 "steps": [{"name": "later", "type": "WAIT", "duration": "1h"},
  {"name": "remind", "type": "HTTP", "method": "POST", "url": "https://api.example.com/reminders", "body": {"id": "{{ trigger.body.id }}"}}]}`},
	{"validate-reply", "Check input and answer", "Answers 400 when a field is missing, else 200.",
		`{"name": "Check and answer", "engine": "WORKFLOW_BUILDER", "trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "check", "responseMode": "ON_COMPLETION"}},
 "steps": [{"name": "route", "type": "SWITCH", "cases": [
   {"when": "trigger.body.email == nil", "steps": [{"name": "missing", "type": "RESPOND", "statusCode": 400, "body": {"error": "email is required"}}]}],
  "default": [{"name": "ok", "type": "RESPOND", "statusCode": 200, "body": {"email": "{{ trigger.body.email }}"}}]}]}`},
	{"heartbeat", "Health check", "Calls a health URL every 5 minutes, with retries; a failure runs onError.",
		`{"name": "Health check", "engine": "FLOW_BUILDER", "trigger": {"type": "SCHEDULE", "schedule": {"cron": "*/5 * * * *"}},
 "steps": [{"name": "ping", "type": "HTTP", "method": "GET", "url": "https://status.example.com/health", "retry": {"attempts": 3, "backoff": "2s"}}],
 "onError": [{"name": "alert", "type": "HTTP", "method": "POST", "url": "https://chat.example.com/hooks/123", "body": {"text": "health check failed"}}]}`},
	{"transform", "Reshape a payload", "Picks fields of a webhook's body with a SET step and answers with them.",
		`{"name": "Reshape", "engine": "WORKFLOW_BUILDER", "trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "reshape", "responseMode": "ON_COMPLETION"}},
 "steps": [{"name": "pick", "type": "SET", "values": {"id": "{{ trigger.body.id }}", "who": "{{ trigger.body.user.name }}"}},
  {"name": "reply", "type": "RESPOND", "statusCode": 200, "body": {"picked": "{{ steps.pick }}"}}]}`},
}

// uniquePaths gives a workflow builder webhook's path a short random
// suffix, so that a template created twice does not hold a path twice.
func uniquePaths(def string) string {
	var m map[string]any
	if json.Unmarshal([]byte(def), &m) != nil {
		return def
	}
	tr, _ := m["trigger"].(map[string]any)
	wh, _ := tr["webhook"].(map[string]any)
	if p, ok := wh["path"].(string); ok && p != "" {
		b := make([]byte, 3)
		_, _ = rand.Read(b)
		wh["path"] = strings.TrimSuffix(p, "/") + "-" + hex.EncodeToString(b)
		out, err := json.MarshalIndent(m, "", "  ")
		if err == nil {
			return string(out)
		}
	}
	return def
}

// createFromTemplate creates a gallery flow in one click and opens it in
// the editor.
func (d *Dashboard) createFromTemplate(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("templateId")
	for _, g := range gallery {
		if g.ID != id {
			continue
		}
		in, err := decodeDefinition(uniquePaths(g.Definition))
		var f automation.Flow
		if err == nil {
			f, err = d.svc.CreateFlow(r.Context(), project(r), in)
		}
		if err != nil {
			d.fail(w, r, err)
			return
		}
		d.redirect(w, r, "/ui/flows/"+f.ID+"/edit?done=flowcreated")
		return
	}
	d.fail(w, r, automation.NotFound("template", id))
}
