package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

// http sends the step's request and outputs {"status", "headers", "body"}.
// A connection's key goes into a header and never into the output or an
// error: every occurrence is masked.
func (x *execution) http(ctx context.Context, s automation.Step) (any, error) {
	cred, se := x.credential(ctx, s)
	if se != nil {
		return nil, se
	}
	if s.Paginate != nil {
		return x.paginate(ctx, s, cred)
	}
	req, err := x.request(ctx, s)
	if err != nil {
		return nil, cred.masked(err.Error())
	}
	out, se := x.exchange(ctx, s, cred, req, 1)
	if se != nil {
		return nil, se
	}
	return out, nil
}

// exchange sends one request of the step (page 1 but when paginating) with
// its credential and idempotency key, and reads the answer: the output on a
// 2xx, a step error (with the output) otherwise.
func (x *execution) exchange(ctx context.Context, s automation.Step, cred credential, req *http.Request, page int) (map[string]any, *stepError) {
	x.identify(req)
	// A fenced credential goes only to its hosts: refuse before anything
	// is sent (docs/access.md).
	if cred.conn.ID != "" && !automation.HostAllowed(cred.conn.AllowedHosts, req.URL.Hostname()) {
		return nil, &stepError{msg: automation.HostRefused(cred.conn, req.URL.Hostname())}
	}
	cred.apply(req)
	x.setIdempotencyKey(req, s, page)
	where := req.Method + " " + redactURL(req.URL)

	timeout := x.stepTimeout(s)
	// Every request a step sends counts against its project's
	// outboundPerMinute: retries and pages too (outbound.go).
	if se := x.admitOutbound(ctx, where); se != nil {
		return nil, se
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req = req.WithContext(rctx)
	client := &http.Client{Transport: x.e.sender, CheckRedirect: cred.redirectPolicy(req.URL.Host)}

	resp, err := client.Do(req)
	if err != nil {
		return nil, cred.sendError(ctx, rctx, where, timeout, err)
	}
	defer resp.Body.Close()
	data, truncated, se := x.readBody(rctx, resp, where, timeout, cred)
	if se != nil {
		return nil, se
	}
	out := map[string]any{
		"status":  resp.StatusCode,
		"headers": responseHeaders(resp.Header),
		"body":    responseBody(resp.Header.Get("Content-Type"), data, truncated),
	}
	if truncated {
		out["truncated"] = true
	}
	output := maskValue(out, cred.secrets).(map[string]any)

	if cred.conn.ID != "" {
		x.connectionSeen(ctx, cred.conn, resp.StatusCode)
	}
	if se := x.statusError(resp, where, cred); se != nil {
		se.output = output
		return nil, se
	}
	return output, nil
}

// credential is what a step's connection adds to its requests: a header
// or a query parameter carrying its key, and the strings to mask wherever
// they show.
type credential struct {
	conn   automation.Connection
	header string // the header carrying the key, "" without one
	value  string
	// query carries the key as a query parameter instead (QUERY).
	query, queryValue string
	secrets           []string
	key               string // the key itself (an ACTION may put it in the path)
	// baseURL is the value's own endpoint (a model connection's baseUrl),
	// kept so that a step needs no second read of the connection.
	baseURL string
}

// credential reads the step's connection, if it names one.
func (x *execution) credential(ctx context.Context, s automation.Step) (credential, *stepError) {
	var c credential
	id, se := x.connectionID(s)
	if se != nil || id == "" {
		return c, se
	}
	if x.e.creds == nil {
		return c, &stepError{msg: "connection " + id + ": no credential store is configured"}
	}
	conn, v, err := x.e.creds.ConnectionCredential(ctx, x.flow.Project, id)
	if err != nil {
		var ae *automation.Error
		if errors.As(err, &ae) {
			// Its message names the connection and its state.
			return c, &stepError{msg: ae.Message}
		}
		return c, &stepError{msg: fmt.Sprintf("connection %s: reading the credential failed: %v", id, err), retryable: true}
	}
	c.conn, c.baseURL = conn, v.BaseURL
	key := v.APIKey.Reveal()
	if key == "" {
		return c, &stepError{msg: "connection " + id + " has no API key"}
	}
	c.key = key
	c.secrets = append(c.secrets, key)
	for _, m := range v.Masks {
		c.secrets = append(c.secrets, m.Reveal())
	}
	if v.Query != "" {
		// QUERY: the value goes in the URL, where an echo may show it
		// escaped as well.
		c.query, c.queryValue = v.Query, key
		c.secrets = append(c.secrets, url.QueryEscape(key), url.PathEscape(key))
	}
	// And every form an echo may show them in: URL-escaped, base64
	// (automation.SecretForms), longest first.
	c.secrets = append(automation.SecretMasks(c.secrets), c.secrets...)
	c.header, c.value = "Authorization", "Bearer "+key
	if v.Header != "" {
		c.header = v.Header
	}
	if v.Prefix != nil {
		c.value = *v.Prefix + key
	}
	if !validFieldValue(c.value) {
		return c, &stepError{msg: "connection " + id + ": its key or prefix contains a control character (CR, LF or another); store the key again"}
	}
	if c.query != "" {
		c.header = ""
	}
	return c, nil
}

// masked is a step error whose message shows none of the credential.
func (c credential) masked(msg string) *stepError { return &stepError{msg: mask(msg, c.secrets)} }

// apply puts the key on req.
func (c credential) apply(req *http.Request) {
	if c.header != "" {
		req.Header.Set(c.header, c.value)
	}
	if c.query != "" {
		q := req.URL.Query()
		q.Set(c.query, c.queryValue)
		req.URL.RawQuery = q.Encode()
	}
}

// redirectPolicy follows at most maxRedirects redirects, never out of the
// connection's allowed hosts, and drops a custom key header when leaving
// origin.
func (c credential) redirectPolicy(origin string) func(*http.Request, []*http.Request) error {
	return func(next *http.Request, via []*http.Request) error {
		if len(via) > maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		// A redirect is a new send: to a host in a form the fence could
		// misread, or outside the fence, the step fails rather than
		// follows it.
		if err := automation.CheckSendHost(next.URL.Hostname()); err != nil {
			return &hostRefusedError{host: next.URL.Hostname(), why: err.Error()}
		}
		if c.conn.ID != "" && !automation.HostAllowed(c.conn.AllowedHosts, next.URL.Hostname()) {
			return &hostRefusedError{host: next.URL.Hostname()}
		}
		// Go drops Authorization on a redirect to another host, but
		// not a custom key header: drop it here.
		if c.header != "" && next.URL.Host != origin {
			next.Header.Del(c.header)
		}
		return nil
	}
}

// setIdempotencyKey sends the same key on every retry and resume of this
// run's step, so that the service deduplicates what it already did; the
// step's own header wins, and "idempotencyKey": false turns it off. Each
// page of a paginated step has its own, or the service would answer every
// page with the first.
func (x *execution) setIdempotencyKey(req *http.Request, s automation.Step, page int) {
	if req.Method == http.MethodGet || req.Method == http.MethodHead ||
		s.IdempotencyKey != nil && !*s.IdempotencyKey || req.Header.Get("Idempotency-Key") != "" {
		return
	}
	origin := x.run.ID
	if x.run.ResumedFrom != "" {
		origin = x.run.ResumedFrom
	}
	key := automation.IdempotencyKeyFor(origin, s.Name)
	if x.iter != "" { // inside FOR_EACH: one key per item, or every item would share one
		key += "." + x.iter
	}
	if page > 1 {
		key += ".p" + strconv.Itoa(page)
	}
	req.Header.Set("Idempotency-Key", key)
}

// stepTimeout is how long one request of the step may take.
func (x *execution) stepTimeout(s automation.Step) time.Duration {
	if s.TimeoutMs > 0 {
		return min(time.Duration(s.TimeoutMs)*time.Millisecond, MaxHTTPTimeout)
	}
	return x.e.timeout
}

// sendError classifies a failed send: refused and private addresses fail
// for good; the run ending, timeouts and network errors are retryable.
func (c credential) sendError(ctx, rctx context.Context, where string, timeout time.Duration, err error) *stepError {
	var pe *privateAddrError
	var hr *hostRefusedError
	switch {
	case errors.As(err, &hr) && hr.why != "":
		return c.masked(where + " redirected: " + hr.why)
	case errors.As(err, &hr):
		return c.masked(where + " redirected: " + automation.HostRefused(c.conn, hr.host))
	case errors.As(err, &pe):
		return c.masked(where + ": " + pe.Error())
	case ctx.Err() != nil:
		return &stepError{msg: where + ": the run ended", retryable: true}
	case errors.Is(rctx.Err(), context.DeadlineExceeded):
		return &stepError{msg: fmt.Sprintf("%s: timed out after %s", where, timeout), retryable: true}
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		// Its text names the resolver, an internal address.
		return &stepError{msg: fmt.Sprintf("%s: could not resolve host %s", where, de.Name), retryable: true}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the full URL
	}
	e := c.masked(fmt.Sprintf("%s: request failed: %v", where, err))
	e.retryable = true
	return e
}

// readBody reads at most maxResponse bytes of the answer, and says whether
// there was more.
func (x *execution) readBody(rctx context.Context, resp *http.Response, where string, timeout time.Duration, c credential) ([]byte, bool, *stepError) {
	data, err := io.ReadAll(io.LimitReader(resp.Body, x.e.maxResponse+1))
	if err != nil {
		e := c.masked(fmt.Sprintf("%s: reading the response failed: %v", where, err))
		if errors.Is(rctx.Err(), context.DeadlineExceeded) {
			e.msg = fmt.Sprintf("%s: timed out after %s", where, timeout)
		}
		e.retryable = true
		return nil, false, e
	}
	truncated := int64(len(data)) > x.e.maxResponse
	if truncated {
		data = data[:x.e.maxResponse]
	}
	return data, truncated, nil
}

// statusError is the step's failure for an answer outside 2xx, nil for a
// 2xx: 408, 429 and 5xx are transient; any other 4xx is permanent.
func (x *execution) statusError(resp *http.Response, where string, c credential) *stepError {
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	msg := fmt.Sprintf("%s answered %d %s", where, resp.StatusCode, http.StatusText(resp.StatusCode))
	if c.conn.ID != "" && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		msg += fmt.Sprintf("; connection %s (%s) was refused and is now in ERROR", c.conn.ID, c.conn.Name)
	}
	return &stepError{
		msg: mask(msg, c.secrets),
		retryable: resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests ||
			resp.StatusCode >= 500,
		retryAfter: retryAfter(resp.Header.Get("Retry-After"), x.e.clock()),
	}
}

