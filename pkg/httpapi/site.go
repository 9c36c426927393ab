package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// MaxHeaderBytes is the limit on a request's line and headers that flowd
// gives net/http (which allows 4 KiB more): above it the answer is a 431 in
// the JSON envelope (see JSONErrorListener). It leaves room for a URL with
// a 100,000-character ID, which is answered (a 404 that quotes 64
// characters of it) rather than cut off.
const MaxHeaderBytes = 128 << 10

// Site serves several handlers on one address by path prefix. Unlike
// http.ServeMux it never cleans paths: ServeMux answers "//api/v1/flows" or
// "/a/../b" with a redirect and an HTML body, where every answer of this
// service is JSON. A request goes to the handler of the longest matching
// prefix as it came, and that handler refuses a path it does not know; a
// request no prefix matches is a JSON 404.
type Site struct {
	prefixes []string
	handlers map[string]http.Handler
}

// NewSite returns an empty site.
func NewSite() *Site { return &Site{handlers: map[string]http.Handler{}} }

// Handle serves requests whose path starts with prefix ("/" for all).
func (s *Site) Handle(prefix string, h http.Handler) {
	if _, ok := s.handlers[prefix]; !ok {
		s.prefixes = append(s.prefixes, prefix)
	}
	s.handlers[prefix] = h
}

// ServeHTTP dispatches r. A path with empty, "." or ".." segments is a
// JSON 404 whatever its prefix: no route has one, and a handler that
// cleans paths (the dashboard's ServeMux) would answer it with a redirect.
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if uncleanPath(r.URL.Path) {
		s.notFound(w, r)
		return
	}
	best := ""
	for _, p := range s.prefixes {
		if strings.HasPrefix(r.URL.Path, p) && len(p) > len(best) {
			best = p
		}
	}
	if h, ok := s.handlers[best]; ok && best != "" {
		h.ServeHTTP(w, r)
		return
	}
	s.notFound(w, r)
}

func (s *Site) notFound(w http.ResponseWriter, r *http.Request) {
	r = withRequestInfo(w, r)
	writeError(w, r, http.StatusNotFound, "NOT_FOUND", "no such route: "+clip(r.Method)+" "+clip(r.URL.Path))
}

// uncleanPath reports whether p has an empty (other than a trailing one),
// "." or ".." segment.
func uncleanPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return true
	}
	segs := strings.Split(p[1:], "/")
	for i, seg := range segs {
		if seg == "." || seg == ".." || (seg == "" && i < len(segs)-1) {
			return true
		}
	}
	return false
}

// JSONErrorListener wraps a listener so that the few answers net/http's
// server writes by itself, as plain text, before any handler runs (a
// malformed request line or header, a missing Host, headers above
// MaxHeaderBytes, an unsupported Transfer-Encoding or HTTP version), go out
// in the JSON error envelope instead. Go offers no hook for them: it writes
// each one to the connection in one Write, in a shape no handler's answer
// has (its headers are exactly Content-Type text/plain then Connection:
// close, where a handler's are sorted and carry a Date), and closes the
// connection. The status is kept, except that the 5xx Go uses for an
// unsupported Transfer-Encoding (501) or HTTP version (505) become 400: the
// fault is the client's.
func JSONErrorListener(ln net.Listener) net.Listener { return jsonErrorListener{ln} }

type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &jsonErrorConn{Conn: c}, nil
}

type jsonErrorConn struct{ net.Conn }

func (c *jsonErrorConn) Write(b []byte) (int, error) {
	out, ok := rewriteServerError(b)
	if !ok {
		return c.Conn.Write(b)
	}
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// CloseWrite half-closes the connection when the underlying one can, as
// net/http does after a 431 so that the client reads the answer before
// the connection goes.
func (c *jsonErrorConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// serverErrorHeaders is what net/http's server puts between the status
// line and the text of the answers it writes itself.
const serverErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// rewriteServerError turns one of net/http's own plain-text answers into
// the JSON envelope; ok is false for anything else.
func rewriteServerError(b []byte) (out []byte, ok bool) {
	const proto = "HTTP/1.1 "
	if !bytes.HasPrefix(b, []byte(proto)) || len(b) < len(proto)+3 {
		return nil, false
	}
	line, text, found := bytes.Cut(b[len(proto):], []byte(serverErrorHeaders))
	if !found || bytes.ContainsAny(line, "\r\n") {
		return nil, false
	}
	status, err := strconv.Atoi(string(line[:3]))
	if err != nil || status < 400 {
		return nil, false
	}
	// The text is "431 Request Header Fields Too Large", "400 Bad Request:
	// missing required Host header" or "Unsupported transfer encoding":
	// fixed strings of net/http that quote nothing of the request.
	detail := string(text)
	if _, after, ok := strings.Cut(detail, ": "); ok {
		detail = after
	}
	code, msg := "BAD_REQUEST", "malformed HTTP request"
	switch {
	case status == http.StatusRequestHeaderFieldsTooLarge:
		code, msg = "HEADERS_TOO_LARGE", fmt.Sprintf("the request line and headers are larger than %d bytes", MaxHeaderBytes)
	case status == http.StatusNotImplemented:
		status, code, msg = http.StatusBadRequest, "UNSUPPORTED_TRANSFER_ENCODING", "the request's Transfer-Encoding is not supported; send chunked or a Content-Length"
	case status == http.StatusHTTPVersionNotSupported:
		status, code, msg = http.StatusBadRequest, "UNSUPPORTED_HTTP_VERSION", "the request's HTTP version is not supported; use HTTP/1.1"
	case detail != "" && !strings.HasPrefix(detail, strconv.Itoa(status)):
		msg += ": " + detail
	}
	id := requestIDFrom(&http.Request{Header: http.Header{}})
	body, _ := json.Marshal(errorBody{errorDetail{Code: code, Message: msg, RequestID: id}})
	body = append(body, '\n')
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "HTTP/1.1 %d %s\r\nCache-Control: no-store\r\nConnection: close\r\nContent-Length: %d\r\nContent-Type: application/json\r\nX-Request-Id: %s\r\n\r\n",
		status, http.StatusText(status), len(body), id)
	buf.Write(body)
	return buf.Bytes(), true
}

// withRequestInfo gives a handler outside the API's own chain (health,
// metrics) a request ID and the error envelope's context.
func withRequestInfo(w http.ResponseWriter, r *http.Request) *http.Request {
	info := &requestInfo{id: requestIDFrom(r)}
	w.Header().Set("X-Request-Id", info.id)
	w.Header().Set("Cache-Control", "no-store")
	return r.WithContext(withInfo(r.Context(), info))
}
