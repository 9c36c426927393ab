// Package mcptest is a real MCP server for tests of MCP steps and AI
// steps' MCP tools: the official Go SDK's server (mcp.NewServer, AddTool,
// mcp.NewStreamableHTTPHandler) on an httptest server on 127.0.0.1. It
// counts the calls of each tool and keeps the headers each request
// carried, so that a test sees a side effect happen once and a
// credential reach the server.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is a running test MCP server. Its tools:
//
//   - create_issue {"title"}: structuredContent {"id": n, "title"}, n
//     counting the calls (the side effect a test counts);
//   - greet {"name"}: text content only, two items ("Hello, <name>!" and
//     "Bye.");
//   - whoami: text echoing the request's Authorization header (a
//     server that shows a credential back);
//   - fail: isError with the text "the tracker is read-only";
//   - big {"bytes"}: that many bytes of text;
//   - slow: answers only when the call's context ends (a tool that never
//     finishes in time).
type Server struct {
	*httptest.Server
	// Endpoint is the Streamable HTTP endpoint.
	Endpoint string

	mu      sync.Mutex
	calls   map[string]int
	methods map[string]int
	headers []http.Header
	keys    []string // Idempotency-Key of each tools/call request
	// SlowEntered receives once per call of slow, when it began.
	SlowEntered chan struct{}
}

// Start starts a server, stopped when the test ends.
func Start(t testing.TB) *Server {
	s := &Server{calls: map[string]int{}, methods: map[string]int{}, SlowEntered: make(chan struct{}, 16)}
	stop := make(chan struct{}) // ends slow calls still open when the test ends
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1"}, nil)
	obj := func(props string, required ...string) json.RawMessage {
		req, _ := json.Marshal(required)
		if required == nil {
			req = []byte("[]")
		}
		return json.RawMessage(`{"type":"object","properties":` + props + `,"required":` + string(req) + `}`)
	}
	srv.AddTool(&mcp.Tool{Name: "create_issue", Description: "Creates an issue in the tracker",
		InputSchema: obj(`{"title":{"type":"string"}}`, "title")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Title string `json:"title"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &in)
			n := s.count("create_issue")
			out := map[string]any{"id": n, "title": in.Title}
			b, _ := json.Marshal(out)
			return &mcp.CallToolResult{StructuredContent: out, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "greet", Description: "Greets someone", InputSchema: obj(`{"name":{"type":"string"}}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Name string `json:"name"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &in)
			s.count("greet")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Hello, " + in.Name + "!"}, &mcp.TextContent{Text: "Bye."}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "whoami", Description: "Tells the caller's credential", InputSchema: obj(`{}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.count("whoami")
			auth := ""
			if req.Extra != nil && req.Extra.Header != nil {
				auth = req.Extra.Header.Get("Authorization")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "you are " + auth}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "fail", Description: "Always fails", InputSchema: obj(`{}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.count("fail")
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the tracker is read-only"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "big", Description: "Answers as many bytes of text as asked", InputSchema: obj(`{"bytes":{"type":"integer"}}`, "bytes")},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Bytes int `json:"bytes"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &in)
			s.count("big")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", in.Bytes)}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "slow", Description: "Never answers in time", InputSchema: obj(`{}`)},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			s.count("slow")
			select {
			case s.SlowEntered <- struct{}{}:
			default:
			}
			select {
			case <-ctx.Done():
			case <-stop:
			}
			return nil, context.Canceled
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		var msg struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &msg)
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		if msg.Method != "" {
			s.methods[msg.Method]++
		}
		if msg.Method == "tools/call" {
			s.keys = append(s.keys, r.Header.Get("Idempotency-Key"))
		}
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	s.Endpoint = s.URL + "/mcp"
	t.Cleanup(func() {
		close(stop)
		s.Close()
	})
	return s
}

func (s *Server) count(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[tool]++
	return s.calls[tool]
}

// Calls is how many times tool was called.
func (s *Server) Calls(tool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[tool]
}

// Requests is how many JSON-RPC requests of method ("tools/list",
// "tools/call") the server was sent.
func (s *Server) Requests(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.methods[method]
}

// CallKeys are the Idempotency-Key headers of the tools/call requests so
// far, in order.
func (s *Server) CallKeys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.keys...)
}

// HeaderValues are the values of header name on every request so far.
func (s *Server) HeaderValues(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, h := range s.headers {
		out = append(out, strings.Join(h.Values(name), ","))
	}
	return out
}
