package flowdef

import (
	"net/url"
	"slices"
	"strings"
)

// HTTPMethods are the methods an HTTP step may send.
var HTTPMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}

func init() {
	register(Rules{
		Type: StepHTTP,
		Fields: []string{"connectionId", "connection", "method", "url", "headers", "query", "timeoutMs",
			"continueOnFail", "idempotencyKey", "retry", "body", "paginate"},
		SideEffects: true,
		Check:       checkHTTP,
	})
}

// checkHTTP checks an HTTP step (and a POLL trigger's request); the
// connection it names is the domain's to check.
func checkHTTP(c Checks, st *Step, at string) error {
	if st.Method == "" {
		st.Method = "GET"
		if len(st.Body) > 0 {
			st.Method = "POST"
		}
	}
	st.Method = strings.ToUpper(st.Method)
	if !slices.Contains(HTTPMethods, st.Method) {
		return Invalid("%s.method %q: allowed values are %s", at, st.Method, strings.Join(HTTPMethods, ", "))
	}
	if st.Query.SQL != "" {
		return Invalid(`%s.query of an HTTP step is an object of query parameters, e.g. {"page": "1"}`, at)
	}
	if strings.TrimSpace(st.URL) == "" {
		return Invalid("%s.url is required for HTTP", at)
	}
	if err := c.Template(st.URL); err != nil {
		return Invalid("%s.url: %v", at, err)
	}
	if !strings.Contains(st.URL, "{{") {
		u, err := url.Parse(st.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Invalid("%s.url %q: use an absolute http or https URL", at, st.URL)
		}
	}
	for k, v := range st.Headers {
		if !IsToken(k) {
			return Invalid("%s.headers: %q is not a valid HTTP header name", at, k)
		}
		if HasControl(v) {
			return Invalid("%s.headers.%s contains a control character (CR, LF or another): a header value is one line of text", at, k)
		}
		if err := c.Template(v); err != nil {
			return Invalid("%s.headers.%s: %v", at, k, err)
		}
	}
	for k, v := range st.Query.Params {
		if err := c.Template(v); err != nil {
			return Invalid("%s.query.%s: %v", at, k, err)
		}
	}
	if len(st.Body) > 0 {
		if err := CheckTemplates(c, at+".body", st.Body); err != nil {
			return err
		}
	}
	if st.TimeoutMs < 0 || st.TimeoutMs > MaxStepTimeoutMs {
		return Invalid("%s.timeoutMs %d: use 1 to %d (0 takes the default)", at, st.TimeoutMs, MaxStepTimeoutMs)
	}
	if st.Connection != "" {
		if st.ConnectionID != "" {
			return Invalid("%s: connection and connectionId both name a connection; keep one", at)
		}
		if err := CheckText(at+".connection", st.Connection, 200); err != nil {
			return err
		}
	}
	if st.Paginate != nil {
		return checkPaginate(c, st.Paginate, at+".paginate")
	}
	return nil
}

// CheckHTTP checks the fields of an HTTP request as an HTTP step's (a
// POLL trigger's request is one).
func CheckHTTP(c Checks, st *Step, at string) error { return checkHTTP(c, st, at) }

// checkPaginate checks an HTTP step's paginate and sets the default
// maxPages.
func checkPaginate(c Checks, p *Paginate, at string) error {
	if strings.TrimSpace(p.Next) == "" {
		return Invalid(`%s.next is required: an expression over response giving the next URL, a cursor (with param) or null, e.g. "response.body.next"`, at)
	}
	if err := c.ResponseExpression(p.Next); err != nil {
		return Invalid("%s.next: %v", at, err)
	}
	if strings.TrimSpace(p.Items) == "" {
		return Invalid(`%s.items is required: an expression over response giving the page's list, e.g. "response.body.data"`, at)
	}
	if err := c.ResponseExpression(p.Items); err != nil {
		return Invalid("%s.items: %v", at, err)
	}
	if p.Param != "" {
		if err := CheckText(at+".param", p.Param, 200); err != nil {
			return err
		}
	}
	if p.MaxPages == 0 {
		p.MaxPages = DefaultMaxPages
	}
	if p.MaxPages < 1 || p.MaxPages > MaxPages {
		return Invalid("%s.maxPages %d: use 1 to %d", at, p.MaxPages, MaxPages)
	}
	return nil
}
