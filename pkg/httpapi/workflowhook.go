package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"flowservice/pkg/automation"
)

// workflowPrefix is where the workflow builder receiver listens;
// workflowTestPrefix is its Test Trigger URL, which answers only while the
// flow's capture is armed.
const (
	workflowPrefix     = "/webhook/"
	workflowTestPrefix = "/webhook-test/"
)

// WorkflowHook is the workflow builder receiver, {workflow_url}/webhook/{path}.
type WorkflowHook struct{ rc receiver }

// NewWorkflowHook returns the workflow builder receiver: each ACTIVE flow
// answers on its path for its method, checks its authentication, and
// answers at once (IMMEDIATE) or with the run's response (ON_COMPLETION).
// Under /webhook-test/{path} the same flow answers, whatever its status,
// exactly once per arming of its Test Trigger: the call is kept as the
// flow's sample and runs the flow; otherwise that URL is a 404.
func NewWorkflowHook(svc Receiving, cfg HookConfig) http.Handler {
	return &WorkflowHook{rc: receiver{svc: svc, cfg: cfg.withDefaults()}}
}

// ServeHTTP handles one delivery.
func (h *WorkflowHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, workflowTestPrefix) {
		h.rc.serve(w, r, r.Method+" "+workflowTestPrefix+"{path...}", h.receiveTest)
		return
	}
	h.rc.serve(w, r, r.Method+" "+workflowPrefix+"{path...}", h.receiveLive)
}

// hookMode is what differs between the live and the test URL.
type hookMode struct {
	prefix string
	lookup func(ctx context.Context, path, method string) (automation.Flow, error)
	test   bool
}

func (h *WorkflowHook) receiveLive(w http.ResponseWriter, r *http.Request) {
	h.receive(w, r, hookMode{prefix: workflowPrefix, lookup: h.rc.svc.RouteFlow})
}

func (h *WorkflowHook) receiveTest(w http.ResponseWriter, r *http.Request) {
	h.receive(w, r, hookMode{prefix: workflowTestPrefix, lookup: h.rc.svc.TestRouteFlow, test: true})
}

func (h *WorkflowHook) receive(w http.ResponseWriter, r *http.Request, mode hookMode) {
	p, ok := strings.CutPrefix(r.URL.Path, mode.prefix)
	if !ok {
		infoOf(r.Context()).route = ""
		writeError(w, r, http.StatusNotFound, "NOT_FOUND", "no such route; webhooks are "+workflowPrefix+"{path}")
		return
	}
	if !validWebhookPath(p) {
		h.rc.fail(w, r, automation.NotFound("webhook", clip(p)))
		return
	}
	if r.Method == http.MethodOptions {
		h.preflight(w, r, p, mode)
		return
	}
	f, err := mode.lookup(r.Context(), p, r.Method)
	if err != nil {
		h.rc.fail(w, r, err)
		return
	}
	infoOf(r.Context()).flowID = f.ID
	wh := f.Trigger.Webhook
	if wh == nil {
		wh = &automation.Webhook{}
	}
	setCORS(w, r, wh.AllowedOrigins)
	ct := r.Header.Get("Content-Type")
	ans, err := h.rc.deliver(w, r, automation.Delivery{Flow: f, Test: mode.test, Credentials: credentials(r, f),
		RoutePath: p, Wait: h.rc.cfg.SyncTimeout},
		func(raw []byte) (automation.DecodedBody, error) { return decodeHookBody(ct, raw) })
	if err != nil {
		h.rc.fail(w, r, err)
		return
	}
	if !ans.Awaited {
		writeJSON(w, http.StatusOK, started{RunID: ans.Run.ID, Status: ans.Run.Status})
		return
	}
	h.respondOnCompletion(w, r, ans)
}

// respondOnCompletion answers with the outcome of the run Accept awaited.
// The run is durable already, so every failure here still names it in
// X-Run-Id.
func (h *WorkflowHook) respondOnCompletion(w http.ResponseWriter, r *http.Request, ans automation.Answer) {
	run, out := ans.Run, ans.Outcome
	if err := ans.WaitErr; err != nil {
		// A store outage while watching, or the client hung up: the run
		// goes on either way and is recorded.
		if r.Context().Err() != nil {
			// Still answer: the Lambda adapter fails an invocation that
			// writes nothing.
			writeError(w, r, http.StatusGatewayTimeout, "RUN_TIMEOUT", "the request ended before the run; it goes on as run "+run.ID)
			return
		}
		h.rc.cfg.Log.ErrorContext(r.Context(), "await run", "requestId", RequestID(r.Context()), "runId", run.ID, "err", err)
		writeError(w, r, http.StatusInternalServerError, "INTERNAL", "the run's outcome could not be read; see run "+run.ID)
		return
	}
	switch out.Status {
	case automation.RunSucceeded:
		writeRunResponse(w, out.Response)
	case automation.RunFailed, automation.RunTimeout:
		writeError(w, r, http.StatusInternalServerError, "RUN_FAILED", out.Error)
	default:
		writeError(w, r, http.StatusGatewayTimeout, "RUN_TIMEOUT",
			"the run did not finish within "+h.rc.cfg.SyncTimeout.String()+"; it goes on as run "+run.ID)
	}
}

