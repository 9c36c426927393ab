package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"flowservice/pkg/automation"
	"flowservice/pkg/fairshare"
)

// fakeDomain serves tools of two projects; its calls answer what run
// returns, and block on hold (when set) until the test releases them.
type fakeDomain struct {
	tools map[string][]automation.ToolFlow
	run   func(c automation.ToolCall) automation.Run
	hold  chan struct{}
	held  chan struct{} // one send per call that is holding
	mu    sync.Mutex
	calls []automation.ToolCall
}

func (d *fakeDomain) MCPToolFlows(_ context.Context, project string) ([]automation.ToolFlow, []string, error) {
	return d.tools[project], nil, nil
}

func (d *fakeDomain) CallTool(_ context.Context, c automation.ToolCall) (automation.Run, error) {
	d.mu.Lock()
	d.calls = append(d.calls, c)
	d.mu.Unlock()
	if d.hold != nil && c.Project == "prj_a" {
		d.held <- struct{}{}
		<-d.hold
	}
	return d.run(c), nil
}

func tool(id, name string) automation.ToolFlow {
	return automation.ToolFlow{ID: id, Name: name, Tool: name, Description: "the " + name + " flow",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`), Active: true}
}

// serve runs s on 127.0.0.1 with the principal the X-Test-Project and
// X-Test-Role headers name, as httpapi would after authentication.
func serve(t *testing.T, s *Server) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		p := automation.Principal{Project: automation.Project{ID: r.Header.Get("X-Test-Project")},
			Role: automation.Role(r.Header.Get("X-Test-Role"))}
		s.ServeMCP(w, r, body, p)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

type headers struct {
	h    map[string]string
	base http.RoundTripper
}

func (x headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range x.h {
		r.Header.Set(k, v)
	}
	return x.base.RoundTrip(r)
}

func connect(t *testing.T, url, project, role string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	hc := &http.Client{Transport: headers{map[string]string{"X-Test-Project": project, "X-Test-Role": role}, http.DefaultTransport}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestToolsPageAndResults: tools/list answers PageSize tools a page (the
// SDK client follows the cursor to all of them); a call's result is the
// run's answer (an object as is, another value under "result"), a failed
// run's error and ID, or the ID of a run still going.
func TestToolsPageAndResults(t *testing.T) {
	d := &fakeDomain{tools: map[string][]automation.ToolFlow{
		"prj_a": {tool("flw_1", "one"), tool("flw_2", "two"), tool("flw_3", "three"), tool("flw_4", "four"), tool("flw_5", "five")},
	}}
	d.run = func(c automation.ToolCall) automation.Run {
		r := automation.Run{ID: "run_" + c.FlowID, FlowID: c.FlowID}
		switch c.FlowID {
		case "flw_1":
			r.Status, r.Response = automation.RunSucceeded, &automation.RunResponse{Body: json.RawMessage(`{"got":` + string(c.Args) + `}`)}
		case "flw_2":
			r.Status, r.Response = automation.RunSucceeded, &automation.RunResponse{Body: json.RawMessage(`"plain words"`)}
		case "flw_3":
			r.Status, r.Error = automation.RunFailed, "step order: HTTP 404"
		default:
			r.Status = automation.RunRunning
		}
		return r
	}
	s := New(d, Options{PageSize: 2})
	cs := connect(t, serve(t, s), "prj_a", "operator")

	page, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Tools) != 2 || page.NextCursor == "" {
		t.Fatalf("first page: %d tools, cursor %q; want 2 and a cursor", len(page.Tools), page.NextCursor)
	}
	var names []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tl.Name)
		if tl.Description != "the "+tl.Name+" flow" {
			t.Errorf("%s: description %q", tl.Name, tl.Description)
		}
	}
	if len(names) != 5 {
		t.Errorf("all pages: %v, want the 5 tools", names)
	}

	call := func(name string, args any) *mcp.CallToolResult {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("call %s: %v", name, err)
		}
		return res
	}
	res := call("one", map[string]any{"n": 3})
	if got, _ := json.Marshal(res.StructuredContent); res.IsError || string(got) != `{"got":{"n":3}}` || text(res) != `{"got":{"n":3}}` {
		t.Errorf("one: isError %v, structured %s, text %q", res.IsError, got, text(res))
	}
	res = call("two", nil)
	if got, _ := json.Marshal(res.StructuredContent); res.IsError || string(got) != `{"result":"plain words"}` || text(res) != "plain words" {
		t.Errorf("two: isError %v, structured %s, text %q", res.IsError, got, text(res))
	}
	res = call("three", nil)
	if !res.IsError || !strings.Contains(text(res), "run_flw_3") || !strings.Contains(text(res), "HTTP 404") {
		t.Errorf("three (failed run): isError %v, text %q; want the run's ID and error", res.IsError, text(res))
	}
	res = call("four", nil)
	if !res.IsError || !strings.Contains(text(res), "run_flw_4 is still running after "+DefaultWait.String()) {
		t.Errorf("four (still running): isError %v, text %q; want the run's ID and the wait", res.IsError, text(res))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.calls[0]; c.Project != "prj_a" || c.FlowID != "flw_1" || c.Wait != DefaultWait || string(c.Args) != `{"n":3}` {
		t.Errorf("first call to the domain: %+v", c)
	}
}

// TestViewerCannotCall: a viewer lists the tools but its call is a tool
// error naming its role, and no run is asked for.
func TestViewerCannotCall(t *testing.T) {
	d := &fakeDomain{tools: map[string][]automation.ToolFlow{"prj_a": {tool("flw_1", "one")}},
		run: func(automation.ToolCall) automation.Run { return automation.Run{Status: automation.RunSucceeded} }}
	cs := connect(t, serve(t, New(d, Options{})), "prj_a", "viewer")
	if page, err := cs.ListTools(context.Background(), nil); err != nil || len(page.Tools) != 1 {
		t.Fatalf("viewer's tools/list: %v %v", page, err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "one", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(text(res), "viewer") || !strings.Contains(text(res), "operator") {
		t.Errorf("viewer's call: isError %v, %q; want a refusal naming the role and who may", res.IsError, text(res))
	}
	if len(d.calls) != 0 {
		t.Errorf("the domain was asked for %d runs", len(d.calls))
	}
}

// TestCallsPerProjectBound: a project holding its share of awaited calls
// is refused the next at once (TOO_MANY_CALLS), while another project's
// call goes through; once a call ends, the project may call again.
func TestCallsPerProjectBound(t *testing.T) {
	d := &fakeDomain{
		tools: map[string][]automation.ToolFlow{"prj_a": {tool("flw_1", "one")}, "prj_b": {tool("flw_9", "one")}},
		run:   func(automation.ToolCall) automation.Run { return automation.Run{Status: automation.RunSucceeded} },
		hold:  make(chan struct{}), held: make(chan struct{}, 1),
	}
	url := serve(t, New(d, Options{Slots: fairshare.New(2, 1)}))
	a, b := connect(t, url, "prj_a", "operator"), connect(t, url, "prj_a", "operator")
	other := connect(t, url, "prj_b", "operator")
	first := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := a.CallTool(context.Background(), &mcp.CallToolParams{Name: "one", Arguments: map[string]any{}})
		if err != nil {
			t.Error(err)
		}
		first <- res
	}()
	<-d.held // the first call holds prj_a's one slot
	res, err := b.CallTool(context.Background(), &mcp.CallToolParams{Name: "one", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.HasPrefix(text(res), "TOO_MANY_CALLS") {
		t.Errorf("second call of prj_a: isError %v, %q; want TOO_MANY_CALLS", res.IsError, text(res))
	}
	if res, err := other.CallTool(context.Background(), &mcp.CallToolParams{Name: "one", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Errorf("prj_b's call while prj_a is at its share: %v %v", res, err)
	}
	close(d.hold)
	if res := <-first; res == nil || res.IsError {
		t.Errorf("first call: %+v", res)
	}
	d.hold = nil
	if res, err := b.CallTool(context.Background(), &mcp.CallToolParams{Name: "one", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Errorf("prj_a's call after the first ended: %v %v", res, err)
	}
}
