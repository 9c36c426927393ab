package automation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"
)

// Accepting a delivery to a flow's webhook (RunService): the one domain
// call both receivers and the dashboard's "Send test event" make, in two
// phases around the body (docs/architecture.md, "From webhook to finished
// run"). Admit judges what is known before any byte of the body is read;
// the edge then reads the body within its limits (an HTTP matter: budget,
// slow-body cut) and hands it to Admission.Accept, which judges the bytes,
// builds the trigger data and starts the run, awaiting it for an
// ON_COMPLETION flow. Each refusal is an *Error whose kind is the status;
// the order of the checks is the order of the refusals a sender sees.

// Delivery is what a receiver knows of a delivery before its body.
type Delivery struct {
	// Flow is the flow addressed, as WebhookFlow, RouteFlow or
	// TestRouteFlow found it (secrets revealed for the checks).
	Flow Flow
	// Test: a delivery to the workflow builder test URL, or the owner's
	// test event. It takes the flow's armed Test Trigger (none armed: a
	// 404) and runs whatever the flow's status.
	Test bool
	// Owner: the flow's owner sends it (the dashboard's "Send test
	// event"), so its authentication and signature hold by construction.
	// Its address is unknown: an IP allowlist refuses it, as it would
	// refuse any caller it does not name.
	Owner bool
	// Depth is the delivery's X-Flow-Depth (ParseFlowDepth).
	Depth int
	// ClientIP is the address the flow's IP allowlist judges; the zero
	// Addr is unknown, which no allowlist admits.
	ClientIP netip.Addr
	// Credentials are what the caller presented, for a workflow builder
	// flow's authentication.
	Credentials CallerCredentials
	// RoutePath is the workflow builder path the delivery came to (the
	// receiver's prefix removed), whose :param segments become
	// trigger.params; "" for none.
	RoutePath string
	// Wait is how long an ON_COMPLETION delivery waits for its run.
	Wait time.Duration
}

// CallerCredentials are the credentials a delivery carries, as the edge
// read them off the request.
type CallerCredentials struct {
	// User and Password are the HTTP Basic credentials ("" for none).
	User, Password string
	// Header is the value of the flow's HEADER authentication header
	// (repeated values joined with ", "), "" when absent.
	Header string
}

// Admission is a delivery admitted before its body: Accept takes the body.
type Admission struct {
	s *RunService
	d Delivery
}

// Admit runs the checks of a delivery that need no body, in order: the
// depth of a chain of flows (508), the flow's IP allowlist (403), the
// project's storage and webhooksPerSecond quotas (403, 429), and a
// workflow builder flow's authentication (401). An unknown caller costs no
// read of its body.
func (s *RunService) Admit(ctx context.Context, d Delivery) (*Admission, error) {
	if d.Depth > MaxFlowDepth {
		return nil, LoopDetected(d.Depth)
	}
	if err := CheckClientIP(d.Flow, d.ClientIP); err != nil {
		return nil, err
	}
	if s.projects != nil {
		if err := s.projects.AdmitDelivery(ctx, d.Flow.Project); err != nil {
			return nil, err
		}
	}
	if !d.Owner {
		if err := authenticate(d.Flow, d.Credentials); err != nil {
			return nil, err
		}
	}
	return &Admission{s: s, d: d}, nil
}

// Body is a delivery's body as the edge read it, with the parts of the
// request its run keeps.
type Body struct {
	// Raw is the body as received: signatures are over these bytes.
	Raw []byte
	// Header reads one request header (repeated values joined with ","),
	// for the signature; nil reads Headers.
	Header func(name string) string
	// Method, Path, Headers and Query are the request's, as the run's
	// trigger keeps them: header names in any case, the first value of
	// each query key.
	Method, Path string
	Headers      map[string][]string
	Query        map[string][]string
	// Received is when the edge received the delivery, the time a
	// signature's timestamp is judged against; zero: now.
	Received time.Time
	// Decoded is Raw as the run's body, decoded by its content type by the
	// edge (whose JSON limits are the API's); DecodeErr is why it could
	// not be. Accept answers DecodeErr only once the signature holds, so
	// that a sender with a bad signature learns nothing of the body's form.
	Decoded   DecodedBody
	DecodeErr error
}

// DecodedBody is a body as its run keeps it: trigger.body, trigger.files
// and trigger.bodyBase64.
type DecodedBody struct {
	Body   json.RawMessage
	Files  []TriggerFile
	Base64 string
}

