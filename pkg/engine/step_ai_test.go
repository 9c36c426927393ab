package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// fakeModel is a scripted model provider on 127.0.0.1: OpenAI chat
// completions at /v1/chat/completions and Anthropic messages at
// /v1/messages. script answers turn n (the assistant messages the request
// carries) with a status, headers and a body; requests counts each turn's
// requests, so that a test sees a turn asked twice.
type fakeModel struct {
	*httptest.Server
	mu       sync.Mutex
	requests map[int]int
	bodies   []map[string]any
	auth     []string
	script   func(turn int, req map[string]any) (int, http.Header, any)
}

func newFakeModel(t *testing.T, script func(turn int, req map[string]any) (int, http.Header, any)) *fakeModel {
	m := &fakeModel{requests: map[int]int{}, script: script}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req map[string]any
		if err := json.Unmarshal(b, &req); err != nil {
			http.Error(w, "bad json", 400)
			return
		}
		turn := 0
		msgs, _ := req["messages"].([]any)
		for _, mm := range msgs {
			if mm.(map[string]any)["role"] == "assistant" {
				turn++
			}
		}
		m.mu.Lock()
		m.requests[turn]++
		m.bodies = append(m.bodies, req)
		m.auth = append(m.auth, r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"))
		m.mu.Unlock()
		status, h, body := m.script(turn, req)
		for k, v := range h {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *fakeModel) counts() map[int]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int]int{}
	for k, v := range m.requests {
		out[k] = v
	}
	return out
}

func (m *fakeModel) last() map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.bodies[len(m.bodies)-1]
}

// openaiAnswer is a chat completion with text or one tool call.
func openaiAnswer(text, tool, args string) any {
	msg := map[string]any{"role": "assistant", "content": text}
	finish := "stop"
	if tool != "" {
		msg["tool_calls"] = []any{map[string]any{"id": "call_" + tool, "type": "function",
			"function": map[string]any{"name": tool, "arguments": args}}}
		finish = "tool_calls"
	}
	return map[string]any{"id": "cmpl", "object": "chat.completion", "created": 1, "model": "gpt-test",
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
}

// anthropicAnswer is a message with text or one tool use.
func anthropicAnswer(text, tool, input string) any {
	var content []any
	if text != "" {
		content = append(content, map[string]any{"type": "text", "text": text})
	}
	stop := "end_turn"
	if tool != "" {
		content = append(content, map[string]any{"type": "tool_use", "id": "toolu_" + tool, "name": tool, "input": json.RawMessage(input)})
		stop = "tool_use"
	}
	return map[string]any{"id": "msg", "type": "message", "role": "assistant", "model": "claude-test",
		"content": content, "stop_reason": stop, "usage": map[string]any{"input_tokens": 20, "output_tokens": 7}}
}

// aiCreds is a credential store with connections by name.
type aiCreds struct{ *fakeCredentials }

func (c aiCreds) ConnectionIDsByName(context.Context, string) (map[string][]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]string{}
	for id, conn := range c.conns {
		out[conn.Name] = append(out[conn.Name], id)
	}
	return out, nil
}

func (c aiCreds) addModel(id, name string, typ automation.ConnectionType, key, baseURL string, hosts ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns[id] = automation.Connection{ID: id, Project: "p1", Name: name, Type: typ, Status: automation.ConnectionActive, AllowedHosts: hosts}
	c.values[id] = automation.ConnectionValue{APIKey: automation.Secret(key), BaseURL: baseURL}
}

// toolRuns stands for the Service's calls: the flow tool "lookup" and the
// child runs the engine asks for, which the test finishes.
type toolRuns struct {
	mu      sync.Mutex
	started map[string]automation.Call // by run ID
	asked   int                        // calls the engine asked for (before the dedupe a derived ID gives)
	answer  func(c automation.Call) json.RawMessage
}

