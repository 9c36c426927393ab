package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

// "Send test event" tests a webhook flow without curl: the dashboard arms
// the flow's Test Trigger and sends the JSON body the user wrote (prefilled
// from the captured sample) to the test URL, as a caller would: through
// the real receiver, with the flow's authentication and signature added
// from its stored secrets. The run it starts opens on its picture.

// testTimeout bounds the test delivery: an ON_COMPLETION flow answers when
// its run ends.
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
		d.renderFlow(w, r, http.StatusBadGateway, "",
			"The test event could not be sent to the test URL ("+armed.TestURL+"): is the webhook address reachable from the dashboard?", nil, nil, keep)
	case runID == "":
		d.renderFlow(w, r, http.StatusUnprocessableEntity, "", "The webhook refused the test event: "+refusal, nil, nil, keep)
	default:
		d.redirect(w, r, "/ui/flows/"+url.PathEscape(f.ID)+"/runs/"+url.PathEscape(runID)+"?done=testsent")
	}
}

// deliverTest sends body to testURL as f's webhook expects it and returns
// the run it started (X-Run-Id), or what the receiver answered instead.
func (d *Dashboard) deliverTest(ctx context.Context, f automation.Flow, testURL string, body []byte) (runID, refusal string, err error) {
	ctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	method := http.MethodPost
	wh := f.Trigger.Webhook
	if wh != nil && wh.HTTPMethod != "" && wh.HTTPMethod != automation.MethodAny {
		method = wh.HTTPMethod
	}
	var rd io.Reader
	if method != http.MethodGet && method != http.MethodHead {
		rd = bytes.NewReader(body)
	} else {
		// A GET carries no body: an object's fields become the query.
		testURL = withQuery(testURL, body)
		body = nil
	}
	req, err := http.NewRequestWithContext(ctx, method, testURL, rd)
	if err != nil {
		return "", "", fmt.Errorf("dashboard: test request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if wh != nil {
		signTest(req, wh, body, time.Now())
	}
	resp, err := d.opts.TestClient.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("dashboard: send test event: %w", err)
	}
	defer resp.Body.Close()
	if id := resp.Header.Get("X-Run-Id"); id != "" {
		return id, "", nil
	}
	var env struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(raw, &env) == nil && env.Error.Code != "" {
		return "", fmt.Sprintf("%d %s: %s", resp.StatusCode, env.Error.Code, env.Error.Message), nil
	}
	return "", resp.Status, nil
}

// signTest adds what the webhook's checks want: its authentication and its
// signature, made with the flow's own secrets.
func signTest(req *http.Request, wh *automation.Webhook, body []byte, now time.Time) {
	if a := wh.Authentication; a != nil {
		switch a.Type {
		case automation.AuthBasic:
			req.SetBasicAuth(a.Username, a.Password.Reveal())
		case automation.AuthHeader:
			req.Header.Set(a.Name, a.Value.Reveal())
		}
	}
	if wh.Signature == nil {
		return
	}
	// The domain's signer, so that every preset (STANDARD too) signs the
	// way its receiver verifies.
	h, err := automation.SignHeaders(*wh.Signature, body, "msg_test_"+strconv.FormatInt(now.UnixNano(), 36), now)
	if err != nil {
		return // unsigned: the receiver's refusal is shown as it is
	}
	for k, v := range h {
		req.Header.Set(k, v)
	}
}

// withQuery adds the fields of the JSON object body to u's query: strings
// as they are, other values as JSON. Anything but an object adds nothing.
func withQuery(u string, body []byte) string {
	var obj map[string]json.RawMessage
	parsed, err := url.Parse(u)
	if err != nil || json.Unmarshal(body, &obj) != nil || len(obj) == 0 {
		return u
	}
	q := parsed.Query()
	for k, raw := range obj {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			s = string(raw)
		}
		q.Set(k, s)
	}
	parsed.RawQuery = q.Encode()
	return parsed.String()
}