// Answer is an accepted delivery: the run is durable (or, from the
// one-commit path, final) and may be named to the sender.
type Answer struct {
	// Run is the run started, or a repeat's first run.
	Run Run
	// Awaited: the flow answers ON_COMPLETION and Outcome is its run once
	// finished, or still RUNNING when Delivery.Wait passed first.
	Awaited bool
	Outcome Run
	// WaitErr is why the run could not be awaited (a store outage, the
	// caller gone): it goes on, recorded, either way.
	WaitErr error
}

// Accept takes the body of an admitted delivery: it checks the flow's
// signature over the raw bytes (401), decodes the body (400), builds the
// trigger data, and starts the run: a test delivery takes the armed Test
// Trigger first (sample.go), an idempotent repeat gets its first run
// back, and an ON_COMPLETION flow's run is executed and awaited here. An
// error means nothing was promised: the sender may deliver again.
func (a *Admission) Accept(ctx context.Context, b Body) (Answer, error) {
	s, d := a.s, a.d
	f := d.Flow
	if !d.Owner {
		if err := verifyDelivery(f, b, s.clock); err != nil {
			return Answer{}, err
		}
	}
	if b.DecodeErr != nil {
		return Answer{}, b.DecodeErr
	}
	td := deliveryTrigger(f, b, b.Decoded)
	if d.RoutePath != "" && f.Trigger.Webhook != nil {
		td.Params = PathParams(f.Trigger.Webhook.Path, d.RoutePath)
	}
	var run Run
	var err error
	if d.Test || d.Owner {
		run, err = s.receiveTest(ctx, f, td)
	} else {
		var done bool
		if run, done, err = s.runPure(ctx, f, td, d.Wait); !done {
			run, err = s.receive(ctx, f, td)
		}
	}
	if err != nil {
		return Answer{}, err
	}
	ans := Answer{Run: run}
	if executesInline(f) {
		ans.Awaited = true
		ans.Outcome, ans.WaitErr = s.AwaitRun(ctx, run, d.Wait)
	}
	return ans, nil
}

// CheckClientIP enforces f's IP allowlist on the client's address (the
// zero Addr: unknown, which only an empty allowlist admits).
func CheckClientIP(f Flow, ip netip.Addr) error {
	if len(f.AllowedIPs) == 0 {
		return nil
	}
	if ip.IsValid() && ipAllowed(ip.WithZone("").Unmap(), f.AllowedIPs) {
		return nil
	}
	// The message names no address: the allowlist is the owner's business.
	return Forbidden("IP_NOT_ALLOWED", "this webhook does not accept requests from your address")
}

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
		if want, err := netip.ParseAddr(a); err == nil && want.WithZone("").Unmap() == ip {
			return true
		}
	}
	return false
}

// authenticate checks a workflow builder flow's authentication. Both sides
// are hashed before the constant-time comparison, so that lengths leak
// nothing; a stored secret that is empty or masked admits nobody.
func authenticate(f Flow, c CallerCredentials) error {
	if f.Trigger.Webhook == nil || f.Trigger.Webhook.Authentication == nil {
		return nil
	}
	a := f.Trigger.Webhook.Authentication
	switch a.Type {
	case AuthBasic:
		// Both compared, without short-circuit, so timing says not which.
		okUser := secretEqual(c.User, a.Username)
		okPass := secretEqual(c.Password, a.Password.Reveal())
		if okUser&okPass == 1 && a.Password.Reveal() != "" && !a.Password.Masked() {
			return nil
		}
		return HookUnauthorized()
	case AuthHeader:
		want := a.Value.Reveal()
		if a.Name != "" && want != "" && !a.Value.Masked() && secretEqual(c.Header, want) == 1 {
			return nil
		}
		return HookUnauthorized()
	}
	return nil
}

func secretEqual(got, want string) int {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:])
}

// HookUnauthorized is the refusal of a caller without the flow's
// credentials (401); a BASIC flow's receiver adds its challenge.
func HookUnauthorized() *Error {
	return Unauthorized("UNAUTHORIZED", "this webhook needs valid credentials")
}

