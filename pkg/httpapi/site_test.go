package httpapi

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// newSiteServer serves the API and both receivers on one address, as flowd
// does: a Site on a JSONErrorListener with MaxHeaderBytes.
func newSiteServer(t *testing.T) (*httptest.Server, *hookEnv) {
	t.Helper()
	h := newHookEnv(t, HookConfig{})
	site := NewSite()
	site.Handle("/", h.api.Config.Handler)
	site.Handle(webhookPrefix, h.engine.Config.Handler)
	site.Handle(workflowPrefix, h.workflow.Config.Handler)
	srv := httptest.NewUnstartedServer(site)
	srv.Listener = JSONErrorListener(srv.Listener)
	srv.Config.MaxHeaderBytes = MaxHeaderBytes
	srv.Config.DisableGeneralOptionsHandler = true
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, h
}

// rawExchange writes req as is and reads one answer.
func rawExchange(t *testing.T, addr, req string) (*http.Response, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read answer to %.60q: %v", req, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, b
}

// Every answer the HTTP layer itself gives is in the JSON envelope.
func TestHTTPLayerAnswersJSON(t *testing.T) {
	srv, _ := newSiteServer(t)
	addr := srv.Listener.Addr().String()
	huge := strings.Repeat("a", MaxHeaderBytes+8<<10)
	tests := []struct {
		name, req  string
		wantStatus int
		wantCode   string
	}{
		{"double slash", "GET //api/v1/flows HTTP/1.1\r\nHost: x\r\n\r\n", 404, "NOT_FOUND"},
		{"dot segments", "GET /api/v1/../v1/flows HTTP/1.1\r\nHost: x\r\n\r\n", 404, "NOT_FOUND"},
		{"webhook double slash", "POST //api/v1/webhooks/flw_x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 404, "NOT_FOUND"},
		{"asterisk", "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 404, "NOT_FOUND"},
		{"garbage request line", "HELLO\r\n\r\n", 400, "BAD_REQUEST"},
		{"missing Host", "GET /api/v1/flows HTTP/1.1\r\n\r\n", 400, "BAD_REQUEST"},
		{"two Hosts", "GET /api/v1/flows HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "BAD_REQUEST"},
		{"bad header name", "GET /api/v1/flows HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", 400, "BAD_REQUEST"},
		{"header without colon", "GET /api/v1/flows HTTP/1.1\r\nHost: x\r\nnocolon\r\n\r\n", 400, "BAD_REQUEST"},
		{"control char in header value", "GET /api/v1/flows HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", 400, "BAD_REQUEST"},
		{"huge header", "GET /api/v1/flows HTTP/1.1\r\nHost: x\r\nX-Big: " + huge + "\r\n\r\n", 431, "HEADERS_TOO_LARGE"},
		{"huge URL", "GET /api/v1/flows/" + huge + " HTTP/1.1\r\nHost: x\r\n\r\n", 431, "HEADERS_TOO_LARGE"},
		{"unknown transfer encoding", "POST /api/v1/flows HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "UNSUPPORTED_TRANSFER_ENCODING"},
		{"HTTP/2 in HTTP/1 syntax", "GET /api/v1/flows HTTP/2.0\r\nHost: x\r\n\r\n", 400, "UNSUPPORTED_HTTP_VERSION"},
		{"bad chunked body", "POST /api/v1/webhooks/flw_x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz\r\n", 404, "FLOW_NOT_FOUND"},
		{"content-length and chunked", "POST /api/v1/flows HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 401, "UNAUTHORIZED"},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 404, "NOT_FOUND"},
		{"bad content-length", "POST /api/v1/flows HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400, "BAD_REQUEST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := rawExchange(t, addr, tt.req)
			var e errorBody
			if resp.StatusCode != tt.wantStatus || resp.Header.Get("Content-Type") != "application/json" ||
				json.Unmarshal(body, &e) != nil || !slices.Contains(strings.Split(tt.wantCode, "|"), e.Error.Code) || e.Error.RequestID == "" ||
				e.Error.RequestID != resp.Header.Get("X-Request-Id") {
				t.Errorf("%d %s %s; want %d %s in the JSON envelope", resp.StatusCode, resp.Header.Get("Content-Type"), body, tt.wantStatus, tt.wantCode)
			}
		})
	}
	// The server still serves.
	resp, _ := rawExchange(t, addr, "GET /api/v1/openapi.json HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Errorf("openapi.json after the abuse: %d", resp.StatusCode)
	}
}

func TestRewriteServerErrorLeavesOtherWritesAlone(t *testing.T) {
	for _, b := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nok",
		"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nDate: x\r\n\r\nno",
		`{"some":"body"}`,
		"",
	} {
		if _, ok := rewriteServerError([]byte(b)); ok {
			t.Errorf("rewrote %q", b)
		}
	}
}
