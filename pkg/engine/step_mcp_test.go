package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"flowservice/internal/mcptest"
	"flowservice/pkg/automation"
)

const mcpToken = "tok-mcp-secret-7788990011"

// addMCP adds an MCP connection whose headers carry mcpToken, as
// automation's mcpCredential reads it back.
func (c aiCreds) addMCP(id, name, url string, hosts ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns[id] = automation.Connection{ID: id, Project: "p1", Name: name, Type: automation.ConnectionMCP,
		Status: automation.ConnectionActive, AllowedHosts: hosts}
	c.values[id] = automation.ConnectionValue{
		MCP: &automation.MCPConfig{URL: url, Headers: map[string]automation.Secret{
			"Authorization": automation.Secret("Bearer " + mcpToken), "X-Team": "team-ops-42"}},
		Masks: []automation.Secret{automation.Secret("Bearer " + mcpToken), automation.Secret(mcpToken), "team-ops-42"},
	}
}

func mcpStepOf(name, tool, args string) automation.Step {
	s := automation.Step{Name: name, Type: automation.StepMCP, Connection: "tracker", Tool: tool}
	if args != "" {
		s.Arguments = json.RawMessage(args)
	}
	return s
}

// TestMCPStep: against the SDK's own server on 127.0.0.1, an MCP step's
// output is the tool's structuredContent (its arguments templated), else
// its text items joined; an isError result fails the step with its text,
// for good; the connection's headers reach the server on every request,
// and neither they nor the token a tool echoes back show anywhere in the
// run's record.
func TestMCPStep(t *testing.T) {
	srv := mcptest.Start(t)
	creds := aiCreds{newCredentials()}
	creds.addMCP("con_mcp", "tracker", srv.Endpoint)
	e := newAIEngine(creds, nil, nil)

	f := flowOf(
		mcpStepOf("issue", "create_issue", `{"title": "{{ trigger.body.title }}"}`),
		mcpStepOf("hello", "greet", `{"name": "Ann"}`),
		mcpStepOf("who", "whoami", ""),
		automation.Step{Name: "after", Type: automation.StepSet, Values: raw(`{"id": "{{ steps.issue.id }}", "greeting": "{{ steps.hello }}"}`)},
	)
	r := e.Execute(context.Background(), f, runOf(`{"title":"Printer on fire"}`)).Run
	if r.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	var issue map[string]any
	if err := json.Unmarshal(r.Steps[0].Output, &issue); err != nil || issue["title"] != "Printer on fire" || issue["id"] != float64(1) {
		t.Errorf("structuredContent output %s (%v)", r.Steps[0].Output, err)
	}
	if string(r.Steps[1].Output) != `"Hello, Ann!\nBye."` {
		t.Errorf("text output %s", r.Steps[1].Output)
	}
	if out := stepOutput(t, r, 3); fmt.Sprint(out["id"]) != "1" || out["greeting"] != "Hello, Ann!\nBye." {
		t.Errorf("later step sees %v", out)
	}
	if !strings.Contains(string(r.Steps[2].Output), "you are ********") {
		t.Errorf("whoami output %s: want the echoed token masked", r.Steps[2].Output)
	}
	if srv.Calls("create_issue") != 1 || srv.Calls("greet") != 1 {
		t.Errorf("calls: create_issue %d, greet %d", srv.Calls("create_issue"), srv.Calls("greet"))
	}
	auths := srv.HeaderValues("Authorization")
	teams := srv.HeaderValues("X-Team")
	if len(auths) < 3 {
		t.Fatalf("the server saw %d requests", len(auths))
	}
	for i := range auths {
		if auths[i] != "Bearer "+mcpToken || teams[i] != "team-ops-42" {
			t.Fatalf("request %d carried Authorization %q, X-Team %q", i, auths[i], teams[i])
		}
	}
	if keys := srv.CallKeys(); len(keys) != 3 || keys[0] != automation.IdempotencyKeyFor(r.ID, "issue") {
		t.Errorf("Idempotency-Key of the calls %q", keys)
	}
	if ua := srv.HeaderValues("User-Agent"); !strings.HasPrefix(ua[0], "flowd/") {
		t.Errorf("User-Agent %q", ua[0])
	}
	if got := srv.HeaderValues(automation.FlowRunHeader); got[0] != r.ID {
		t.Errorf("%s %q, want the run %s", automation.FlowRunHeader, got[0], r.ID)
	}
	record, _ := json.Marshal(r)
	for _, secret := range []string{mcpToken, "team-ops-42"} {
		if strings.Contains(string(record), secret) {
			t.Errorf("the run record shows %q: %s", secret, record)
		}
	}

	// isError: the step fails with the tool's text, and is not retried.
	res := e.Execute(context.Background(), flowOf(mcpStepOf("close", "fail", `{}`)), runOf(`{}`))
	if res.Run.Status != automation.RunFailed || res.Retryable || !strings.Contains(res.Run.Error, "tool fail failed: the tracker is read-only") {
		t.Errorf("isError: run %s %q retryable %v", res.Run.Status, res.Run.Error, res.Retryable)
	}
	// A tool the server does not have: the server's JSON-RPC error.
	res = e.Execute(context.Background(), flowOf(mcpStepOf("x", "no_such_tool", "")), runOf(`{}`))
	if res.Run.Status != automation.RunFailed || res.Retryable || !strings.Contains(res.Run.Error, "no_such_tool") {
		t.Errorf("unknown tool: run %s %q retryable %v", res.Run.Status, res.Run.Error, res.Retryable)
	}
	// A connection of another type.
	creds.add("con_key", "k-123456789", "", nil)
	creds.mu.Lock()
	c := creds.conns["con_key"]
	c.Name = "plain"
	creds.conns["con_key"] = c
	creds.mu.Unlock()
	st := mcpStepOf("x", "greet", "")
	st.Connection = "plain"
	res = e.Execute(context.Background(), flowOf(st), runOf(`{}`))
	if res.Run.Status != automation.RunFailed || !strings.Contains(res.Run.Error, "is a API_KEY connection; MCP calls need an MCP connection") {
		t.Errorf("wrong type: run %s %q", res.Run.Status, res.Run.Error)
	}
}