// request builds the step's request from its templates.
func (x *execution) request(ctx context.Context, s automation.Step) (*http.Request, error) {
	c, env := x.e.checker, x.env
	raw, err := c.evalText(s.URL, env)
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("url %q is not a valid URL", raw)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("url %q: only absolute http and https URLs are allowed", redactURL(u))
	}
	// The host allowedHosts match is the host dialled: a form the two
	// could read apart (an IPv6 zone, a numeric IPv4 form) is refused.
	if err := automation.CheckSendHost(u.Hostname()); err != nil {
		return nil, fmt.Errorf("url %q: %s", redactURL(u), err.Error())
	}
	if len(s.Query.Params) > 0 {
		q := u.Query()
		for k, v := range s.Query.Params {
			t, err := c.evalText(v, env)
			if err != nil {
				return nil, fmt.Errorf("query.%s: %w", k, err)
			}
			q.Set(k, t)
		}
		u.RawQuery = q.Encode()
	}

	var body io.Reader
	contentType := ""
	v, err := decode("body", s.Body)
	if err != nil {
		return nil, err
	}
	if v != nil {
		v, err = c.evalValue(v, env)
		if err != nil {
			return nil, fmt.Errorf("body.%w", err)
		}
		if str, ok := v.(string); ok {
			body, contentType = strings.NewReader(str), "text/plain; charset=utf-8"
		} else {
			bud := budgetOf(env)
			b, ok, err := boundedJSON(v, bud.bytes)
			if err != nil {
				return nil, fmt.Errorf("body: %w", err)
			}
			if err := bud.grow(len(b)); !ok || err != nil {
				return nil, fmt.Errorf("body: %w", bud.grow(-1))
			}
			body, contentType = bytes.NewReader(b), "application/json"
		}
	}

	method := strings.ToUpper(strings.TrimSpace(s.Method))
	if method == "" {
		method = http.MethodGet
		if body != nil {
			method = http.MethodPost
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("method %q or url is not valid", method)
	}
	for k, v := range s.Headers {
		t, err := c.evalText(v, env)
		if err != nil {
			return nil, fmt.Errorf("headers.%s: %w", k, err)
		}
		if !validFieldValue(t) {
			// Go would refuse to send it, as a transient-looking network
			// error; it is the definition's fault, so the step fails for good.
			return nil, fmt.Errorf("headers.%s: the value contains a control character (CR, LF or another); a header value is one line of text", k)
		}
		req.Header.Set(k, t)
	}
	if contentType != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req, nil
}

