package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

// Defaults of HookConfig.
const (
	// DefaultMaxWebhookBody is flowd's webhook body limit in wire bytes. The
	// Lambdas pass 6 MB, API Gateway's proxy payload cap.
	DefaultMaxWebhookBody = 10 << 20
	// DefaultSyncTimeout is how long an ON_COMPLETION webhook waits for its
	// run, below API Gateway's 29 s integration timeout.
	DefaultSyncTimeout = 25 * time.Second
)

// retryAfterSeconds is what a 503 asks senders to wait.
const retryAfterSeconds = "5"

// HookConfig configures the webhook receivers. Everything comes from here,
// never from the environment, so that flowd and the Lambdas differ only in
// what they pass.
type HookConfig struct {
	// MaxBody bounds a webhook body in wire bytes; default
	// DefaultMaxWebhookBody.
	MaxBody int64
	// SyncTimeout is how long an ON_COMPLETION webhook waits for its run;
	// default DefaultSyncTimeout.
	SyncTimeout time.Duration
	// TrustedProxies are the peers whose X-Forwarded-For is believed
	// (flowd: FLOWD_TRUSTED_PROXIES). Empty: the socket address is the client.
	TrustedProxies []netip.Prefix
	// ClientIP, when set, replaces the socket and X-Forwarded-For logic (on
	// Lambda: API Gateway's sourceIp). ok false means unknown, which no
	// allowlist admits.
	ClientIP func(*http.Request) (netip.Addr, bool)
	// Clock is the time signatures are checked against; default time.Now.
	Clock func() time.Time
	// Log receives one access line per request and the details of internal
	// errors; nil discards them. Bodies are never logged.
	Log *slog.Logger
	// Bodies is the budget of webhook bodies in flight the receivers of
	// the process share; nil: each receiver has one of
	// DefaultBodiesInFlight bytes of its own.
	Bodies *BodyBudget
}

func (c HookConfig) withDefaults() HookConfig {
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxWebhookBody
	}
	if c.SyncTimeout <= 0 {
		c.SyncTimeout = DefaultSyncTimeout
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Bodies == nil {
		c.Bodies = NewBodyBudget(DefaultBodiesInFlight, c.MaxBody)
	}
	return c
}

// receiver holds what both webhook receivers share: the checks every
// delivery passes (allowlist, body limit, signature) and the middleware.
type receiver struct {
	svc *automation.Service
	cfg HookConfig
}

// serve runs the middleware chain the management API has too: request ID,
// access log, panic recovery, no caching.
func (rc *receiver) serve(w http.ResponseWriter, r *http.Request, route string, h http.HandlerFunc) {
	start := time.Now()
	info := &requestInfo{id: requestIDFrom(r), route: route}
	r = r.WithContext(withInfo(r.Context(), info))
	w.Header().Set("X-Request-Id", info.id)
	rec := &recorder{ResponseWriter: w}
	defer logAccess(rc.cfg.Log, r, rec, info, start)
	defer recoverPanic(rc.cfg.Log, rec, r)
	// An answer carries a run ID or a flow's response: never cache it.
	rec.Header().Set("Cache-Control", "no-store")
	// The body is charged to the budget as it is read (readBody), and
	// its charge held until the request ends: its run is stored by then,
	// or answered (ON_COMPLETION).
	charge := rc.cfg.Bodies.newCharge()
	defer charge.release()
	h(rec, r.WithContext(context.WithValue(r.Context(), chargeKey{}, charge)))
}

type chargeKey struct{}

// fail writes the error envelope for err. Client errors (*automation.Error)
// keep their status, a *automation.MethodError adds its Allow header, and
// anything else is logged and answered 503 with Retry-After: no run was
// promised, so the sender may safely deliver again.
func (rc *receiver) fail(w http.ResponseWriter, r *http.Request, err error) {
	var me *automation.MethodError
	if errors.As(err, &me) {
		allowed := strings.Join(me.Allowed, ", ")
		w.Header().Set("Allow", allowed)
		// The method is the client's and may be of any length: quote it
		// clipped, not through the domain's message.
		writeError(w, r, http.StatusMethodNotAllowed, me.Err.Code,
			fmt.Sprintf("this webhook takes %s, not %s", allowed, clip(r.Method)))
		return
	}
	var rl *automation.RateLimited
	if errors.As(err, &rl) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(rl.RetryAfter.Seconds())))))
	}
	var e *automation.Error
	if errors.As(err, &e) {
		if status, ok := statusOf[e.Kind]; ok {
			if status == http.StatusServiceUnavailable {
				rc.cfg.Log.WarnContext(r.Context(), "webhook unavailable", "requestId", RequestID(r.Context()), "err", err)
				w.Header().Set("Retry-After", retryAfterSeconds)
			}
			writeError(w, r, status, e.Code, e.Message)
			return
		}
	}
	rc.cfg.Log.ErrorContext(r.Context(), "webhook failed", "requestId", RequestID(r.Context()), "err", err)
	w.Header().Set("Retry-After", retryAfterSeconds)
	writeError(w, r, http.StatusServiceUnavailable, "UNAVAILABLE", "the webhook could not be accepted; try again later")
}