// verifyDelivery checks f's webhook signature over the raw body, when it
// has one.
func verifyDelivery(f Flow, b Body, clock func() time.Time) error {
	if f.Trigger.Webhook == nil || f.Trigger.Webhook.Signature == nil {
		return nil
	}
	header := b.Header
	if header == nil {
		header = func(k string) string { return strings.Join(headerValues(b.Headers, k), ",") }
	}
	now := b.Received
	if now.IsZero() {
		now = clock()
	}
	return VerifySignature(*f.Trigger.Webhook.Signature, header, b.Raw, now)
}

// headerValues are the values of header name in h, whatever the case of
// its keys.
func headerValues(h map[string][]string, name string) []string {
	var out []string
	for k, vs := range h {
		if strings.EqualFold(k, name) {
			out = append(out, vs...)
		}
	}
	return out
}

// credentialHeaders never reach a run record: they authenticate the caller
// and mean nothing to the steps.
var credentialHeaders = []string{"authorization", "cookie", "proxy-authorization"}

// deliveryTrigger is a delivery as its run keeps it: the caller's
// credentials (and a HEADER authentication's header) left out, the raw
// body kept only when a step may check a signature over it, and the wire
// bytes' digest when repeats are recognised.
func deliveryTrigger(f Flow, b Body, dec DecodedBody) TriggerData {
	drop := credentialHeaders
	if w := f.Trigger.Webhook; w != nil && w.Authentication != nil && w.Authentication.Type == AuthHeader && w.Authentication.Name != "" {
		drop = append([]string{strings.ToLower(w.Authentication.Name)}, credentialHeaders...)
	}
	body := dec.Body
	if body == nil {
		body = json.RawMessage("null")
	}
	td := TriggerData{
		Method:     b.Method,
		Path:       b.Path,
		Headers:    make(map[string]string, len(b.Headers)),
		Query:      map[string]string{},
		Body:       body,
		Files:      dec.Files,
		BodyBase64: dec.Base64,
	}
	for k, vs := range b.Headers {
		name := strings.ToLower(k)
		if !containsString(drop, name) {
			td.Headers[name] = strings.Join(vs, ", ")
		}
	}
	for k, vs := range b.Query {
		if len(vs) > 0 {
			td.Query[k] = vs[0]
		}
	}
	w := f.Trigger.Webhook
	if w != nil && (w.IdempotencyHeader != "" || w.IdempotencyKey != "") {
		// A repeat of this delivery is recognised by its wire bytes: what
		// the store gives back of the body is re-encoded.
		td.BodyDigest = BodyDigest(b.Raw)
	}
	// Stored JSON is re-encoded; a signature check needs the bytes that
	// were signed.
	if KeepsRawBody(f) {
		td.RawBody = string(b.Raw)
		if !utf8.Valid(b.Raw) {
			// Bytes that are not text would not survive a JSON string: a
			// signature check reads them from bodyBase64 instead.
			td.RawBody, td.BodyBase64 = "", base64.StdEncoding.EncodeToString(b.Raw)
		}
	}
	return td
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// KeepsRawBody reports whether a delivery's body must be kept as received
// beside its parsed form: stored JSON is re-encoded, and a signature (a
// VERIFY_SIGNATURE step, or a check a CODE step or an expression makes
// over trigger.rawBody) is over the bytes that were sent. Other runs do
// not pay for a second copy.
func KeepsRawBody(f Flow) bool {
	return hasVerifyStep(f) || mentionsRawBody(f.Steps) || mentionsRawBody(f.OnError)
}

func hasVerifyStep(f Flow) bool {
	for _, s := range f.Steps {
		if s.Type == StepVerifySignature {
			return true
		}
	}
	return false
}

// mentionsRawBody looks for "rawBody" in the fields of steps that hold
// code, expressions or templates, at any depth.
func mentionsRawBody(steps []Step) bool {
	const name = "rawBody"
	for _, s := range steps {
		if strings.Contains(s.Code, name) || strings.Contains(s.When, name) || strings.Contains(s.Condition, name) ||
			strings.Contains(s.URL, name) || bytes.Contains(s.Body, []byte(name)) || bytes.Contains(s.Values, []byte(name)) ||
			bytes.Contains(s.Items, []byte(name)) || bytes.Contains(s.Set, []byte(name)) {
			return true
		}
		for _, v := range s.Headers {
			if strings.Contains(v, name) {
				return true
			}
		}
		for _, c := range s.Cases {
			if strings.Contains(c.When, name) || mentionsRawBody(c.Steps) {
				return true
			}
		}
		if mentionsRawBody(s.Default) || mentionsRawBody(s.Steps) {
			return true
		}
	}
	return false
}