// TestMCPStepTimeout: a tool that does not answer is cut at the step's
// timeout; the step fails naming it, without waiting for the tool.
func TestMCPStepTimeout(t *testing.T) {
	srv := mcptest.Start(t)
	creds := aiCreds{newCredentials()}
	creds.addMCP("con_mcp", "tracker", srv.Endpoint)
	e := newAIEngine(creds, nil, nil)
	st := mcpStepOf("wait", "slow", "")
	st.Timeout = "3s"
	done := make(chan Result, 1)
	go func() { done <- e.Execute(context.Background(), flowOf(st), runOf(`{}`)) }()
	var res Result
	select {
	case res = <-done:
	case <-time.After(2 * time.Minute): // far past the 3 s bound: the tool never answers
		t.Fatal("the step did not end at its timeout")
	}
	if res.Run.Status != automation.RunFailed || !strings.Contains(res.Run.Error, "timed out after 3s") {
		t.Fatalf("run %s %q", res.Run.Status, res.Run.Error)
	}
	if srv.Calls("slow") == 1 && res.Retryable {
		t.Errorf("a call the server began is retried: %q", res.Run.Error)
	}
}

// TestMCPAllowedHosts: a connection fenced to other hosts sends nothing.
func TestMCPAllowedHosts(t *testing.T) {
	srv := mcptest.Start(t)
	creds := aiCreds{newCredentials()}
	creds.addMCP("con_mcp", "tracker", srv.Endpoint, "mcp.example.com")
	r := newAIEngine(creds, nil, nil).Execute(context.Background(), flowOf(mcpStepOf("x", "greet", "")), runOf(`{}`)).Run
	if r.Status != automation.RunFailed || !strings.Contains(r.Error, "may only be sent to mcp.example.com") || len(srv.HeaderValues("Authorization")) != 0 {
		t.Fatalf("run %s %q, requests %d", r.Status, r.Error, len(srv.HeaderValues("Authorization")))
	}
	// And the SSRF guard: without AllowPrivateNetworks, 127.0.0.1 is refused at dial.
	creds.addMCP("con_mcp", "tracker", srv.Endpoint)
	e := New(Config{Env: automation.ExecEnv{Credentials: creds, ConnectionNames: creds}})
	r = e.Execute(context.Background(), flowOf(mcpStepOf("x", "greet", "")), runOf(`{}`)).Run
	if r.Status != automation.RunFailed || len(srv.HeaderValues("Authorization")) != 0 {
		t.Fatalf("guarded: run %s %q, requests %d", r.Status, r.Error, len(srv.HeaderValues("Authorization")))
	}
}

