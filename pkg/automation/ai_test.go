package automation_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"flowservice/pkg/automation"
)

// scriptedOpenAI is an OpenAI-compatible chat completions server on
// 127.0.0.1 whose answers are given by turn (the assistant messages of the
// request); it counts each turn's requests and keeps the bodies.
func scriptedOpenAI(t *testing.T, answer func(turn int) map[string]any) (*httptest.Server, func() map[int]int, func() []string) {
	var mu sync.Mutex
	counts := map[int]int{}
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []struct{ Role string } `json:"messages"`
		}
		json.Unmarshal(b, &req)
		turn := 0
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				turn++
			}
		}
		mu.Lock()
		counts[turn]++
		bodies = append(bodies, string(b))
		mu.Unlock()
		msg := answer(turn)
		finish := "stop"
		if msg["tool_calls"] != nil {
			finish = "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "chat.completion", "created": 1, "model": "gpt-fake",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
	}))
	t.Cleanup(srv.Close)
	return srv, func() map[int]int {
			mu.Lock()
			defer mu.Unlock()
			out := map[int]int{}
			for k, v := range counts {
				out[k] = v
			}
			return out
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), bodies...)
		}
}

// TestAIStepWithFlowTool: an OPENAI connection made through the Service,
// a flow with a trigger.inputSchema as the tool of an AI step. The run
// parks while the tool's run (a real child run) executes, and goes on with
// its answer: each model turn is asked once, the child runs once with the
// model's arguments as its body, and the key never shows in the run.
func TestAIStepWithFlowTool(t *testing.T) {
	const key = "sk-live-abcdef0123456789"
	srv, counts, bodies := scriptedOpenAI(t, func(turn int) map[string]any {
		if turn == 0 {
			return map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
				"id": "call_1", "type": "function", "function": map[string]any{"name": "lookup_customer", "arguments": `{"email":"ann@example.com"}`}}}}
		}
		return map[string]any{"role": "assistant", "content": `{"priority":"high","plan":"gold"}`}
	})
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	conn, err := e.svc.CreateConnection(ctx, e.project, automation.ConnectionInput{Name: "openai", App: "openai", Type: automation.ConnectionOpenAI,
		Value: json.RawMessage(`{"apiKey": "` + key + `", "baseUrl": "` + srv.URL + `/v1"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(mustJSON(t, conn), key) {
		t.Fatal("the connection shows its key")
	}
	// The tool: a flow whose body is described by its inputSchema.
	name, desc, eng := "Lookup Customer", "Finds a customer's plan by email", automation.FlowBuilder
	steps := []automation.Step{{Name: "answer", Type: automation.StepRespond, Body: json.RawMessage(`{"plan": "gold", "email": "{{ trigger.body.email }}"}`)}}
	trig := automation.Trigger{Type: automation.TriggerWebhook,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"email":{"type":"string"}},"required":["email"]}`)}
	tool, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Description: &desc, Engine: &eng, Steps: &steps, Trigger: &trig})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.EnableFlow(ctx, e.project, tool.ID); err != nil {
		t.Fatal(err)
	}
	agent := e.ActiveFlow(t, e.project, "agent", automation.Step{Name: "triage", Type: automation.StepAI, Connection: "openai",
		Model: "gpt-fake", Prompt: "Ticket from {{ trigger.body.ref }}",
		Output: json.RawMessage(`{"type":"object","properties":{"priority":{"enum":["low","high"]}},"required":["priority"]}`),
		Tools:  []automation.AITool{{Flow: "Lookup Customer"}}})
	r := e.start1(t, agent)

	at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID) // parked: the error says until when
	if at.Outcome != automation.OutcomeRetry || at.Run.Status != automation.RunRunning {
		t.Fatalf("first attempt %v %s: want the run parked for its tool", at.Outcome, at.Run.Status)
	}
	childID, ok := automation.WaitingCall(at.Run.Steps[0])
	if !ok {
		t.Fatalf("step %+v: want waiting for the tool's run", at.Run.Steps[0])
	}
	kid, err := e.svc.Run(ctx, e.project, tool.ID, childID)
	if err != nil || string(kid.Trigger.Body) != `{"email":"ann@example.com"}` {
		t.Fatalf("tool run %+v %v", kid.Trigger, err)
	}
	if at, err := e.svc.ExecuteRun(ctx, r.Project, childID); err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("tool run %v %v", at.Run.Status, err)
	}
	at, err = e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded {
		t.Fatalf("after the tool: %s %q %v", at.Run.Status, at.Run.Error, err)
	}
	var out struct {
		JSON      map[string]any `json:"json"`
		ToolCalls []struct {
			Tool   string
			Result map[string]any
		} `json:"toolCalls"`
		Turns int
		Usage struct{ InputTokens, OutputTokens int }
	}
	if err := json.Unmarshal(at.Run.Steps[0].Output, &out); err != nil {
		t.Fatal(err)
	}
	if out.JSON["priority"] != "high" || out.Turns != 2 || len(out.ToolCalls) != 1 || out.ToolCalls[0].Result["plan"] != "gold" ||
		out.Usage.InputTokens != 200 || out.Usage.OutputTokens != 20 {
		t.Fatalf("output %s", at.Run.Steps[0].Output)
	}
	if c := counts(); len(c) != 2 || c[0] != 1 || c[1] != 1 {
		t.Errorf("requests per turn %v: want each asked once", c)
	}
	b := bodies()
	if !strings.Contains(b[0], `"name":"lookup_customer"`) || !strings.Contains(b[0], "Finds a customer's plan by email") ||
		!strings.Contains(b[0], `"required":["email"]`) {
		t.Errorf("the tool as the model saw it: %s", b[0])
	}
	stored, _ := e.svc.Run(ctx, e.project, agent.ID, r.ID)
	if strings.Contains(mustJSON(t, stored), key) {
		t.Error("the key shows in the run record")
	}
}

