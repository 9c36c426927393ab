// Package mcpserver serves a project's flows as the tools of a Model
// Context Protocol server (docs/api.md, "MCP"): the Streamable HTTP
// transport of the official Go SDK in its stateless mode, so that any
// instance (a flowd node, a Lambda environment) answers any request with no
// session to find. The caller authenticates the request (pkg/httpapi's
// bearer key) and hands over its principal; what the package needs of the
// domain is the narrow Domain.
package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"flowservice/pkg/automation"
	"flowservice/pkg/fairshare"
)

// Domain is what the server needs of the flow service; *automation.Service
// is one.
type Domain interface {
	// MCPToolFlows lists the project's enabled flows with a
	// trigger.inputSchema, and the tool names two flows share.
	MCPToolFlows(ctx context.Context, project string) ([]automation.ToolFlow, []string, error)
	// CallTool starts a run of a flow and awaits its end, at most c.Wait.
	CallTool(ctx context.Context, c automation.ToolCall) (automation.Run, error)
}

var _ Domain = (*automation.Service)(nil)

// The bounds of the server, in docs/reliability.md.
const (
	// DefaultWait is how long a tools/call waits for its run on flowd.
	DefaultWait = 60 * time.Second
	// MaxBody bounds the body of one /mcp request: a tools/call's
	// arguments become a run's trigger.body, which the management API
	// bounds the same (httpapi.MaxBodyBytes).
	MaxBody = 1 << 20
	// PageSize is how many tools one tools/list answers before a cursor.
	PageSize = 100
	// Slots is how many tools/call a process awaits at once, and
	// SlotsPerProject how many of them one project may hold: a call past
	// its project's share is refused at once (MCP clients retry), so that
	// one project's callers cannot hold every waiting request.
	Slots           = 64
	SlotsPerProject = 16
)

// Options configure New; the zero value takes the defaults above.
type Options struct {
	// Wait is how long a tools/call waits for its run (DefaultWait); on
	// Lambda it must end before API Gateway's 29 s (awsapp.Config).
	Wait time.Duration
	// PageSize is the tools per tools/list page (PageSize).
	PageSize int
	// Slots shares the awaited calls among projects; nil: a
	// fairshare.New(Slots, SlotsPerProject) of the server's own.
	Slots *fairshare.Slots
	// WatchOnly leaves each call's run to the queue's executor and only
	// watches it (automation.ToolCall.WatchOnly): the api function on
	// Lambda.
	WatchOnly bool
	// Version is the server's version in its initialize answer.
	Version string
	Log     *slog.Logger
}

// Server serves /mcp.
type Server struct {
	d     Domain
	opts  Options
	log   *slog.Logger
	slots *fairshare.Slots
	h     *mcp.StreamableHTTPHandler
}

// New returns the server of d's flows.
func New(d Domain, o Options) *Server {
	if o.Wait <= 0 {
		o.Wait = DefaultWait
	}
	if o.PageSize <= 0 {
		o.PageSize = PageSize
	}
	if o.Slots == nil {
		o.Slots = fairshare.New(Slots, SlotsPerProject)
	}
	if o.Version == "" {
		o.Version = "1"
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{d: d, opts: o, log: log, slots: o.Slots}
	s.h = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		srv, _ := r.Context().Value(serverKey{}).(*mcp.Server)
		return srv
	}, &mcp.StreamableHTTPOptions{
		// No session: each request is answered whole by the instance that
		// receives it, which is what Lambda (and nodes without affinity)
		// can promise.
		Stateless: true,
		// One JSON answer per request rather than an event stream: API
		// Gateway's REST integration buffers the answer anyway.
		JSONResponse: true,
		// The SDK's guard against DNS rebinding refuses a loopback
		// connection whose Host is not loopback: that is every flowd
		// behind a reverse proxy on the same machine. Every request here
		// carries an API key, which a rebinding page does not have.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        MaxBody,
		Logger:                     log,
	})
	return s
}

// Wait is how long a tools/call waits for its run.
func (s *Server) Wait() time.Duration { return s.opts.Wait }

// MaxBody bounds a request's body; the route reads it first (httpapi).
func (s *Server) MaxBody() int64 { return MaxBody }

type serverKey struct{}