// connectionSeen keeps the connection's state current: a 401 or 403 puts the connection in
// ERROR, a later success takes it back to ACTIVE.
func (x *execution) connectionSeen(ctx context.Context, c automation.Connection, status int) {
	var to automation.ConnectionStatus
	switch {
	case (status == http.StatusUnauthorized || status == http.StatusForbidden) && c.Status != automation.ConnectionError:
		to = automation.ConnectionError
	case status >= 200 && status <= 299 && c.Status == automation.ConnectionError:
		to = automation.ConnectionActive
	default:
		return
	}
	// The answer was seen: record it even if the run is being cut short.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := x.e.creds.SetConnectionStatus(sctx, x.flow.Project, c.ID, to); err != nil {
		x.e.log.WarnContext(ctx, "connection status not recorded", "connection", c.ID, "status", to, "err", err)
	}
}

// hostRefusedError stops a redirect to a host outside a connection's
// allowedHosts.
type hostRefusedError struct{ host, why string }

func (e *hostRefusedError) Error() string { return "redirect to " + e.host + " refused" }

// validFieldValue reports whether s may be sent as an HTTP field value: no
// control character but the tab.
func validFieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// redactURL is a URL fit for messages: no user info, query or fragment.
func redactURL(u *url.URL) string {
	r := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	return r.String()
}

