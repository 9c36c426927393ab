package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"net/url"
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

// Receiving is what the webhook receivers use of the domain: which flow a
// delivery addresses, and its acceptance (automation.RunService.Admit,
// then Admission.Accept). *automation.Service has all of it.
type Receiving interface {
	WebhookFlow(ctx context.Context, flowID string) (automation.Flow, error)
	RouteFlow(ctx context.Context, path, method string) (automation.Flow, error)
	TestRouteFlow(ctx context.Context, path, method string) (automation.Flow, error)
	Admit(ctx context.Context, d automation.Delivery) (*automation.Admission, error)
}

var _ Receiving = (*automation.Service)(nil)

// receiver holds what both webhook receivers share: what only HTTP knows
// of a delivery (its client address, its body within the limits) and the
// middleware; the checks themselves are the domain's.
type receiver struct {
	svc Receiving
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

// checkAllowed enforces the flow's IP allowlist on the request's client
// (a preflight's; deliveries are judged by Admit).
func (rc *receiver) checkAllowed(r *http.Request, f automation.Flow) error {
	ip, _ := rc.clientIP(r)
	return automation.CheckClientIP(f, ip)
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

// deliver accepts one delivery to d.Flow: the domain's admission before
// any byte of the body is read (depth, IP allowlist, quotas, the caller's
// credentials), the body read here within its limits, then the domain's
// acceptance of the bytes (signature, decode, the run started, and
// awaited for an ON_COMPLETION flow). The run's ID goes to the access log
// and X-Run-Id.
func (rc *receiver) deliver(w http.ResponseWriter, r *http.Request, d automation.Delivery,
	decode func([]byte) (automation.DecodedBody, error)) (automation.Answer, error) {
	d.Depth = automation.ParseFlowDepth(r.Header.Get(automation.FlowDepthHeader))
	if ip, ok := rc.clientIP(r); ok {
		d.ClientIP = ip
	}
	adm, err := rc.svc.Admit(r.Context(), d)
	if err != nil {
		if wh := d.Flow.Trigger.Webhook; wh != nil && wh.Authentication != nil &&
			wh.Authentication.Type == automation.AuthBasic && automation.HasCode(err, "UNAUTHORIZED") {
			w.Header().Set("WWW-Authenticate", `Basic realm="webhook"`)
		}
		return automation.Answer{}, err
	}
	raw, err := rc.readBody(w, r, d.Flow.Project)
	if err != nil {
		return automation.Answer{}, err
	}
	var query url.Values
	if r.URL.RawQuery != "" {
		query = r.URL.Query()
	}
	// Decoded here, answered by Accept after the signature.
	decoded, decodeErr := decode(raw)
	ans, err := adm.Accept(r.Context(), automation.Body{
		Raw: raw,
		// Repeated headers are joined with "," because API Gateway
		// adapters may split one value on commas.
		Header:    func(k string) string { return strings.Join(r.Header.Values(k), ",") },
		Method:    r.Method,
		Path:      r.URL.Path,
		Headers:   r.Header,
		Query:     query,
		Received:  rc.cfg.Clock(),
		Decoded:   decoded,
		DecodeErr: decodeErr,
	})
	if err != nil {
		return automation.Answer{}, err
	}
	infoOf(r.Context()).runID = ans.Run.ID
	w.Header().Set("X-Run-Id", ans.Run.ID)
	return ans, nil
}

// credentials are what the caller presents for f's authentication: its
// Basic credentials, and the value of f's HEADER authentication header.
func credentials(r *http.Request, f automation.Flow) automation.CallerCredentials {
	var c automation.CallerCredentials
	c.User, c.Password, _ = r.BasicAuth()
	if wh := f.Trigger.Webhook; wh != nil && wh.Authentication != nil && wh.Authentication.Name != "" {
		c.Header = strings.Join(r.Header.Values(wh.Authentication.Name), ", ")
	}
	return c
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

// started is the answer to a delivery whose run is durable.
type started struct {
	RunID  string               `json:"runId"`
	Status automation.RunStatus `json:"status"`
}

// validID bounds a flow ID before it reaches the store: IDs are short and
// URL-safe, so anything else is unknown without a lookup.
func validID(id string) bool {
	if id == "" || len(id) > 100 {
		return false
	}
	return safeID(id)
}
