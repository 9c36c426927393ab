package awsapp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/engine"
)

// aiModel is a scripted OpenAI-compatible model on 127.0.0.1. A prompt
// holding "lookup <email>" has its first turn call the lookup_customer
// tool; one holding "turns:N" has its first N-1 turns call a tool no flow
// offers (each answered with an error, so the model is asked again); the
// last turn answers "done". Every answer uses 60,000 input and 35,000
// output tokens. It counts the requests of each prompt.
type aiModel struct {
	*httptest.Server
	mu       sync.Mutex
	requests map[string]int
}

var turnsRe = regexp.MustCompile(`turns:(\d+)`)

func newAIModel(t *testing.T) *aiModel {
	m := &aiModel{requests: map[string]int{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string
				Content any
			}
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", 400)
			return
		}
		prompt, turn := "", 0
		for _, msg := range req.Messages {
			switch msg.Role {
			case "user":
				if s, ok := msg.Content.(string); ok && prompt == "" {
					prompt = s
				}
			case "assistant":
				turn++
			}
		}
		m.mu.Lock()
		m.requests[prompt]++
		m.mu.Unlock()
		msg := map[string]any{"role": "assistant", "content": "done"}
		call := func(name, args string) {
			msg = map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "call_" + strconv.Itoa(turn),
				"type": "function", "function": map[string]any{"name": name, "arguments": args}}}}
		}
		if email, ok := strings.CutPrefix(prompt, "lookup "); ok && turn == 0 {
			call("lookup_customer", `{"email":"`+email+`"}`)
		}
		if sm := turnsRe.FindStringSubmatch(prompt); sm != nil {
			if n, _ := strconv.Atoi(sm[1]); turn < n-1 {
				call("not_a_tool", `{}`)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "cmpl", "object": "chat.completion", "created": 1, "model": "gpt-fake",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 60_000, "completion_tokens": 35_000, "total_tokens": 95_000}})
	}))
	t.Cleanup(m.Close)
	return m
}

func (m *aiModel) asked(prompt string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[prompt]
}