// checkAllowed enforces the flow's IP allowlist.
func (rc *receiver) checkAllowed(r *http.Request, f automation.Flow) error {
	if len(f.AllowedIPs) == 0 {
		return nil
	}
	ip, ok := rc.clientIP(r)
	if ok && ipAllowed(ip, f.AllowedIPs) {
		return nil
	}
	// The message names no address: the allowlist is the owner's business.
	return automation.Forbidden("IP_NOT_ALLOWED", "this webhook does not accept requests from your address")
}

// clientIP is the address the allowlist judges: ClientIP's when set, else
// the socket peer, or, when the peer is a trusted proxy, the right-most
// X-Forwarded-For entry that is not a trusted proxy. Entries are appended
// by each proxy on the way, so only those right of the first untrusted one
// can be believed; a client's own X-Forwarded-For is left of it.
func (rc *receiver) clientIP(r *http.Request) (netip.Addr, bool) {
	if rc.cfg.ClientIP != nil {
		ip, ok := rc.cfg.ClientIP(r)
		return normalize(ip), ok && ip.IsValid()
	}
	peer, ok := parseHostAddr(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if !rc.trusted(peer) {
		return peer, true
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		ip, ok := parseHostAddr(strings.TrimSpace(hops[i]))
		if !ok {
			// Written by a proxy we trust, yet not an address: believe
			// nothing rather than guess.
			return netip.Addr{}, false
		}
		client = ip
		if !rc.trusted(ip) {
			return ip, true
		}
	}
	// Every hop is a trusted proxy: the left-most one is the client.
	return client, true
}

func (rc *receiver) trusted(ip netip.Addr) bool {
	for _, p := range rc.cfg.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// parseHostAddr parses "addr", "addr:port" or "[addr]:port", dropping any
// IPv6 zone and unmapping IPv4-in-IPv6, so that one address has one form.
func parseHostAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
	}
	if ip, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return normalize(ip), true
	}
	return netip.Addr{}, false
}

func normalize(ip netip.Addr) netip.Addr { return ip.WithZone("").Unmap() }

// ipAllowed reports whether ip is one of the canonical addresses or inside
// one of the CIDR ranges. An entry that does not parse admits nobody.
func ipAllowed(ip netip.Addr, allowed []string) bool {
	for _, a := range allowed {
		if strings.Contains(a, "/") {
			if p, err := netip.ParsePrefix(a); err == nil && p.Contains(ip) {
				return true
			}
			continue
		}
		if want, err := netip.ParseAddr(a); err == nil && normalize(want) == ip {
			return true
		}
	}
	return false
}

