package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"flowservice/internal/mcptest"
)

// scriptedModel is an OpenAI-compatible chat completions server on
// 127.0.0.1 that answers turn n (the assistant messages a request
// carries) with answer(n), and counts each turn's requests.
func scriptedModel(t *testing.T, answer func(turn int) map[string]any) (*httptest.Server, func() map[int]int) {
	var mu sync.Mutex
	turns := map[int]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []struct{ Role string }
		}
		json.Unmarshal(b, &req)
		turn := 0
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				turn++
			}
		}
		mu.Lock()
		turns[turn]++
		mu.Unlock()
		msg := answer(turn)
		finish := "stop"
		if msg["tool_calls"] != nil {
			finish = "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "cmpl", "object": "chat.completion", "created": 1, "model": "gpt-test",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
	}))
	t.Cleanup(srv.Close)
	return srv, func() map[int]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[int]int{}
		for k, v := range turns {
			out[k] = v
		}
		return out
	}
}

// TestMCPOnFlowd: through a real flowd, an MCP connection (its headers a
// credential the API never shows), an MCP step calling the SDK's own
// server on 127.0.0.1, and an AI step whose scripted model calls the same
// tool as an MCP tool: the tool's side effect happens exactly once per
// call, the headers reach the server, and no run record shows them. The
// save-time rules refuse a wrong connection type, a bad tool name and
// arguments that are not an object; export and import keep the step's
// connection by name.
func TestMCPOnFlowd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	const token = "tok-flowd-mcp-5566778899"
	mcpSrv := mcptest.Start(t)
	model, turns := scriptedModel(t, func(turn int) map[string]any {
		if turn == 0 {
			return map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
				"id": "call_1", "type": "function",
				"function": map[string]any{"name": "create_issue", "arguments": `{"title":"Filed by the model"}`}}}}
		}
		return map[string]any{"role": "assistant", "content": "Filed it."}
	})
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)

	// The connection: a bad value is a 400 naming the field, never the
	// value. The app "github" is in the catalog, whose allowedHosts
	// (api.github.com) an MCP connection does not take: it sends to its
	// own URL.
	for _, bad := range []struct{ value, want string }{
		{`{"url": "ftp://mcp.example.com/mcp"}`, "value.url"},
		{`{"headers": {"Authorization": "Bearer x"}}`, "value.url is required"},
		{`{"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer\r\nX-Evil: 1"}}`, "value.headers.Authorization contains a control character"},
		{`{"url": "https://mcp.example.com/mcp", "headers": {"Mcp-Session-Id": "s"}}`, "sets this header itself"},
		{`{"url": "https://mcp.example.com/mcp", "headers": {"Authorization": 7}}`, "header values are strings"},
	} {
		var e struct{ Error struct{ Message string } }
		api(t, p, key, "POST", "/api/v1/connections", `{"name": "bad", "app": "tracker", "type": "MCP", "value": `+bad.value+`}`, 400, &e)
		if !strings.Contains(e.Error.Message, bad.want) || strings.Contains(e.Error.Message, "Bearer") {
			t.Errorf("%s: message %q, want %q", bad.value, e.Error.Message, bad.want)
		}
	}
	var conn map[string]any
	api(t, p, key, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "tracker", "app": "github", "type": "MCP",
		"value": {"url": %q, "headers": {"Authorization": "Bearer %s"}}}`, mcpSrv.Endpoint, token), 201, &conn)
	var shown json.RawMessage
	api(t, p, key, "GET", "/api/v1/connections/"+conn["id"].(string), "", 200, &shown)
	if strings.Contains(string(shown), token) || conn["type"] != "MCP" {
		t.Fatalf("the connection shows its credential: %s", shown)
	}
	api(t, p, key, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "llm", "app": "openai", "type": "OPENAI",
		"value": {"apiKey": "sk-test-123456", "baseUrl": %q}}`, model.URL+"/v1"), 201, nil)

	// Save-time rules.
	for _, bad := range []struct{ step, want string }{
		{`{"name": "x", "type": "MCP", "connection": "llm", "tool": "create_issue"}`, `connection "llm" is a OPENAI connection; a MCP step needs MCP`},
		{`{"name": "x", "type": "MCP", "connection": "tracker", "tool": "create issue"}`, "is not an MCP tool name"},
		{`{"name": "x", "type": "MCP", "connection": "tracker"}`, "tool is required"},
		{`{"name": "x", "type": "MCP", "connection": "tracker", "tool": "t", "arguments": [1]}`, "arguments must be a JSON object"},
		{`{"name": "x", "type": "MCP", "connection": "tracker", "tool": "t", "timeout": "10m"}`, "at most 2m0s"},
		{`{"name": "x", "type": "AI", "connection": "llm", "model": "m", "prompt": "p", "tools": [{"mcp": {"connection": "llm", "tool": "t"}}]}`,
			`tools[0].mcp.connection "llm" is a OPENAI connection; an MCP tool needs MCP`},
	} {
		var e struct{ Error struct{ Message string } }
		api(t, p, key, "POST", "/api/v1/flows", `{"name": "bad", "engine": "FLOW_BUILDER", "steps": [`+bad.step+`]}`, 400, &e)
		if !strings.Contains(e.Error.Message, bad.want) {
			t.Errorf("%s: message %q, want %q", bad.step, e.Error.Message, bad.want)
		}
	}

	// The MCP step.
	var f struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "file issue", "engine": "FLOW_BUILDER", "steps": [
		{"name": "issue", "type": "MCP", "connection": "tracker", "tool": "create_issue",
		 "arguments": {"title": "{{ trigger.body.title }}"}, "timeout": "30s"},
		{"name": "who", "type": "MCP", "connection": "tracker", "tool": "whoami"}]}`, 201, &f)
	api(t, p, key, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
	_, r := postHook(t, p, key, f.ID, "/api/v1/webhooks/"+f.ID, `{"title": "Printer on fire"}`, nil)
	if r.Status != "SUCCEEDED" {
		t.Fatalf("run %s %q", r.Status, r.Error)
	}
	if string(r.Steps[0].Output) != `{"id":1,"title":"Printer on fire"}` {
		t.Errorf("MCP step output %s", r.Steps[0].Output)
	}
	if !strings.Contains(string(r.Steps[1].Output), "you are ********") {
		t.Errorf("whoami output %s: want the echoed token masked", r.Steps[1].Output)
	}
	var record json.RawMessage
	api(t, p, key, "GET", "/api/v1/flows/"+f.ID+"/runs/"+r.ID, "", 200, &record)
	if strings.Contains(string(record), token) {
		t.Errorf("the run record shows the token: %s", record)
	}
	if auth := mcpSrv.HeaderValues("Authorization"); len(auth) == 0 || auth[0] != "Bearer "+token {
		t.Errorf("the server saw Authorization %v", auth)
	}

	// The AI step with the MCP tool: the model calls it once.
	var ai struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "triage", "engine": "FLOW_BUILDER", "steps": [
		{"name": "agent", "type": "AI", "connection": "llm", "model": "gpt-test", "prompt": "{{ trigger.body.text }}",
		 "tools": [{"mcp": {"connection": "tracker", "tool": "create_issue"}}]}]}`, 201, &ai)
	api(t, p, key, "POST", "/api/v1/flows/"+ai.ID+"/enable", "", 200, nil)
	_, r = postHook(t, p, key, ai.ID, "/api/v1/webhooks/"+ai.ID, `{"text": "the printer is on fire"}`, nil)
	if r.Status != "SUCCEEDED" {
		t.Fatalf("AI run %s %q", r.Status, r.Error)
	}
	var out struct {
		Text      string
		ToolCalls []struct {
			Tool   string
			Result map[string]any
		}
	}
	json.Unmarshal(r.Steps[0].Output, &out)
	if out.Text != "Filed it." || len(out.ToolCalls) != 1 || out.ToolCalls[0].Result["title"] != "Filed by the model" || out.ToolCalls[0].Result["id"] != float64(2) {
		t.Errorf("AI output %s", r.Steps[0].Output)
	}
	if n := mcpSrv.Calls("create_issue"); n != 2 {
		t.Errorf("create_issue ran %d times, want 2 (the MCP step's and the model's)", n)
	}
	if got := fmt.Sprint(turns()); got != "map[0:1 1:1]" {
		t.Errorf("model requests per turn %s", got)
	}
	api(t, p, key, "GET", "/api/v1/flows/"+ai.ID+"/runs/"+r.ID, "", 200, &record)
	if strings.Contains(string(record), token) {
		t.Errorf("the AI run record shows the token: %s", record)
	}

	// Export and import: the step keeps its connection by name.
	var doc json.RawMessage
	api(t, p, key, "GET", "/api/v1/flows/"+f.ID+"/export", "", 200, &doc)
	if !strings.Contains(string(doc), `"connection":"tracker"`) || !strings.Contains(string(doc), `"tool":"create_issue"`) {
		t.Fatalf("export %s", doc)
	}
	var imported struct {
		ID    string
		Steps []struct{ Connection, Tool string }
	}
	api(t, p, key, "POST", "/api/v1/flows/import", strings.Replace(string(doc), `"name":"file issue"`, `"name":"file issue copy"`, 1), 201, &imported)
	if len(imported.Steps) != 2 || imported.Steps[0].Connection != "tracker" || imported.Steps[0].Tool != "create_issue" {
		t.Errorf("imported %+v", imported)
	}
}