func responseHeaders(h http.Header) map[string]any {
	out := make(map[string]any, len(h))
	for k, v := range h {
		out[k] = strings.Join(v, ", ")
	}
	return out
}

// responseBody is parsed JSON when the response is JSON, and text otherwise
// (including a JSON body that was cut).
func responseBody(contentType string, data []byte, truncated bool) any {
	if !truncated && (strings.Contains(contentType, "json") || contentType == "") && json.Valid(data) {
		var v any
		if json.Unmarshal(data, &v) == nil {
			return v
		}
	}
	return string(data)
}

// mask replaces every occurrence of the secrets in s with SecretMask.
func mask(s string, secrets []string) string {
	for _, k := range secrets {
		s = strings.ReplaceAll(s, k, automation.SecretMask)
	}
	return s
}

// maskValue masks the secrets in every string and key of a JSON value. It
// works on decoded values, so escaped forms in JSON text are caught too.
func maskValue(v any, secrets []string) any {
	if len(secrets) == 0 {
		return v
	}
	switch v := v.(type) {
	case string:
		return mask(v, secrets)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[mask(k, secrets)] = maskValue(x, secrets)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = maskValue(x, secrets)
		}
		return out
	}
	return v
}

// retryAfter is the delay a Retry-After header asks for (seconds or an HTTP
// date), 0 when there is none or it cannot be read.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 {
			return 0
		}
		return time.Duration(min(n, 86400)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