func (t *toolRuns) ToolFlow(_ context.Context, _, name string) (automation.ToolFlow, error) {
	if name != "Lookup Customer" {
		return automation.ToolFlow{}, &automation.Error{Code: "FLOW_NOT_FOUND", Message: "no flow " + name}
	}
	return automation.ToolFlow{ID: "flw_tool", Name: name, Tool: "lookup_customer", Description: "Finds a customer by email",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"email":{"type":"string"}},"required":["email"]}`), Active: true}, nil
}
func (t *toolRuns) CheckCall(context.Context, string, string) error { return nil }
func (t *toolRuns) StartCall(_ context.Context, c automation.Call) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.asked++
	if t.started == nil {
		t.started = map[string]automation.Call{}
	}
	t.started[c.RunID] = c
	return nil
}
func (t *toolRuns) CalledRun(_ context.Context, _, flowID, runID string) (automation.Run, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.started[runID]
	if !ok {
		return automation.Run{}, automation.NotFound("run", runID)
	}
	return automation.Run{ID: runID, FlowID: flowID, Status: automation.RunSucceeded,
		Response: &automation.RunResponse{StatusCode: 200, Body: t.answer(c)}}, nil
}

// startCalls does what the Service does with a parked run's calls.
func (t *toolRuns) startCalls(calls []automation.Call) {
	for _, c := range calls {
		t.StartCall(context.Background(), c)
	}
}

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(_ context.Context, d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return true
}

func newAIEngine(creds aiCreds, tools *toolRuns, sl *sleeps) *Engine {
	env := automation.ExecEnv{Credentials: creds, ConnectionNames: creds}
	if tools != nil {
		env.ToolFlows, env.Calls = tools, tools
	}
	cfg := Config{Env: env, AllowPrivateNetworks: true}
	if sl != nil {
		cfg.Sleep = sl.sleep
	}
	return New(cfg)
}

func aiStep(extra func(*automation.Step)) automation.Step {
	s := automation.Step{Name: "triage", Type: automation.StepAI, Connection: "llm", Model: "m-1",
		System: "You triage tickets.", Prompt: "Ticket: {{ trigger.body.text }}", MaxTurns: 8, MaxTokens: 256}
	if extra != nil {
		extra(&s)
	}
	return s
}

const triageSchema = `{"type":"object","properties":{"priority":{"enum":["low","high"]},"customer":{"type":"string"}},"required":["priority"]}`

// runToEnd executes r until it ends, doing what the Service does between
// attempts: the parked run's calls started, its recorded steps resumed.
// journal may fail an attempt as a kill would (after its write).
func runToEnd(t *testing.T, e *Engine, f automation.Flow, r automation.Run, tools *toolRuns, journal automation.Journal) automation.Run {
	t.Helper()
	for i := 0; i < 40; i++ {
		res := e.ExecuteJournaled(context.Background(), f, r, journal)
		if res.WaitUntil != nil {
			tools.startCalls(res.Calls)
			r = res.Run
			continue
		}
		if res.Run.Status == automation.RunFailed && res.Retryable {
			r = res.Run
			continue
		}
		return res.Run
	}
	t.Fatal("the run did not end in 40 attempts")
	return r
}

func stepOutput(t *testing.T, r automation.Run, i int) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(r.Steps[i].Output, &out); err != nil {
		t.Fatalf("output %s: %v", r.Steps[i].Output, err)
	}
	return out
}

// TestAIOpenAIToolAndRepair: through the OpenAI SDK, the model calls a
// flow tool (a waited call: the run parks, the child's answer goes back to
// the model), answers in a shape the output schema refuses, is told the
// validation error, and answers right: the step's output has the text,
// the parsed json, the tool call with its result, four turns and their
// usage summed.
func TestAIOpenAIToolAndRepair(t *testing.T) {
	const key = "sk-test-key-000111222"
	m := newFakeModel(t, func(turn int, req map[string]any) (int, http.Header, any) {
		switch turn {
		case 0:
			return 200, nil, openaiAnswer("", "lookup_customer", `{"email":"ann@example.com"}`)
		case 1:
			return 200, nil, openaiAnswer("It is urgent.", "", "")
		case 2:
			return 200, nil, openaiAnswer(`{"priority":"urgent"}`, "", "")
		}
		return 200, nil, openaiAnswer("```json\n{\"priority\":\"high\",\"customer\":\"Ann\"}\n```", "", "")
	})
	creds := aiCreds{newCredentials()}
	creds.addModel("con_ai", "llm", automation.ConnectionOpenAI, key, m.URL+"/v1")
	tools := &toolRuns{answer: func(c automation.Call) json.RawMessage {
		return json.RawMessage(`{"name":"Ann","plan":"gold"}`)
	}}
	e := newAIEngine(creds, tools, nil)
	f := flowOf(aiStep(func(s *automation.Step) {
		s.Output = json.RawMessage(triageSchema)
		s.Tools = []automation.AITool{{Flow: "Lookup Customer"}}
	}))
	r := runToEnd(t, e, f, runOf(`{"text":"my invoice is wrong"}`), tools, nil)
	if r.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	out := stepOutput(t, r, 0)
	js, _ := json.Marshal(out["json"])
	if string(js) != `{"customer":"Ann","priority":"high"}` || out["turns"] != float64(4) || out["model"] != "gpt-test" || out["stopReason"] != "stop" {
		t.Fatalf("output %s", r.Steps[0].Output)
	}
	if u := out["usage"].(map[string]any); u["inputTokens"] != float64(40) || u["outputTokens"] != float64(20) {
		t.Errorf("usage %v: want 4 turns of 10 and 5 tokens", u)
	}
	calls := out["toolCalls"].([]any)
	c0 := calls[0].(map[string]any)
	if len(calls) != 1 || c0["tool"] != "lookup_customer" || c0["result"].(map[string]any)["plan"] != "gold" ||
		c0["arguments"].(map[string]any)["email"] != "ann@example.com" {
		t.Errorf("toolCalls %v", calls)
	}
	if _, ok := out["journal"]; ok {
		t.Errorf("a finished step's output keeps its journal: %s", r.Steps[0].Output)
	}
	if got := m.counts(); fmt.Sprint(got) != "map[0:1 1:1 2:1 3:1]" {
		t.Errorf("requests per turn %v: want each turn asked once", got)
	}
	if len(tools.started) != 1 {
		t.Errorf("tool runs %d, want 1", len(tools.started))
	}
	for _, c := range tools.started {
		if string(c.Body) != `{"email":"ann@example.com"}` || !c.Caller.Wait {
			t.Errorf("tool run body %s caller %+v", c.Body, c.Caller)
		}
	}
	// What the model was sent: the system text with the schema, the tool
	// described by the flow, the tool's result, the validation error.
	last := m.last()
	b, _ := json.Marshal(last)
	for _, want := range []string{"You triage tickets.", "meets this JSON Schema", `"name":"lookup_customer"`,
		"Finds a customer by email", `\"plan\":\"gold\"`, `is not one of`, "Ticket: my invoice is wrong"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the last request lacks %q: %s", want, b)
		}
	}
	if m.auth[0] != "Bearer "+key {
		t.Errorf("authorization %q", m.auth[0])
	}
	if strings.Contains(string(r.Steps[0].Output), key) {
		t.Error("the key shows in the output")
	}
}