// TestAIMCPTool: the model is offered the MCP tool as the server lists it
// (its description and input schema), calls it, and reads its result;
// with the attempt dying right after every journal write, the tool's
// side effect still happens exactly once, each turn is asked once, and
// the server's tools/list is read once (a resumed attempt takes the
// listed tools from the journal).
func TestAIMCPTool(t *testing.T) {
	srv := mcptest.Start(t)
	m := newFakeModel(t, func(turn int, _ map[string]any) (int, http.Header, any) {
		if turn == 0 {
			return 200, nil, openaiAnswer("", "create_issue", `{"title":"Refund Ann"}`)
		}
		return 200, nil, openaiAnswer("Filed it.", "", "")
	})
	creds := aiCreds{newCredentials()}
	creds.addModel("con_ai", "llm", automation.ConnectionOpenAI, "sk-x-123456", m.URL+"/v1")
	creds.addMCP("con_mcp", "tracker", srv.Endpoint)
	e := newAIEngine(creds, nil, nil)
	f := flowOf(aiStep(func(s *automation.Step) {
		s.Tools = []automation.AITool{{MCP: &automation.MCPToolRef{Connection: "tracker", Tool: "create_issue"}}}
	}))

	kills := 0
	var stored []automation.StepResult
	killer := func(_ context.Context, steps []automation.StepResult) error {
		stored = cloneResults(steps)
		kills++
		return errors.New("killed")
	}
	r := runOf(`{"text":"refund please"}`)
	for i := 0; i < 20; i++ {
		res := e.ExecuteJournaled(context.Background(), f, r, killer)
		if res.Run.Status == automation.RunSucceeded {
			r = res.Run
			break
		}
		if stored == nil {
			t.Fatalf("attempt %d ended %s %q without a journal write", i, res.Run.Status, res.Run.Error)
		}
		r.Steps, stored = stored, nil
	}
	if r.Status != automation.RunSucceeded {
		t.Fatalf("run %s %q", r.Status, r.Error)
	}
	out := stepOutput(t, r, 0)
	calls := out["toolCalls"].([]any)
	c0 := calls[0].(map[string]any)
	if out["text"] != "Filed it." || len(calls) != 1 || c0["tool"] != "create_issue" || c0["result"].(map[string]any)["title"] != "Refund Ann" {
		t.Fatalf("output %s", r.Steps[0].Output)
	}
	if srv.Calls("create_issue") != 1 || srv.Requests("tools/list") != 1 || kills < 2 {
		t.Errorf("create_issue called %d times, tools/list %d (want 1 and 1), kills %d", srv.Calls("create_issue"), srv.Requests("tools/list"), kills)
	}
	if got := m.counts(); fmt.Sprint(got) != "map[0:1 1:1]" {
		t.Errorf("requests per turn %v", got)
	}
	if keys := srv.CallKeys(); len(keys) != 1 || keys[0] != automation.IdempotencyKeyFor(r.ID, "triage")+".0" {
		t.Errorf("Idempotency-Key of the tool call %q", keys)
	}
	sent, _ := json.Marshal(m.last())
	for _, want := range []string{`"name":"create_issue"`, "Creates an issue in the tracker", `"required":["title"]`, `\"id\":1`} {
		if !strings.Contains(string(sent), want) {
			t.Errorf("the model's last request lacks %s: %s", want, sent)
		}
	}
	if strings.Contains(string(r.Steps[0].Output), mcpToken) {
		t.Error("the MCP token shows in the output")
	}

	// An isError result goes back to the model as the tool's error.
	m.script = func(turn int, _ map[string]any) (int, http.Header, any) {
		if turn == 0 {
			return 200, nil, openaiAnswer("", "fail", `{}`)
		}
		return 200, nil, openaiAnswer("Could not.", "", "")
	}
	f = flowOf(aiStep(func(s *automation.Step) {
		s.Tools = []automation.AITool{{MCP: &automation.MCPToolRef{Connection: "tracker", Tool: "fail"}}}
	}))
	r = e.Execute(context.Background(), f, runOf(`{"text":"x"}`)).Run
	if r.Status != automation.RunSucceeded {
		t.Fatalf("run %s %q", r.Status, r.Error)
	}
	if c := stepOutput(t, r, 0)["toolCalls"].([]any)[0].(map[string]any); c["error"] != "the tracker is read-only" {
		t.Errorf("tool call %v", c)
	}
	// A tool the server does not list fails the step before the model is asked.
	before := len(m.counts())
	f = flowOf(aiStep(func(s *automation.Step) {
		s.Tools = []automation.AITool{{MCP: &automation.MCPToolRef{Connection: "tracker", Tool: "missing_tool"}}}
	}))
	r = e.Execute(context.Background(), f, runOf(`{"text":"x"}`)).Run
	if r.Status != automation.RunFailed || !strings.Contains(r.Error, `lists no tool "missing_tool"`) || len(m.counts()) != before {
		t.Errorf("missing tool: run %s %q", r.Status, r.Error)
	}
}

// TestMCPResponseBounded: what an MCP server answers is read up to the
// engine's response limit (the HTTP step's); an answer over it fails the
// step, for good, and one under it is the output.
func TestMCPResponseBounded(t *testing.T) {
	srv := mcptest.Start(t)
	creds := aiCreds{newCredentials()}
	creds.addMCP("con_mcp", "tracker", srv.Endpoint)
	e := New(Config{Env: automation.ExecEnv{Credentials: creds, ConnectionNames: creds}, AllowPrivateNetworks: true,
		MaxResponseBytes: 64 << 10})
	res := e.Execute(context.Background(), flowOf(mcpStepOf("big", "big", `{"bytes": 200000}`)), runOf(`{}`))
	if res.Run.Status != automation.RunFailed || res.Retryable || !strings.Contains(res.Run.Error, "over 65536 bytes") {
		t.Fatalf("200 KB answer: run %s %q retryable %v", res.Run.Status, res.Run.Error, res.Retryable)
	}
	r := e.Execute(context.Background(), flowOf(mcpStepOf("big", "big", `{"bytes": 30000}`)), runOf(`{}`)).Run
	if r.Status != automation.RunSucceeded || len(r.Steps[0].Output) != 30002 {
		t.Fatalf("30 KB answer: run %s %q, output %d bytes", r.Status, r.Error, len(r.Steps[0].Output))
	}
}
