package flowdef

import (
	"mime"
	"net/http"
	"strings"
)

func init() {
	register(Rules{
		Type:   StepRespond,
		Fields: []string{"headers", "body", "statusCode", "contentType"},
		Check:  checkRespond,
	})
}

// reservedResponseHeaders are the headers a RESPOND step may not set,
// canonical name -> why. The receiver owns them: framing and hop-by-hop
// headers describe the connection, not the answer (a wrong Content-Length
// or Transfer-Encoding corrupts the response, or smuggles a second one);
// Set-Cookie would plant cookies on the service's shared domain for every
// other flow; the rest are headers the receivers set themselves.
var reservedResponseHeaders = map[string]string{
	"Connection":              "a hop-by-hop header the server owns",
	"Keep-Alive":              "a hop-by-hop header the server owns",
	"Proxy-Connection":        "a hop-by-hop header the server owns",
	"Proxy-Authenticate":      "a hop-by-hop header the server owns",
	"Te":                      "a hop-by-hop header the server owns",
	"Trailer":                 "a hop-by-hop header the server owns",
	"Transfer-Encoding":       "a hop-by-hop header the server owns",
	"Upgrade":                 "a hop-by-hop header the server owns",
	"Content-Length":          "the server computes it from the body",
	"Content-Encoding":        "the body is sent as rendered, never encoded",
	"Content-Type":            "use the step's contentType field",
	"Set-Cookie":              "webhook URLs share one domain, so a cookie would reach every other flow",
	"Set-Cookie2":             "webhook URLs share one domain, so a cookie would reach every other flow",
	"X-Run-Id":                "the receiver sets it to the run's ID",
	"X-Request-Id":            "the receiver sets it to the request's ID",
	"Cache-Control":           "the receiver sets no-store: every answer is for one delivery",
	"Vary":                    "the receiver sets it for CORS",
	"Allow":                   "the receiver sets it from the webhook's methods",
	"Www-Authenticate":        "the receiver sets it from the webhook's authentication",
	"Retry-After":             "the receiver sets it when it cannot accept a delivery",
	"Content-Security-Policy": "the receiver sandboxes every answer, so that a flow's page cannot act on the service's origin",
	"X-Content-Type-Options":  "the receiver sets nosniff, so that browsers keep to contentType",
	// Headers that act on the whole origin, which the webhooks share with
	// the dashboard and the OAuth callback: reporting endpoints would see
	// every later request to it (callback URLs with their code and state
	// included), and the rest sign users out, pin HTTPS for the whole
	// domain, or redirect from the service's domain to anywhere.
	"Nel":                       "it would make browsers report every request to the service's origin to the flow's endpoint",
	"Report-To":                 "it would make browsers report every request to the service's origin to the flow's endpoint",
	"Reporting-Endpoints":       "it would make browsers report the service's origin to the flow's endpoint",
	"Clear-Site-Data":           "it would sign dashboard users out of the service's origin",
	"Strict-Transport-Security": "it would decide HTTPS for the service's whole domain",
	"Refresh":                   "it would redirect from the service's domain: an open redirect",
	"Location":                  "it would redirect from the service's domain: an open redirect",
}

// checkResponseHeader refuses a RESPOND header name the receiver owns.
func checkResponseHeader(at, name string) error {
	if !IsToken(name) {
		return Invalid("%s.headers: %q is not a valid HTTP header name", at, name)
	}
	canon := http.CanonicalHeaderKey(name)
	if why, ok := reservedResponseHeaders[canon]; ok {
		return Invalid("%s.headers.%s: a RESPOND step cannot set %s (%s)", at, name, canon, why)
	}
	if strings.HasPrefix(canon, "Access-Control-") {
		return Invalid("%s.headers.%s: a RESPOND step cannot set CORS headers; set the webhook's allowedOrigins", at, name)
	}
	return nil
}

// checkRespond checks a RESPOND step: status, headers, content type and
// body (any JSON value; strings are templates).
func checkRespond(c Checks, st *Step, at string) error {
	if st.StatusCode == 0 {
		st.StatusCode = 200
	}
	if st.StatusCode < 100 || st.StatusCode > 599 {
		return Invalid("%s.statusCode %d: use an HTTP status from 100 to 599", at, st.StatusCode)
	}
	for k, v := range st.Headers {
		if err := checkResponseHeader(at, k); err != nil {
			return err
		}
		if HasControl(v) {
			return Invalid("%s.headers.%s contains a control character (CR, LF or another): a header value is one line of text", at, k)
		}
		if err := c.Template(v); err != nil {
			return Invalid("%s.headers.%s: %v", at, k, err)
		}
	}
	if st.ContentType != "" {
		if _, _, err := mime.ParseMediaType(st.ContentType); err != nil || HasControl(st.ContentType) || len(st.ContentType) > 200 {
			return Invalid("%s.contentType %q: use a media type such as application/json or text/plain; charset=utf-8", at, ClipID(st.ContentType))
		}
	}
	if len(st.Body) == 0 {
		return nil
	}
	return CheckTemplates(c, at+".body", st.Body)
}

// ResponseHeaderAllowed reports whether a RESPOND step may set the header
// name: the receivers check it again when they send, so that a definition
// stored before a rule existed still cannot set what they own.
func ResponseHeaderAllowed(name string) bool {
	return checkResponseHeader("", name) == nil
}