// TestAIStepOnMoto is the AI step on the Lambda path, through the runner
// function's handler on moto, against a scripted model:
//   - a flow tool: the model calls a flow, the run parks, the tool's run
//     goes through SQS and the runner, wakes the caller, and the model's
//     answer ends the step, its usage in GET run;
//   - an invocation whose time is shorter than a model request may take
//     hands the loop over after each turn: the run is parked due at once
//     (a fresh message), and the next invocation goes on from the journal,
//     asking no turn twice;
//   - aiTokensPerDay on a FREE project (100,000): a first run's turn uses
//     95,000 tokens; a second run's first turn is admitted and takes the
//     project over, its next is refused (QUOTA_EXCEEDED); the day's sum is
//     in GET /api/v1/project, counted in DynamoDB.
func TestAIStepOnMoto(t *testing.T) {
	ctx := context.Background()
	st := newMotoStage(t, "ai", awsapp.Config{Stage: "test", LogOutput: io.Discard, AllowPrivateNetworks: true})
	awsCfg, cfg := st.AWS, st.Cfg
	api, err := management.NewHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := awsapp.NewWebhookHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runner, err := awsapp.NewRunnerHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	model := newAIModel(t)
	call := func(key string, h awsapp.ProxyHandler, method, path, body string, want int, out any) {
		t.Helper()
		resp, err := h(ctx, events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body,
			MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + key}},
			RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: path,
				Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}})
		if err != nil || resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s %v, want %d", method, path, resp.StatusCode, resp.Body, err, want)
		}
		if out != nil {
			if err := json.Unmarshal([]byte(resp.Body), out); err != nil {
				t.Fatal(err)
			}
		}
	}
	setup := func(key string) (agent string) {
		t.Helper()
		call(key, api, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "llm", "app": "openai", "type": "OPENAI",
			"value": {"apiKey": "sk-fake-0123456789", "baseUrl": %q}}`, model.URL+"/v1"), 201, nil)
		var f struct{ ID string }
		call(key, api, "POST", "/api/v1/flows", `{"name": "Lookup Customer", "description": "Finds a customer's plan by email", "engine": "FLOW_BUILDER",
			"trigger": {"type": "WEBHOOK", "inputSchema": {"type": "object", "properties": {"email": {"type": "string"}}, "required": ["email"]}},
			"steps": [{"name": "answer", "type": "RESPOND", "body": {"plan": "gold", "email": "{{ trigger.body.email }}"}}]}`, 201, &f)
		call(key, api, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
		call(key, api, "POST", "/api/v1/flows", `{"name": "agent", "engine": "FLOW_BUILDER", "steps": [
			{"name": "ask", "type": "AI", "connection": "llm", "model": "gpt-fake", "prompt": "{{ trigger.body.prompt }}",
			 "tools": [{"flow": "Lookup Customer"}]},
			{"name": "after", "type": "SET", "values": {"text": "{{ steps.ask.text }}"}}]}`, 201, &f)
		call(key, api, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
		return f.ID
	}
	type run struct {
		ID, Status, Error string
		Usage             *automation.RunUsage
		Steps             []struct {
			Status, Error string
			Attempts      int
			Output        json.RawMessage
		}
	}
	sqsc := sqs.NewFromConfig(awsCfg)
	// finish drives the runner until the run is final, each invocation
	// given until (0: no deadline of its own); it answers the run and the
	// invocations that handled a message.
	finish := func(key, flowID, prompt string, until time.Duration) (run, int) {
		t.Helper()
		var accepted struct{ RunID string }
		call(key, hook, "POST", "/api/v1/webhooks/"+flowID, `{"prompt": "`+prompt+`"}`, 200, &accepted)
		var r run
		invocations := 0
		for range 30 {
			call(key, api, "GET", "/api/v1/flows/"+flowID+"/runs/"+accepted.RunID, "", 200, &r)
			if r.Status != "RUNNING" {
				return r, invocations
			}
			ictx, cancel := ctx, context.CancelFunc(func() {})
			if until > 0 {
				ictx, cancel = context.WithTimeout(ctx, until)
			}
			n, err := awsdev.PollOnce(ictx, sqsc, cfg.QueueURL, time.Second, runner)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				invocations++
			}
		}
		t.Fatalf("run %s is still %s after the queue ran dry", accepted.RunID, r.Status)
		return r, 0
	}

	// A flow tool, through SQS and the runner.
	agent := setup(st.Key)
	r, _ := finish(st.Key, agent, "lookup ann@example.com", 0)
	var out struct {
		Text      string
		ToolCalls []struct {
			Tool   string
			Result map[string]any
		}
		Usage automation.RunUsage
	}
	if r.Status != "SUCCEEDED" || json.Unmarshal(r.Steps[0].Output, &out) != nil || out.Text != "done" || len(out.ToolCalls) != 1 ||
		out.ToolCalls[0].Tool != "lookup_customer" || out.ToolCalls[0].Result["email"] != "ann@example.com" {
		t.Fatalf("tool run %s %q, step output %s: want SUCCEEDED after the lookup_customer tool's answer", r.Status, r.Error, r.Steps[0].Output)
	}
	if r.Usage == nil || *r.Usage != (automation.RunUsage{InputTokens: 120_000, OutputTokens: 70_000}) || model.asked("lookup ann@example.com") != 2 {
		t.Fatalf("tool run usage %+v after %d requests: want two turns' tokens, each turn asked once", r.Usage, model.asked("lookup ann@example.com"))
	}

	// Invocations shorter than a model request may take: one turn each,
	// handed over through the journal.
	r, invocations := finish(st.Key, agent, "turns:3", engine.AIModelTimeout/2)
	if r.Status != "SUCCEEDED" || model.asked("turns:3") != 3 || invocations < 3 {
		t.Fatalf("handed-over run %s %q: %d requests in %d invocations, want SUCCEEDED with 3 requests in 3 or more", r.Status, r.Error, model.asked("turns:3"), invocations)
	}
	if r.Steps[0].Attempts != 3 || r.Usage == nil || r.Usage.InputTokens != 180_000 {
		t.Errorf("handed-over step attempts %d, usage %+v: want 3 and three turns' tokens", r.Steps[0].Attempts, r.Usage)
	}

	// aiTokensPerDay on a FREE project.
	admin, err := awsdev.NewAdminService(awsCfg, st.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	free, err := admin.CreateProject(ctx, "lab", automation.PlanFree)
	if err != nil {
		t.Fatal(err)
	}
	freeKey, _, err := admin.CreateAPIKey(ctx, free.ID)
	if err != nil {
		t.Fatal(err)
	}
	freeAgent := setup(freeKey)
	if r, _ := finish(freeKey, freeAgent, "turns:1", 0); r.Status != "SUCCEEDED" || r.Usage == nil || r.Usage.InputTokens != 60_000 {
		t.Fatalf("first FREE run %s %q usage %+v: want SUCCEEDED with 95000 tokens", r.Status, r.Error, r.Usage)
	}
	r, _ = finish(freeKey, freeAgent, "turns:2", 0)
	if r.Status != "FAILED" || !strings.Contains(r.Steps[0].Error, "QUOTA_EXCEEDED") || model.asked("turns:2") != 1 {
		t.Fatalf("second FREE run %s, step %q after %d requests: want FAILED QUOTA_EXCEEDED after one turn", r.Status, r.Steps[0].Error, model.asked("turns:2"))
	}
	var pi struct {
		Limits struct{ AITokensPerDay *int64 }
		Usage  struct{ AITokensToday int64 }
	}
	call(freeKey, api, "GET", "/api/v1/project", "", 200, &pi)
	if pi.Limits.AITokensPerDay == nil || *pi.Limits.AITokensPerDay != 100_000 || pi.Usage.AITokensToday != 190_000 {
		t.Fatalf("FREE project %+v: want aiTokensPerDay 100000 and 190000 used today", pi)
	}
}