// TestAIRepairsRunOut: an answer that never meets the schema fails the
// step after two repair turns, quoting the validation error.
func TestAIRepairsRunOut(t *testing.T) {
	m := newFakeModel(t, func(turn int, _ map[string]any) (int, http.Header, any) {
		return 200, nil, openaiAnswer(`{"priority":"medium"}`, "", "")
	})
	creds := aiCreds{newCredentials()}
	creds.addModel("con_ai", "llm", automation.ConnectionOpenAI, "sk-x-123456", m.URL+"/v1")
	e := newAIEngine(creds, nil, nil)
	r := e.Execute(context.Background(), flowOf(aiStep(func(s *automation.Step) { s.Output = json.RawMessage(triageSchema) })), runOf(`{"text":"x"}`)).Run
	if r.Status != automation.RunFailed || !strings.Contains(r.Error, "after 2 repair turns") || !strings.Contains(r.Error, `"medium" is not one of`) {
		t.Fatalf("run %s: %q", r.Status, r.Error)
	}
	if got := m.counts(); fmt.Sprint(got) != "map[0:1 1:1 2:1]" {
		t.Errorf("requests per turn %v: want the answer and two repairs", got)
	}
}

// TestAIAnthropicMessages: through the Anthropic SDK (base URL without
// /v1), a tool use, its result in a user message, and the final text.
func TestAIAnthropicMessages(t *testing.T) {
	m := newFakeModel(t, func(turn int, req map[string]any) (int, http.Header, any) {
		if turn == 0 {
			return 200, nil, anthropicAnswer("Let me look.", "lookup_customer", `{"email":"bo@example.com"}`)
		}
		return 200, nil, anthropicAnswer(`{"priority":"low","customer":"Bo"}`, "", "")
	})
	creds := aiCreds{newCredentials()}
	creds.addModel("con_ai", "llm", automation.ConnectionAnthropic, "sk-ant-test-999", m.URL)
	tools := &toolRuns{answer: func(automation.Call) json.RawMessage { return json.RawMessage(`{"name":"Bo"}`) }}
	e := newAIEngine(creds, tools, nil)
	temp := 0.2
	f := flowOf(aiStep(func(s *automation.Step) {
		s.Output = json.RawMessage(triageSchema)
		s.Tools = []automation.AITool{{Flow: "Lookup Customer"}}
		s.Temperature = &temp
	}))
	r := runToEnd(t, e, f, runOf(`{"text":"hello"}`), tools, nil)
	if r.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s", r.Status, r.Error)
	}
	out := stepOutput(t, r, 0)
	if out["json"].(map[string]any)["customer"] != "Bo" || out["stopReason"] != "end_turn" || out["model"] != "claude-test" {
		t.Fatalf("output %s", r.Steps[0].Output)
	}
	last, _ := json.Marshal(m.last())
	for _, want := range []string{`"tool_result"`, `"tool_use_id":"toolu_lookup_customer"`, `"input_schema"`, `"temperature":0.2`, `"max_tokens":256`, `"system"`} {
		if !strings.Contains(string(last), want) {
			t.Errorf("the last request lacks %s: %s", want, last)
		}
	}
	if m.auth[0] != "sk-ant-test-999" { // x-api-key, no Authorization
		t.Errorf("credential %q", m.auth[0])
	}
}