// ServeMCP answers one MCP request of p, whose body the caller has read
// within MaxBody (r.Body holds it again).
//
// The MCP server is built for this request from the project's flows as
// they are now: tools differ per project and change with every flow
// saved, enabled or disabled, and the stateless transport asks for a server
// per request anyway. A per-project cache would save one flow list per
// request but would need invalidation on every flow write, across
// processes; the list is one paged store read, bounded by the flows quota,
// and only requests that name tools (tools/list, tools/call) pay it.
func (s *Server) ServeMCP(w http.ResponseWriter, r *http.Request, body []byte, p automation.Principal) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "flowservice", Version: s.opts.Version},
		&mcp.ServerOptions{PageSize: s.opts.PageSize, Logger: s.log,
			// Tools even when the project has none yet; no listChanged: a
			// stateless server sends no notifications.
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
	if needsTools(body) {
		tools, clashes, err := s.d.MCPToolFlows(r.Context(), p.Project.ID)
		if err != nil {
			s.log.ErrorContext(r.Context(), "mcp: list tool flows", "project", p.Project.ID, "err", err)
			writeRPCError(w, http.StatusServiceUnavailable, "the project's flows could not be read; try again")
			return
		}
		if len(clashes) > 0 {
			s.log.WarnContext(r.Context(), "mcp: flows left out, their names give the same tool name", "project", p.Project.ID, "tools", clashes)
		}
		depth := automation.ParseFlowDepth(r.Header.Get(automation.FlowDepthHeader))
		for _, t := range tools {
			if !objectSchema(t.InputSchema) {
				continue // saved before inputSchema was checked: no tool
			}
			srv.AddTool(&mcp.Tool{Name: t.Tool, Description: t.Description, InputSchema: t.InputSchema},
				s.call(p, t, depth))
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), serverKey{}, srv)))
}

// call is the handler of flow t's tool for p.
func (s *Server) call(p automation.Principal, t automation.ToolFlow, depth int) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		if err := p.Authorize(automation.PermOperate, "tools/call"); err != nil {
			return toolError(errorText(err), nil), nil
		}
		project := p.Project.ID
		// A context already ended: a slot now, or none.
		done, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.slots.Acquire(done, project); err != nil {
			return toolError(fmt.Sprintf("TOO_MANY_CALLS: this project already has %d tool calls waiting on this server; try again when one ends",
				s.slots.Cap()), nil), nil
		}
		defer s.slots.Release(project)
		var args json.RawMessage
		if req.Params != nil {
			args = req.Params.Arguments
		}
		run, err := s.d.CallTool(ctx, automation.ToolCall{Project: project, FlowID: t.ID, Args: args, Depth: depth,
			Wait: s.opts.Wait, WatchOnly: s.opts.WatchOnly})
		if err != nil {
			var ae *automation.Error
			if errors.As(err, &ae) {
				return toolError(errorText(ae), nil), nil
			}
			if run.ID == "" {
				s.log.ErrorContext(ctx, "mcp: call tool", "project", project, "flow", t.ID, "err", err)
				return toolError("the run could not be started; try again", nil), nil
			}
		}
		return result(run, s.opts.Wait), nil
	}
}

// result is the tools/call answer of run as AwaitRun left it.
func result(run automation.Run, wait time.Duration) *mcp.CallToolResult {
	switch run.Status {
	case automation.RunSucceeded:
		var out json.RawMessage
		if run.Response != nil {
			out = run.Response.Body
		}
		if len(bytes.TrimSpace(out)) == 0 {
			out = json.RawMessage(`{}`)
		}
		// structuredContent is an object for every client: another value
		// goes under "result". The text is the value itself for a string
		// (a RESPOND with a text body), else its JSON.
		structured := out
		if !isObject(out) {
			structured, _ = json.Marshal(map[string]json.RawMessage{"result": out})
		}
		text := string(out)
		var str string
		if json.Unmarshal(out, &str) == nil {
			text = str
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: structured}
	case automation.RunFailed, automation.RunTimeout:
		return toolError(fmt.Sprintf("run %s ended %s: %s", run.ID, run.Status, run.Error),
			map[string]any{"runId": run.ID, "status": run.Status, "error": run.Error})
	}
	return toolError(fmt.Sprintf("run %s is still running after %s; it goes on: read it with GET /api/v1/flows/%s/runs/%s",
		run.ID, wait, run.FlowID, run.ID), map[string]any{"runId": run.ID, "status": run.Status})
}

// errorText is a refusal as a tool error shows it: the code the
// management API would answer, then its message.
func errorText(err error) string {
	var ae *automation.Error
	if errors.As(err, &ae) {
		return ae.Code + ": " + ae.Message
	}
	return err.Error()
}

func toolError(msg string, structured any) *mcp.CallToolResult {
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
	if structured != nil {
		res.StructuredContent = structured
	}
	return res
}

// needsTools reports whether a request body names tools: a JSON-RPC
// request (or batch) with a tools/ method. initialize and the
// notifications need no flow list; a body that does not parse is the
// SDK's to refuse.
func needsTools(body []byte) bool {
	type msg struct {
		Method string `json:"method"`
	}
	var one msg
	if json.Unmarshal(body, &one) == nil {
		return strings.HasPrefix(one.Method, "tools/")
	}
	var batch []msg
	if json.Unmarshal(body, &batch) == nil {
		for _, m := range batch {
			if strings.HasPrefix(m.Method, "tools/") {
				return true
			}
		}
	}
	return false
}

func objectSchema(schema json.RawMessage) bool {
	var top struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(schema, &top) == nil && top.Type == "object"
}

func isObject(v json.RawMessage) bool {
	t := bytes.TrimSpace(v)
	return len(t) > 0 && t[0] == '{'
}

// writeRPCError answers a request the server cannot take with a JSON-RPC
// error, which MCP clients show as such.
func writeRPCError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32603, "message": msg}})
}
