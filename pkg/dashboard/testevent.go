package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/httpapi"
)

// "Send test event" tests a webhook flow without curl: the dashboard arms
// the flow's Test Trigger and hands the JSON body the user wrote
// (prefilled from the captured sample) to the domain's acceptance of a
// delivery, as the owner's test delivery (automation.Delivery.Owner): its
// authentication and signature hold by construction, and it takes the
// armed Test Trigger, is kept as the sample and runs the flow as a
// delivery to the test URL would. The run it starts opens on its picture.

// testTimeout bounds the wait for an ON_COMPLETION flow's test run.
const testTimeout = 30 * time.Second

// maxTestBody is the largest sample the form is prefilled with, leaving
// room in maxFormBytes for the rest of the form.
const maxTestBody = maxFormBytes - 16<<10

func (d *Dashboard) sendTest(w http.ResponseWriter, r *http.Request) {
	ctx, p, id := r.Context(), project(r), r.PathValue("flowId")
	body := strings.TrimSpace(r.PostFormValue("body"))
	if body == "" {
		body = "{}"
	}
	keep := func(f *flowData) { f.TestBody = body }
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		msg := "The test event is not valid JSON."
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			line, col := automation.JSONPosition([]byte(body), syn.Offset)
			msg = fmt.Sprintf("The test event is not valid JSON at line %d, column %d: %s", line, col, syn.Error())
		}
		d.renderFlow(w, r, http.StatusBadRequest, "", msg, nil, nil, keep)
		return
	}
	f, err := d.svc.Flow(ctx, p, id)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	armed, err := d.svc.ArmWebhookTest(ctx, p, id)
	if err != nil {
		d.flowFormFailed(w, r, err, nil)
		return
	}
	revealed, err := d.svc.RevealFlow(ctx, f)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	runID, refusal, err := d.deliverTest(ctx, revealed, armed.TestURL, []byte(body))
	switch {
	case err != nil:
		d.log.WarnContext(ctx, "send test event", "flow", f.ID, "err", err)
		d.renderFlow(w, r, http.StatusServiceUnavailable, "",
			"The test event could not be accepted; try again later.", nil, nil, keep)
	case runID == "":
		d.renderFlow(w, r, http.StatusUnprocessableEntity, "", "The webhook refused the test event: "+refusal, nil, nil, keep)
	default:
		d.redirect(w, r, "/ui/flows/"+url.PathEscape(f.ID)+"/runs/"+url.PathEscape(runID)+"?done=testsent")
	}
}

// deliverTest accepts body as the owner's test delivery to f (at testURL,
// whose path the run records) and returns the run it started, or the
// refusal a sender of it would have had ("403 IP_NOT_ALLOWED: …"). err is
// a failure of the service, not of the event.
func (d *Dashboard) deliverTest(ctx context.Context, f automation.Flow, testURL string, body []byte) (runID, refusal string, err error) {
	method := http.MethodPost
	wh := f.Trigger.Webhook
	if wh != nil && wh.HTTPMethod != "" && wh.HTTPMethod != automation.MethodAny {
		method = wh.HTTPMethod
	}
	u, err := url.Parse(testURL)
	if err != nil {
		return "", "", fmt.Errorf("dashboard: test URL: %w", err)
	}
	headers := map[string][]string{}
	var query url.Values
	if method == http.MethodGet || method == http.MethodHead {
		// A GET carries no body: an object's fields become the query.
		query, body = objectQuery(body), nil
	} else {
		headers["Content-Type"] = []string{"application/json"}
	}
	var routePath string
	if f.Engine == automation.WorkflowBuilder && wh != nil {
		routePath = wh.Path
	}
	adm, err := d.svc.Admit(ctx, automation.Delivery{Flow: f, Test: true, Owner: true, RoutePath: routePath, Wait: testTimeout})
	var ans automation.Answer
	if err == nil {
		decoded := automation.DecodedBody{Body: json.RawMessage("null")}
		if len(body) > 0 {
			decoded.Body = body // valid JSON: sendTest parsed it
		}
		ans, err = adm.Accept(ctx, automation.Body{Raw: body, Method: method, Path: u.Path, Headers: headers, Query: query,
			Decoded: decoded})
	}
	if err != nil {
		var e *automation.Error
		status, ok := httpapi.StatusOf(err)
		if !errors.As(err, &e) || !ok || status >= 500 {
			return "", "", err
		}
		return "", fmt.Sprintf("%d %s: %s", status, e.Code, e.Message), nil
	}
	return ans.Run.ID, "", nil
}

// objectQuery is the fields of the JSON object body as a query: strings
// as they are, other values as JSON. Anything but an object is no query.
func objectQuery(body []byte) url.Values {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil || len(obj) == 0 {
		return nil
	}
	q := url.Values{}
	for k, raw := range obj {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw)
		}
		q.Set(k, s)
	}
	return q
}