// TestAIRetryAfter: a 429 with Retry-After is waited out on the injected
// clock and asked again; 5xx past AIModelAttempts fails the step,
// retryable, so that the run's next attempt asks again.
func TestAIRetryAfter(t *testing.T) {
	var mu sync.Mutex
	fails := 1
	m := newFakeModel(t, func(turn int, _ map[string]any) (int, http.Header, any) {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			return 429, http.Header{"Retry-After": {"7"}}, map[string]any{"error": map[string]any{"message": "slow down"}}
		}
		return 200, nil, openaiAnswer("done", "", "")
	})
	creds := aiCreds{newCredentials()}
	creds.addModel("con_ai", "llm", automation.ConnectionOpenAI, "sk-x-123456", m.URL+"/v1")
	sl := &sleeps{}
	e := newAIEngine(creds, nil, sl)
	r := e.Execute(context.Background(), flowOf(aiStep(nil)), runOf(`{"text":"x"}`)).Run
	if r.Status != automation.RunSucceeded || fmt.Sprint(sl.d) != "[7s]" {
		t.Fatalf("run %s %q, waits %v: want success after waiting 7s", r.Status, r.Error, sl.d)
	}

	mu.Lock()
	fails = 100
	mu.Unlock()
	sl.d = nil
	res := e.Execute(context.Background(), flowOf(aiStep(nil)), runOf(`{"text":"x"}`))
	if res.Run.Status != automation.RunFailed || !res.Retryable || !strings.Contains(res.Run.Error, "429") || len(sl.d) != AIModelAttempts-1 {
		t.Fatalf("run %s %q retryable %v waits %v", res.Run.Status, res.Run.Error, res.Retryable, sl.d)
	}
	// A Retry-After longer than AIMaxRetryAfter ends the attempt at once.
	m.script = func(int, map[string]any) (int, http.Header, any) {
		return 503, http.Header{"Retry-After": {"3600"}}, map[string]any{"error": map[string]any{"message": "busy"}}
	}
	sl.d = nil
	res = e.Execute(context.Background(), flowOf(aiStep(nil)), runOf(`{"text":"x"}`))
	if !res.Retryable || len(sl.d) != 0 {
		t.Fatalf("retryable %v waits %v: want the attempt ended without waiting", res.Retryable, sl.d)
	}
}