// TestAIValidation: an AI step's definition errors are 400s naming the
// field; an inputSchema is for WEBHOOK triggers and uses known keywords;
// a flow tool must name a flow of the project.
func TestAIValidation(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	name, eng := "f", automation.FlowBuilder
	ok := automation.Step{Name: "ai", Type: automation.StepAI, Connection: "openai", Model: "m", Prompt: "hi"}
	for _, tt := range []struct {
		edit func(*automation.Step, *automation.Trigger)
		want string
	}{
		{func(s *automation.Step, _ *automation.Trigger) { s.Model = "" }, "steps[0].model is required"},
		{func(s *automation.Step, _ *automation.Trigger) { s.MaxTurns = 33 }, "maxTurns 33: use 1 to 32"},
		{func(s *automation.Step, _ *automation.Trigger) {
			s.Output = json.RawMessage(`{"type":"object","oneOf":[]}`)
		}, "steps[0].output.oneOf: this keyword is not supported"},
		{func(s *automation.Step, _ *automation.Trigger) { s.Tools = []automation.AITool{{Flow: "nope"}} }, `tools[0].flow "nope"`},
		{func(s *automation.Step, _ *automation.Trigger) { s.Tools = []automation.AITool{{}} }, "tools[0]: a tool is"},
		{func(s *automation.Step, _ *automation.Trigger) { x := 3.0; s.Temperature = &x }, "temperature 3: use 0 to 2"},
		{func(s *automation.Step, _ *automation.Trigger) { s.URL = "http://x" }, "url does not apply to AI steps"},
		{func(_ *automation.Step, tr *automation.Trigger) {
			tr.InputSchema = json.RawMessage(`{"type":"string"}`)
		}, "trigger.inputSchema must describe an object"},
	} {
		st := ok
		trig := automation.Trigger{Type: automation.TriggerWebhook}
		tt.edit(&st, &trig)
		steps := []automation.Step{st}
		_, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps, Trigger: &trig})
		var ae *automation.Error
		if !errors.As(err, &ae) || ae.Kind != automation.ErrInvalid || !strings.Contains(ae.Message, tt.want) {
			t.Errorf("%s: err %v", tt.want, err)
		}
	}
	steps := []automation.Step{ok}
	f, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps})
	if err != nil || f.Steps[0].MaxTurns != 8 || f.Steps[0].MaxTokens != 4096 {
		t.Fatalf("defaults: %+v %v", f.Steps, err)
	}
	for _, v := range []string{`{"baseUrl": "https://x"}`, `{"apiKey": "k", "baseUrl": "ftp://x"}`, `{"apiKey": "k", "model": "m"}`} {
		_, err := e.svc.CreateConnection(ctx, e.project, automation.ConnectionInput{Name: "c", App: "a", Type: automation.ConnectionAnthropic, Value: json.RawMessage(v)})
		if !errors.Is(err, automation.ErrInvalid) || strings.Contains(err.Error(), `"k"`) {
			t.Errorf("value %s: err %v, want a 400 that does not quote the key", v, err)
		}
	}
}

