package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"flowservice/internal/testwait"
)

// bearer adds an API key (and any other header) to every request of an
// MCP client, as a client configured with an Authorization header does.
type bearer struct {
	headers map[string]string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range b.headers {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect connects the official Go SDK's client to flowd's /mcp with
// key (and extra headers), over the Streamable HTTP transport unchanged.
func mcpConnect(t *testing.T, p *proc, key string, extra ...string) (*mcp.ClientSession, error) {
	t.Helper()
	h := map[string]string{"Authorization": "Bearer " + key}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "flowd-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: p.base + "/mcp", HTTPClient: &http.Client{Transport: bearer{h}}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	var structured map[string]any
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(raw, &structured)
	}
	return res, structured
}

// TestMCPServer connects the official Go SDK's MCP client to flowd's /mcp
// with API keys: tools/list lists exactly the enabled flows that have a
// trigger.inputSchema; tools/call of examples/mcp-lookup-order.json answers
// the RESPOND body as structuredContent (the run's trigger.caller is
// {"mcp": true}); a run that fails is an isError result with its error and
// run ID; arguments the schema refuses and a chain too deep are tool
// errors; an operator may call, a viewer only list; a wrong key is a 401,
// another method a 405 and a body over the bound a 413, each a JSON error.
func TestMCPServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/orders/ord_1" {
			w.Write([]byte(`{"status": "paid", "total": 42}`))
			return
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error": "no such order"}`))
	}))
	defer shop.Close()
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	admin := initialKey(t, dir)

	lookup := createEnabled(t, p, admin, example(t, "mcp-lookup-order", shop.URL))
	createEnabled(t, p, admin, `{"name": "Echo: Args!", "engine": "FLOW_BUILDER", "description": "Answers what it was given.",
		"trigger": {"type": "WEBHOOK", "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}}},
		"steps": [{"name": "answer", "type": "RESPOND", "body": {"args": "{{ trigger.body }}", "caller": "{{ trigger.caller }}", "method": "{{ trigger.method }}"}}]}`)
	createEnabled(t, p, admin, `{"name": "No schema", "engine": "FLOW_BUILDER", "trigger": {"type": "WEBHOOK"},
		"steps": [{"name": "answer", "type": "RESPOND", "body": {"ok": true}}]}`)
	api(t, p, admin, "POST", "/api/v1/flows", `{"name": "Disabled tool", "engine": "FLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "inputSchema": {"type": "object"}},
		"steps": [{"name": "answer", "type": "RESPOND", "body": {"ok": true}}]}`, 201, nil)

	cs, err := mcpConnect(t, p, admin)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if got := cs.InitializeResult(); got == nil || got.Capabilities == nil || got.Capabilities.Tools == nil {
		t.Errorf("initialize: %+v, want the tools capability", got)
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
		if tl.Name == "lookup_order" {
			schema, _ := json.Marshal(tl.InputSchema)
			if !strings.Contains(string(schema), `"required":["orderId"]`) || !strings.Contains(tl.Description, "Looks an order up") {
				t.Errorf("lookup_order: schema %s, description %q", schema, tl.Description)
			}
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"echo_args", "lookup_order"}) {
		t.Errorf("tools/list = %v, want exactly the enabled flows with an inputSchema: [echo_args lookup_order]", names)
	}

	res, got := mcpCall(t, cs, "lookup_order", map[string]any{"orderId": "ord_1"})
	if res.IsError || got["orderId"] != "ord_1" || got["status"] != "paid" || got["total"] != float64(42) || got["viaMCP"] != true {
		t.Errorf("lookup_order ord_1: isError %v, structuredContent %v, text %q", res.IsError, got, mcpText(res))
	}
	if !strings.Contains(mcpText(res), `"status":"paid"`) {
		t.Errorf("lookup_order ord_1: text content %q, want the answer's JSON", mcpText(res))
	}
	res, got = mcpCall(t, cs, "echo_args", map[string]any{"x": 7})
	if b, _ := json.Marshal(got); res.IsError || string(b) != `{"args":{"x":7},"caller":{"mcp":true},"method":"MCP"}` {
		t.Errorf("echo_args: isError %v, structuredContent %s", res.IsError, b)
	}

	res, got = mcpCall(t, cs, "lookup_order", map[string]any{"orderId": "ord_404"})
	runID, _ := got["runId"].(string)
	if !res.IsError || !strings.HasPrefix(runID, "run_") || !strings.Contains(mcpText(res), runID) || !strings.Contains(mcpText(res), "FAILED") {
		t.Fatalf("lookup_order ord_404: isError %v, structured %v, text %q; want a tool error with the run's ID and error", res.IsError, got, mcpText(res))
	}
	var failed struct {
		Status  string
		Error   string
		Trigger struct {
			Method string
			Caller map[string]any
			Body   map[string]any
		}
	}
	api(t, p, admin, "GET", "/api/v1/flows/"+lookup+"/runs/"+runID, "", 200, &failed)
	if failed.Status != "FAILED" || failed.Trigger.Method != "MCP" || failed.Trigger.Caller["mcp"] != true || failed.Trigger.Body["orderId"] != "ord_404" ||
		!strings.Contains(mcpText(res), failed.Error) {
		t.Errorf("the failed run: %+v; the tool error said %q", failed, mcpText(res))
	}

	if res, _ := mcpCall(t, cs, "lookup_order", map[string]any{"order": "ord_1"}); !res.IsError || !strings.Contains(mcpText(res), "INVALID_ARGUMENTS") {
		t.Errorf("arguments without orderId: isError %v, %q; want INVALID_ARGUMENTS", res.IsError, mcpText(res))
	}
	deep, err := mcpConnect(t, p, admin, "X-Flow-Depth", "99")
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := mcpCall(t, deep, "echo_args", map[string]any{}); !res.IsError || !strings.Contains(mcpText(res), "LOOP_DETECTED") {
		t.Errorf("a call 99 flows deep: isError %v, %q; want LOOP_DETECTED", res.IsError, mcpText(res))
	}

	// Roles: an operator calls; a viewer lists but may not call.
	keyOf := func(role string) string {
		out, err := flowctl(t, dir, "keys", "create", "--project", "default", "--role", role)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	op, err := mcpConnect(t, p, keyOf("operator"))
	if err != nil {
		t.Fatal(err)
	}
	if res, got := mcpCall(t, op, "echo_args", map[string]any{"x": 1}); res.IsError || got["method"] != "MCP" {
		t.Errorf("operator's call: isError %v, %q", res.IsError, mcpText(res))
	}
	viewer, err := mcpConnect(t, p, keyOf("viewer"))
	if err != nil {
		t.Fatal(err)
	}
	if l, err := viewer.ListTools(context.Background(), nil); err != nil || len(l.Tools) != 2 {
		t.Errorf("viewer's tools/list: %v %v", l, err)
	}
	before := len(runsOf(t, p, admin, lookup))
	if res, _ := mcpCall(t, viewer, "lookup_order", map[string]any{"orderId": "ord_1"}); !res.IsError ||
		!strings.Contains(mcpText(res), "viewer") || !strings.Contains(mcpText(res), "FORBIDDEN") {
		t.Errorf("viewer's call: isError %v, %q; want FORBIDDEN naming the role", res.IsError, mcpText(res))
	}
	if after := len(runsOf(t, p, admin, lookup)); after != before {
		t.Errorf("the viewer's call started a run: %d runs, then %d", before, after)
	}

	// A wrong key: the client cannot connect, and the answer is the API's 401.
	if _, err := mcpConnect(t, p, "fk_wrong"); err == nil {
		t.Error("a wrong key connected")
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	rawMCP := func(method, key, body string) (int, string) {
		req, _ := http.NewRequest(method, p.base+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := rawMCP("POST", "fk_wrong", init); code != 401 || !strings.Contains(body, `"code":"UNAUTHORIZED"`) {
		t.Errorf("wrong key: %d %s, want 401 UNAUTHORIZED", code, body)
	}
	if code, body := rawMCP("POST", admin, init); code != 200 || !strings.Contains(body, `"protocolVersion":"2025-06-18"`) {
		t.Errorf("initialize by hand: %d %s", code, body)
	}
	if code, body := rawMCP("GET", admin, ""); code != 405 || !strings.Contains(body, "METHOD_NOT_ALLOWED") {
		t.Errorf("GET /mcp: %d %s, want 405 (stateless: no stream to open)", code, body)
	}
	big := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo_args","arguments":{"pad":%q}}}`, strings.Repeat("x", 1<<20))
	if code, body := rawMCP("POST", admin, big); code != 413 || !strings.Contains(body, "BODY_TOO_LARGE") || !strings.Contains(body, "1048576") {
		t.Errorf("a body over 1 MiB: %d %.200s, want 413 BODY_TOO_LARGE naming the bound", code, body)
	}
}

// TestMCPCallStillRunning: a tools/call whose run outlasts the wait
// (FLOWD_MCP_WAIT) is a tool error naming the run, which goes on and
// finishes.
func TestMCPCallStillRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status": "shipped", "total": 5}`))
	}))
	defer slow.Close()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_MCP_WAIT=1s")
	key := initialKey(t, dir)
	flow := createEnabled(t, p, key, example(t, "mcp-lookup-order", slow.URL))
	cs, err := mcpConnect(t, p, key)
	if err != nil {
		t.Fatal(err)
	}
	// The shop answers only once released: the wait passes first, whatever
	// the machine's load.
	res, got := mcpCall(t, cs, "lookup_order", map[string]any{"orderId": "ord_7"})
	runID, _ := got["runId"].(string)
	if !res.IsError || runID == "" || !strings.Contains(mcpText(res), runID+" is still running after 1s") {
		t.Fatalf("slow call: isError %v, %v, %q; want the still-running error naming the run", res.IsError, got, mcpText(res))
	}
	close(release)
	released = true
	var r struct{ Status string }
	testwait.For(t, testwait.Hang, "run "+runID+" to finish", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+flow+"/runs/"+runID, "", 200, &r)
		return r.Status != "RUNNING"
	})
	if r.Status != "SUCCEEDED" {
		t.Errorf("the run went on to %s, want SUCCEEDED", r.Status)
	}
}
