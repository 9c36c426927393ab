package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowdef"
)

// MCP steps (docs/flows.md, "MCP") and AI steps' MCP tools call a tool of
// an MCP server over Streamable HTTP with the official Go SDK's client.
// Every request of a session goes through mcpWire: the connection's
// allowedHosts, the project's outboundPerMinute, the run's identification
// and the User-Agent, the engine's traced and guarded transport (the SSRF
// check at dial time), and a bound on what is read back. One session is
// opened per step execution and closed when the step ends: nothing of a
// connection's session outlives the step that used it.

// Bounds of MCP calls (docs/reliability.md).
const (
	// MaxMCPToolPages bounds the tools/list pages an AI step reads to
	// find its tools.
	MaxMCPToolPages = 10
	// MaxMCPToolSchemaBytes bounds a listed tool's input schema (as the
	// model is sent it and the step's journal keeps it).
	MaxMCPToolSchemaBytes = 16 << 10
	// MaxMCPToolDescription bounds a listed tool's description; a longer
	// one is cut.
	MaxMCPToolDescription = 4 << 10
	// MCPCloseWait bounds how long a step waits for its session's end;
	// the SDK's own bound of 5 s ends the rest in the background.
	MCPCloseWait = time.Second
)

// mcpSession is an open MCP session of one step with one connection.
type mcpSession struct {
	cs   *mcp.ClientSession
	wire *mcpWire
}

// secrets are the connection's header values in every form an echo may
// show them in.
func (s *mcpSession) secrets() []string { return s.wire.secrets }

// close ends the session (the SDK sends a DELETE, bounded at 5 s), waiting
// at most MCPCloseWait for it: a server still busy with a call the step
// gave up on may hold the DELETE, and the step has its answer already.
func (s *mcpSession) close() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.cs.Close()
	}()
	t := time.NewTimer(MCPCloseWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// mcpWire is the http.RoundTripper of an MCP session. It remembers why a
// request did not get through (a refusal before sending, a status, an
// answer over the bound), since the SDK's errors do not keep the cause.
type mcpWire struct {
	x       *execution
	conn    automation.Connection
	cfg     *automation.MCPConfig
	secrets []string

	mu       sync.Mutex
	refused  *stepError // a send refused before it left
	status   int        // the last status that was not 2xx
	tooLarge bool
}

func (w *mcpWire) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := fenced(w.conn, req.URL.Hostname()); err != nil {
		se := err.(*stepError)
		w.refuse(se)
		return nil, se
	}
	if se := w.x.admitOutbound(req.Context(), req.Method+" "+redactURL(req.URL)); se != nil {
		w.refuse(se)
		return nil, se
	}
	req = req.Clone(req.Context())
	for name, v := range w.cfg.Headers {
		req.Header.Set(name, v.Reveal())
	}
	w.x.identify(req)
	if k, ok := req.Context().Value(mcpIdemKey{}).(string); ok && req.Method == http.MethodPost {
		req.Header.Set("Idempotency-Key", k)
	}
	resp, err := w.x.e.sender.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		w.mu.Lock()
		w.status = resp.StatusCode
		w.mu.Unlock()
	}
	resp.Body = &mcpBody{rc: resp.Body, left: w.x.e.maxResponse, w: w}
	return resp, nil
}

func (w *mcpWire) refuse(se *stepError) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refused == nil {
		w.refused = se
	}
}

// errMCPTooLarge ends the read of an answer over the engine's response
// bound (the HTTP step's: FLOWD_MAX_RESPONSE_BYTES, 1 MiB by default).
var errMCPTooLarge = errors.New("the MCP server's answer is over the response limit")

// mcpBody reads at most left bytes of an answer.
type mcpBody struct {
	rc   io.ReadCloser
	left int64
	w    *mcpWire
}

func (b *mcpBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly the bound from a longer one.
		var one [1]byte
		if n, _ := b.rc.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		b.w.mu.Lock()
		b.w.tooLarge = true
		b.w.mu.Unlock()
		return 0, errMCPTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *mcpBody) Close() error { return b.rc.Close() }