// TestAIAllowedHosts: a connection fenced to other hosts sends nothing.
func TestAIAllowedHosts(t *testing.T) {
	m := newFakeModel(t, func(int, map[string]any) (int, http.Header, any) { return 200, nil, openaiAnswer("x", "", "") })
	creds := aiCreds{newCredentials()}
	creds.addModel("con_ai", "llm", automation.ConnectionOpenAI, "sk-x-123456", m.URL+"/v1", "api.openai.com")
	r := newAIEngine(creds, nil, nil).Execute(context.Background(), flowOf(aiStep(nil)), runOf(`{}`)).Run
	if r.Status != automation.RunFailed || !strings.Contains(r.Error, "may only be sent to api.openai.com") || len(m.counts()) != 0 {
		t.Fatalf("run %s %q, requests %v", r.Status, r.Error, m.counts())
	}
}

// TestAIKillResume: the attempt dies right after each journal write (the
// write is kept, the attempt's end is lost). Resuming from what was
// written, every turn is requested exactly once and the flow tool's run
// is asked for once.
func TestAIKillResume(t *testing.T) {
	m := newFakeModel(t, func(turn int, _ map[string]any) (int, http.Header, any) {
		switch turn {
		case 0:
			return 200, nil, openaiAnswer("", "lookup_customer", `{"email":"cy@example.com"}`)
		case 1:
			return 200, nil, openaiAnswer(`not json`, "", "")
		}
		return 200, nil, openaiAnswer(`{"priority":"low"}`, "", "")
	})
	creds := aiCreds{newCredentials()}
	creds.addModel("con_ai", "llm", automation.ConnectionOpenAI, "sk-x-123456", m.URL+"/v1")
	tools := &toolRuns{answer: func(automation.Call) json.RawMessage { return json.RawMessage(`{"ok":1}`) }}
	e := newAIEngine(creds, tools, nil)
	f := flowOf(aiStep(func(s *automation.Step) {
		s.Output = json.RawMessage(triageSchema)
		s.Tools = []automation.AITool{{Flow: "Lookup Customer"}}
	}), automation.Step{Name: "after", Type: automation.StepSet, Values: raw(`{"p": "{{ steps.triage.json.priority }}"}`)})

	var stored []automation.StepResult
	kills := 0
	killer := func(_ context.Context, steps []automation.StepResult) error {
		stored = cloneResults(steps)
		kills++
		return errors.New("killed")
	}
	r := runOf(`{"text":"x"}`)
	for i := 0; i < 30; i++ {
		res := e.ExecuteJournaled(context.Background(), f, r, killer)
		if res.WaitUntil != nil {
			tools.startCalls(res.Calls)
			r = res.Run // the park's write is the release's, which the kill does not touch
			stored = nil
			continue
		}
		if res.Run.Status == automation.RunSucceeded {
			r = res.Run
			break
		}
		if stored == nil {
			t.Fatalf("attempt %d ended %s %q without a journal write", i, res.Run.Status, res.Run.Error)
		}
		r.Steps, stored = stored, nil // the process died: only the journal is left
	}
	if r.Status != automation.RunSucceeded || stepOutput(t, r, 1)["p"] != "low" {
		t.Fatalf("run %s %q", r.Status, r.Error)
	}
	if got := m.counts(); fmt.Sprint(got) != "map[0:1 1:1 2:1]" {
		t.Errorf("requests per turn %v: want each turn asked exactly once", got)
	}
	if tools.asked != 1 || kills < 3 {
		t.Errorf("tool runs asked %d (want 1), kills %d", tools.asked, kills)
	}
}