// exampleFlow creates and enables the flow of an examples/ file.
func (e *env) exampleFlow(t *testing.T, file string) automation.Flow {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	var in automation.FlowInput
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	ctx := context.Background()
	f, err := e.svc.CreateFlow(ctx, e.project, in)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if f, err = e.svc.EnableFlow(ctx, e.project, f.ID); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAIExamples runs the AI examples against a scripted model: the
// ticket triage answers with the model's structured answer after one
// repair; the agent calls the lookup flow as its tool and replies.
func TestAIExamples(t *testing.T) {
	srv, counts, _ := scriptedOpenAI(t, func(turn int) map[string]any {
		switch turn {
		case 0:
			return map[string]any{"role": "assistant", "content": `{"priority":"urgent","team":"billing","mood":"angry"}`}
		}
		return map[string]any{"role": "assistant", "content": `{"priority":"urgent","team":"billing"}`}
	})
	e := newEnv(t, automation.RunPolicy{})
	ctx := context.Background()
	if _, err := e.svc.CreateConnection(ctx, e.project, automation.ConnectionInput{Name: "openai", App: "openai", Type: automation.ConnectionOpenAI,
		Value: json.RawMessage(`{"apiKey": "sk-example", "baseUrl": "` + srv.URL + `/v1"}`)}); err != nil {
		t.Fatal(err)
	}
	triage := e.exampleFlow(t, "ai-ticket-triage.json")
	r, err := e.svc.StartRun(ctx, triage, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{"text":"I was charged twice"}`)})
	if err != nil {
		t.Fatal(err)
	}
	at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded || string(at.Run.Response.Body) != `{"priority":"urgent","team":"billing"}` {
		t.Fatalf("triage %s %q %v: %+v", at.Run.Status, at.Run.Error, err, at.Run.Response)
	}
	if c := counts(); c[0] != 1 || c[1] != 1 {
		t.Errorf("triage turns %v: want the answer and one repair", c)
	}

	// The agent: a tool call, then the reply.
	srv2, _, bodies := scriptedOpenAI(t, func(turn int) map[string]any {
		if turn == 0 {
			return map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
				"id": "c1", "type": "function", "function": map[string]any{"name": "lookup_customer", "arguments": `{"email":"ann@example.com"}`}}}}
		}
		return map[string]any{"role": "assistant", "content": "You are on the gold plan."}
	})
	conns, _ := e.svc.ListConnections(ctx, e.project, automation.PageRequest{})
	e.svc.DeleteConnection(ctx, e.project, conns.Data[0].ID)
	if _, err := e.svc.CreateConnection(ctx, e.project, automation.ConnectionInput{Name: "openai", App: "openai", Type: automation.ConnectionOpenAI,
		Value: json.RawMessage(`{"apiKey": "sk-example", "baseUrl": "` + srv2.URL + `/v1"}`)}); err != nil {
		t.Fatal(err)
	}
	e.exampleFlow(t, "ai-lookup-customer.json")
	agent := e.exampleFlow(t, "ai-agent-flow-tool.json")
	r, err = e.svc.StartRun(ctx, agent, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{"email":"ann@example.com","text":"Which plan am I on?"}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		at, _ = e.svc.ExecuteRun(ctx, r.Project, r.ID)
		if childID, ok := automation.WaitingCall(at.Run.Steps[0]); ok {
			e.svc.ExecuteRun(ctx, r.Project, childID)
			continue
		}
		break
	}
	if at.Run.Status != automation.RunSucceeded || !strings.Contains(string(at.Run.Steps[1].Output), "gold plan") {
		t.Fatalf("agent %s %q: %s", at.Run.Status, at.Run.Error, at.Run.Steps[1].Output)
	}
	if b := bodies(); len(b) != 2 || !strings.Contains(b[1], `\"plan\":\"gold\"`) {
		t.Errorf("the model did not get the tool's answer: %v", b)
	}
}