// mcpOpen opens a session with the MCP connection of that name, within
// opCtx (whose deadline is timeout) inside the step's ctx. Its failures
// are step errors, retryable where nothing was called.
func (x *execution) mcpOpen(ctx, opCtx context.Context, timeout time.Duration, name string) (*mcpSession, *stepError) {
	id, se := x.connectionID(automation.Step{Connection: name})
	if se != nil {
		return nil, se
	}
	if x.e.creds == nil {
		return nil, &stepError{msg: "connection " + id + ": no credential store is configured"}
	}
	conn, v, err := x.e.creds.ConnectionCredential(opCtx, x.flow.Project, id)
	if err != nil {
		var ae *automation.Error
		if errors.As(err, &ae) {
			return nil, &stepError{msg: ae.Message}
		}
		return nil, &stepError{msg: fmt.Sprintf("connection %s: reading the credential failed: %v", id, err), retryable: true}
	}
	if v.MCP == nil {
		return nil, &stepError{msg: fmt.Sprintf("connection %s (%s) is a %s connection; MCP calls need an MCP connection", conn.ID, conn.Name, conn.Type)}
	}
	var secrets []string
	for _, m := range v.Masks {
		secrets = append(secrets, m.Reveal())
	}
	w := &mcpWire{x: x, conn: conn, cfg: v.MCP, secrets: append(automation.SecretMasks(secrets), secrets...)}
	hc := &http.Client{Transport: w, CheckRedirect: func(*http.Request, []*http.Request) error {
		// A redirect would carry the headers elsewhere.
		return errors.New("the MCP server answered with a redirect, which MCP calls do not follow")
	}}
	t := &mcp.StreamableClientTransport{
		Endpoint: v.MCP.URL, HTTPClient: hc,
		// No hidden reconnects: the step's timeout and the run's retries
		// decide what is tried again. No standalone stream: a call's
		// answer comes on its own request.
		MaxRetries: -1, DisableStandaloneSSE: true,
		MaxEventSize: int(x.e.maxResponse),
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "flowd", Version: buildVersion()}, nil)
	cs, err := client.Connect(opCtx, t, nil)
	if err != nil {
		return nil, w.fail(ctx, opCtx, timeout, "connecting to the MCP server", err, false)
	}
	return &mcpSession{cs: cs, wire: w}, nil
}

// fail classifies an MCP failure of what, in opCtx (whose deadline is the
// call's timeout) within the step's ctx. afterSend says the tool call may
// have reached the server: then a timeout or a broken connection is not
// retried, since the tool may have acted.
func (w *mcpWire) fail(ctx, opCtx context.Context, timeout time.Duration, what string, err error, afterSend bool) *stepError {
	w.mu.Lock()
	refused, status, tooLarge := w.refused, w.status, w.tooLarge
	w.mu.Unlock()
	masked := func(msg string, retry bool) *stepError {
		return &stepError{msg: mask(msg, w.secrets), retryable: retry}
	}
	var pe *privateAddrError
	var je *jsonrpc.Error
	switch {
	case refused != nil:
		return &stepError{msg: refused.msg, retryable: refused.retryable}
	case errors.As(err, &pe):
		return masked(what+": "+pe.Error(), false)
	case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &stepError{msg: what + ": the run ended", retryable: true}
	case errors.Is(opCtx.Err(), context.DeadlineExceeded):
		return &stepError{msg: fmt.Sprintf("%s: timed out after %s", what, timeout), retryable: !afterSend}
	case tooLarge || errors.Is(err, errMCPTooLarge):
		return &stepError{msg: fmt.Sprintf("%s: the MCP server's answer is over %d bytes (the response limit)", what, w.x.e.maxResponse)}
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return &stepError{msg: fmt.Sprintf("%s: the MCP server refused the connection's credential (HTTP %d); check the connection's headers", what, status)}
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return masked(fmt.Sprintf("%s: the MCP server is busy (HTTP %d)", what, status), true)
	case errors.As(err, &je):
		return masked(fmt.Sprintf("%s: the MCP server answered: %s", what, je.Message), false)
	}
	return masked(fmt.Sprintf("%s: %v", what, err), !afterSend)
}

// mcpIdemKey carries a tool call's Idempotency-Key to the requests the
// SDK sends for it (it makes them with the call's context), so that a
// server can deduplicate a call that a retry or a crash sends again.
type mcpIdemKey struct{}