// admit runs the checks every delivery passes once its flow is known, in
// order: the depth of a chain of flows, the IP allowlist, the caller's authentication (workflow builder
// flows; nil for none) before any byte of the body is read, the body within
// its limit, and the signature over it. It returns the raw body.
func (rc *receiver) admit(w http.ResponseWriter, r *http.Request, f automation.Flow, authenticate func() error) ([]byte, error) {
	if d := automation.ParseFlowDepth(r.Header.Get(automation.FlowDepthHeader)); d > automation.MaxFlowDepth {
		return nil, automation.LoopDetected(d)
	}
	if err := rc.checkAllowed(r, f); err != nil {
		return nil, err
	}
	if err := rc.svc.AdmitDelivery(r.Context(), f.Project); err != nil {
		return nil, err
	}
	if authenticate != nil {
		if err := authenticate(); err != nil {
			return nil, err
		}
	}
	raw, err := rc.readBody(w, r, f.Project)
	if err != nil {
		return nil, err
	}
	if err := rc.checkSignature(r, f, raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// readBody reads the body of a delivery to project within MaxBody wire
// bytes, charging the body budget as bytes arrive (bodybudget.go). A
// declared length above the limit is refused without reading; an
// undeclared (chunked) body is cut at the limit by http.MaxBytesReader,
// which also closes the connection rather than drain the rest. A body
// that arrives too slowly is cut (408), and one the budget has no room
// for is 503.
func (rc *receiver) readBody(w http.ResponseWriter, r *http.Request, project string) ([]byte, error) {
	if r.ContentLength > rc.cfg.MaxBody {
		return nil, rc.tooLarge()
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	charge, ok := r.Context().Value(chargeKey{}).(*bodyCharge)
	if !ok {
		charge = rc.cfg.Bodies.newCharge()
		defer charge.release()
	}
	in := charge.body(r.Context(), project, r.ContentLength, r.Body, cutRead(w))
	body, err := io.ReadAll(http.MaxBytesReader(w, in, rc.cfg.MaxBody))
	var tooLarge *http.MaxBytesError
	var busy *automation.Error
	switch {
	case errors.As(err, &tooLarge):
		return nil, rc.tooLarge()
	case errors.Is(err, errBodyTooSlow):
		// The rest of the body is not read: the connection ends.
		w.Header().Set("Connection", "close")
		return nil, rc.cfg.Bodies.tooSlow()
	case errors.As(err, &busy):
		w.Header().Set("Connection", "close")
		return nil, err
	case err != nil:
		// The client went away or sent a broken chunked encoding.
		return nil, automation.InvalidCode("INVALID_BODY", "the request body could not be read")
	}
	return body, nil
}

func (rc *receiver) tooLarge() error {
	return &automation.Error{Kind: errTooLarge, Code: "BODY_TOO_LARGE",
		Message: fmt.Sprintf("request body is larger than %d bytes", rc.cfg.MaxBody)}
}

// checkSignature verifies the webhook's signature over the raw body, when
// it has one. Repeated headers are joined with "," because API Gateway
// adapters may split one value on commas.
func (rc *receiver) checkSignature(r *http.Request, f automation.Flow, body []byte) error {
	if f.Trigger.Webhook == nil || f.Trigger.Webhook.Signature == nil {
		return nil
	}
	header := func(k string) string { return strings.Join(r.Header.Values(k), ",") }
	return automation.VerifySignature(*f.Trigger.Webhook.Signature, header, body, rc.cfg.Clock())
}

// credentialHeaders never reach a run record: they authenticate the caller
// and mean nothing to the steps.
var credentialHeaders = []string{"authorization", "cookie", "proxy-authorization"}

// triggerData is the request as the run keeps it. dropHeader names one
// more header to leave out (HEADER authentication's), or "".
func triggerData(r *http.Request, f automation.Flow, body json.RawMessage, raw []byte, dropHeader string) automation.TriggerData {
	drop := append([]string{strings.ToLower(dropHeader)}, credentialHeaders...)
	td := automation.TriggerData{
		Method:  r.Method,
		Path:    r.URL.Path,
		Headers: make(map[string]string, len(r.Header)),
		Query:   map[string]string{},
		Body:    body,
	}
	for k, vs := range r.Header {
		name := strings.ToLower(k)
		if !contains(drop, name) {
			td.Headers[name] = strings.Join(vs, ", ")
		}
	}
	if r.URL.RawQuery != "" {
		for k, vs := range r.URL.Query() {
			if len(vs) > 0 {
				td.Query[k] = vs[0]
			}
		}
	}
	// Stored JSON is re-encoded; a signature check needs the bytes that
	// were signed.
	if keepsRawBody(f) {
		td.RawBody = string(raw)
	}
	return td
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hasVerifyStep(f automation.Flow) bool {
	for _, s := range f.Steps {
		if s.Type == automation.StepVerifySignature {
			return true
		}
	}
	return false
}

// started is the answer to a delivery whose run is durable.
type started struct {
	RunID  string               `json:"runId"`
	Status automation.RunStatus `json:"status"`
}

// startRun hands the delivery to accept (the Service's ReceiveWebhook or
// ReceiveTestWebhook), which captures it when a Test Trigger is armed and
// makes the run durable, and notes the run's ID for the access log and the
// X-Run-Id header. On failure nothing was promised: the caller answers 503
// and the sender retries.
func (rc *receiver) startRun(w http.ResponseWriter, r *http.Request, f automation.Flow, td automation.TriggerData,
	accept func(context.Context, automation.Flow, automation.TriggerData) (automation.Run, error)) (automation.Run, error) {
	run, err := accept(r.Context(), f, td)
	if err != nil {
		return automation.Run{}, err
	}
	infoOf(r.Context()).runID = run.ID
	w.Header().Set("X-Run-Id", run.ID)
	return run, nil
}

// validID bounds a flow ID before it reaches the store: IDs are short and
// URL-safe, so anything else is unknown without a lookup.
func validID(id string) bool {
	if id == "" || len(id) > 100 {
		return false
	}
	return safeID(id)
}