// writeRunResponse sends a succeeded run's answer exactly as its RESPOND
// step made it: status, headers, content type, and the body as JSON or, for
// a text body, as its text. No response at all is 200 {}.
func writeRunResponse(w http.ResponseWriter, resp *automation.RunResponse) {
	if resp == nil {
		writeJSON(w, http.StatusOK, json.RawMessage(`{}`))
		return
	}
	status := http.StatusOK
	if resp.StatusCode >= 200 && resp.StatusCode <= 599 {
		status = resp.StatusCode
	}
	body := []byte(resp.Body)
	if len(body) == 0 {
		body = []byte(`{}`)
	}
	if resp.Text {
		var txt string
		if err := json.Unmarshal(body, &txt); err == nil {
			body = []byte(txt)
		}
	} else {
		body = append(body, '\n')
	}
	h := w.Header()
	for k, v := range resp.Headers {
		if automation.ResponseHeaderAllowed(k) {
			h.Set(k, v)
		}
	}
	ct := resp.ContentType
	if ct == "" {
		ct = "application/json"
	}
	h.Set("Content-Type", ct)
	// The answer is the flow's, served from the service's origin: a page
	// in it (text/html, SVG) runs sandboxed, in an origin of its own.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// preflight answers OPTIONS on a known path: 204 with the path's methods
// in Allow. A CORS preflight asks about one method
// (Access-Control-Request-Method), and flows of one project may serve
// different methods on a path with different allowed origins, so only the
// flow of that method decides; a method no flow serves there gets no CORS
// headers at all, and the browser refuses the request.
func (h *WorkflowHook) preflight(w http.ResponseWriter, r *http.Request, p string, mode hookMode) {
	// No method matches "": the answer lists the path's methods, or says
	// that no flow is on the path.
	_, err := mode.lookup(r.Context(), p, "")
	var me *automation.MethodError
	if !errors.As(err, &me) {
		if err == nil {
			err = automation.NotFound("webhook", clip(p))
		}
		h.rc.fail(w, r, err)
		return
	}
	// The path answers OPTIONS only while one of its flows answers (is
	// active, or on the test URL armed), as its other methods do.
	var f automation.Flow
	found := false
	asked := r.Header.Get("Access-Control-Request-Method")
	for _, m := range me.Allowed {
		g, err := mode.lookup(r.Context(), p, m)
		if automation.IsNotFound(err) {
			continue
		} else if err != nil {
			h.rc.fail(w, r, err)
			return
		}
		if !found || m == asked {
			f, found = g, true
		}
		if m == asked {
			break
		}
	}
	if !found {
		h.rc.fail(w, r, automation.NotFound("webhook", clip(p)))
		return
	}
	w.Header().Set("Allow", strings.Join(append(slices.Clone(me.Allowed), http.MethodOptions), ", "))
	if asked == "" || f.Trigger.Webhook == nil || !servesMethod(f, asked) {
		// Not a preflight, or for a method no answering flow serves:
		// no CORS headers.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	infoOf(r.Context()).flowID = f.ID
	if err := h.rc.checkAllowed(r, f); err != nil {
		h.rc.fail(w, r, err)
		return
	}
	var origins []string
	if f.Trigger.Webhook != nil {
		origins = f.Trigger.Webhook.AllowedOrigins
	}
	if setCORS(w, r, origins) {
		w.Header().Set("Access-Control-Allow-Methods", asked+", "+http.MethodOptions)
		if rh := r.Header.Get("Access-Control-Request-Headers"); rh != "" {
			w.Header().Set("Access-Control-Allow-Headers", rh)
		}
		w.Header().Set("Access-Control-Max-Age", "600")
	}
	w.WriteHeader(http.StatusNoContent)
}

// servesMethod reports whether f's webhook takes method.
func servesMethod(f automation.Flow, method string) bool {
	for _, rt := range f.Routes() {
		if rt.Method == method {
			return true
		}
	}
	return false
}

// setCORS sets Access-Control-Allow-Origin when the request's origin is
// allowed (default: any) and reports whether it did.
func setCORS(w http.ResponseWriter, r *http.Request, origins []string) bool {
	if len(origins) == 0 || slices.Contains(origins, "*") {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		return true
	}
	w.Header().Add("Vary", "Origin")
	if o := r.Header.Get("Origin"); o != "" && slices.Contains(origins, o) {
		w.Header().Set("Access-Control-Allow-Origin", o)
		return true
	}
	return false
}

// validWebhookPath admits what flow validation admits
// (automation.ValidWebhookPath), judged on the path decoded once
// (r.URL.Path): generated API clients escape the slashes of a path
// parameter, so "a%2Fb" is the path a/b. What the decoding makes of
// "%2E%2E", "%2F%2F" or a control character is refused here as it is at
// save time, so no escape reaches another flow's path, and a "%" left by
// decoding once ("a%252Fb" is "a%2Fb") is no valid path either: nothing
// is decoded twice.
func validWebhookPath(p string) bool {
	return automation.ValidWebhookPath(p) == nil
}