// mcpCallKey is the Idempotency-Key of an MCP call: the HTTP step's
// (<runId>.<step>, an item's path inside FOR_EACH) and, for an AI step's
// tool call, its index.
func (x *execution) mcpCallKey(s automation.Step, call int) string {
	origin := x.run.ID
	if x.run.ResumedFrom != "" {
		origin = x.run.ResumedFrom
	}
	key := automation.IdempotencyKeyFor(origin, s.Name)
	if x.iter != "" {
		key += "." + x.iter
	}
	if call >= 0 {
		key += "." + strconv.Itoa(call)
	}
	return key
}

// callTool calls tool with args in the session, within opCtx (whose
// deadline is timeout), its requests carrying idem as Idempotency-Key.
func (s *mcpSession) callTool(ctx, opCtx context.Context, timeout time.Duration, tool string, args map[string]any, idem string) (*mcp.CallToolResult, *stepError) {
	res, err := s.cs.CallTool(context.WithValue(opCtx, mcpIdemKey{}, idem), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return nil, s.wire.fail(ctx, opCtx, timeout, "tool "+tool, err, true)
	}
	return res, nil
}

// mcpText is a result's text content: its text items joined by newlines.
func mcpText(res *mcp.CallToolResult) string {
	var texts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// mcpOutput is a successful result as a step's output: its
// structuredContent (as plain JSON values), else its text.
func mcpOutput(res *mcp.CallToolResult) (any, error) {
	if res.StructuredContent == nil {
		return mcpText(res), nil
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// mcpStep runs an MCP step: its output is the tool's structuredContent,
// else its text; a result with isError fails the step with its text.
func (x *execution) mcpStep(ctx context.Context, s automation.Step) (any, error) {
	timeout, err := s.MCPTimeout()
	if err != nil {
		return nil, fail(false, err)
	}
	args := map[string]any{}
	if len(s.Arguments) > 0 {
		v, err := decode("arguments", s.Arguments)
		if err != nil {
			return nil, fail(false, err)
		}
		if v, err = x.e.checker.evalValue(v, x.env); err != nil {
			return nil, fail(false, fmt.Errorf("arguments.%w", err))
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, &stepError{msg: "arguments must be a JSON object"}
		}
		args = m
	}
	// The timeout bounds the whole exchange: connecting, the call and
	// its answer.
	opCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	sess, se := x.mcpOpen(ctx, opCtx, timeout, s.Connection)
	if se != nil {
		return nil, se
	}
	defer sess.close()
	res, se := sess.callTool(ctx, opCtx, timeout, s.Tool, args, x.mcpCallKey(s, -1))
	if se != nil {
		return nil, se
	}
	if res.IsError {
		return nil, &stepError{msg: mask("tool "+s.Tool+" failed: "+mcpText(res), sess.secrets())}
	}
	out, err := mcpOutput(res)
	if err != nil {
		return nil, fail(false, fmt.Errorf("tool %s: its structuredContent: %w", s.Tool, err))
	}
	return maskValue(out, sess.secrets()), nil
}

// mcpDefaultTimeout bounds each MCP request of an AI step (tools/list,
// each call), which has no timeout field of its own.
const mcpDefaultTimeout = flowdef.DefaultMCPTimeout

// mcpListed is a tool an MCP server lists, as an AI step's model sees it.
type mcpListed struct {
	Connection  string          `json:"connection"`
	Tool        string          `json:"tool"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"inputSchema"`
}

// mcpListTools lists the tools of the session's server, all pages up to
// MaxMCPToolPages, by name.
func (s *mcpSession) listTools(ctx context.Context, conn string) (map[string]mcpListed, *stepError) {
	out := map[string]mcpListed{}
	opCtx, cancel := context.WithTimeout(ctx, mcpDefaultTimeout)
	defer cancel()
	cursor := ""
	for page := 0; page < MaxMCPToolPages; page++ {
		res, err := s.cs.ListTools(opCtx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, s.wire.fail(ctx, opCtx, mcpDefaultTimeout, "listing the tools of MCP connection "+conn, err, false)
		}
		for _, t := range res.Tools {
			if t == nil {
				continue
			}
			l := mcpListed{Connection: conn, Tool: t.Name, Description: t.Description}
			if len(l.Description) > MaxMCPToolDescription {
				l.Description = strings.ToValidUTF8(l.Description[:MaxMCPToolDescription], "") + "…"
			}
			schema, err := json.Marshal(t.InputSchema)
			if err != nil || string(schema) == "null" {
				schema = json.RawMessage(`{"type":"object"}`)
			}
			l.Schema = schema
			out[t.Name] = l
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	return out, nil
}

// mcpTool is the MCP tool ref of an AI step as its server lists it:
// from listed (an earlier attempt's journal) when there, else from the
// server's tools/list, read once per connection in the step execution.
func (l *aiLoop) mcpTool(ctx context.Context, ref automation.MCPToolRef, listed []mcpListed) (mcpListed, *stepError) {
	for _, t := range listed {
		if t.Connection == ref.Connection && t.Tool == ref.Tool {
			return t, nil
		}
	}
	if l.mcpLists == nil {
		l.mcpLists = map[string]map[string]mcpListed{}
	}
	tools, ok := l.mcpLists[ref.Connection]
	if !ok {
		sess, se := l.session(ctx, ref.Connection)
		if se != nil {
			return mcpListed{}, se
		}
		if tools, se = sess.listTools(ctx, ref.Connection); se != nil {
			return mcpListed{}, se
		}
		l.mcpLists[ref.Connection] = tools
	}
	t, ok := tools[ref.Tool]
	if !ok {
		return mcpListed{}, &stepError{msg: fmt.Sprintf("the MCP server of connection %q lists no tool %q", ref.Connection, ref.Tool)}
	}
	if len(t.Schema) > MaxMCPToolSchemaBytes {
		return mcpListed{}, &stepError{msg: fmt.Sprintf("MCP tool %q: its input schema is %d bytes; at most %d are sent to a model", ref.Tool, len(t.Schema), MaxMCPToolSchemaBytes)}
	}
	return t, nil
}

// session is the step's open session with the MCP connection of that
// name, opened on first use.
func (l *aiLoop) session(ctx context.Context, name string) (*mcpSession, *stepError) {
	if s, ok := l.sessions[name]; ok {
		return s, nil
	}
	opCtx, cancel := context.WithTimeout(ctx, mcpDefaultTimeout)
	defer cancel()
	s, se := l.x.mcpOpen(ctx, opCtx, mcpDefaultTimeout, name)
	if se != nil {
		return nil, se
	}
	if l.sessions == nil {
		l.sessions = map[string]*mcpSession{}
	}
	l.sessions[name] = s
	l.secrets = append(l.secrets, s.secrets()...)
	return s, nil
}

func (l *aiLoop) closeSessions() {
	for _, s := range l.sessions {
		s.close()
	}
}

// callMCP runs an MCP tool the model called. What the server answers,
// an error included, goes back to the model; a session that cannot be
// opened fails the step (retryable when nothing was called), and the run
// ending during the call ends the attempt without a result, so that the
// next one goes on from the journal.
func (l *aiLoop) callMCP(ctx context.Context, t mcpListed, call aiCall, e aiEntry) (aiEntry, *stepError) {
	args := map[string]any{}
	if len(call.Arguments) > 0 && string(call.Arguments) != "null" {
		if err := json.Unmarshal(call.Arguments, &args); err != nil {
			e.Error = "the arguments are not a JSON object"
			return e, nil
		}
	}
	sess, se := l.session(ctx, t.Connection)
	if se != nil {
		return e, se
	}
	opCtx, cancel := context.WithTimeout(ctx, mcpDefaultTimeout)
	defer cancel()
	res, se := sess.callTool(ctx, opCtx, mcpDefaultTimeout, t.Tool, args, l.x.mcpCallKey(l.s, e.Index))
	switch {
	case se != nil && ctx.Err() != nil:
		return e, se
	case se != nil:
		e.Error = se.msg
	case res.IsError:
		e.Error = mask(mcpText(res), sess.secrets())
	default:
		out, err := mcpOutput(res)
		if err != nil {
			e.Error = "its structuredContent could not be read: " + err.Error()
			return e, nil
		}
		e.Result = l.toolResult(maskValue(out, sess.secrets()))
	}
	return e, nil
}
