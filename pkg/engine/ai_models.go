package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

// The model providers of AI steps: OpenAI's chat completions (and every
// compatible server) and Anthropic's Messages API, spoken with the
// standard library. The official SDKs were measured and refused: they
// took the runner's bootstrap from 13.4 to 42.8 MB, far over its 15 MB
// bound (docs/architecture.md, "Dependencies"). Requests go through the
// engine's guarded transport (aiHTTPClient); the step retries (aiTurn),
// so that its waits follow the engine's clock.

// Bounds of a model call (docs/reliability.md).
const (
	// AIModelTimeout bounds one model request.
	AIModelTimeout = 120 * time.Second
	// AIModelAttempts are the requests one turn may take when the provider
	// answers 429 or 5xx or the network fails.
	AIModelAttempts = 4
	// AIMaxRetryAfter is the longest Retry-After a turn waits in the
	// attempt; a longer one ends the attempt, retryable, and the run's
	// next attempt resumes after the journaled turns.
	AIMaxRetryAfter = time.Minute
	// MaxAIToolResultBytes bounds a tool result as the model gets it and
	// the journal keeps it.
	MaxAIToolResultBytes = 16 << 10
)

// aiToolSpec is a tool as the model is told of it.
type aiToolSpec struct {
	Name, Description string
	Schema            json.RawMessage
}

// aiCall is a tool call a model asked for.
type aiCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// aiUsage counts a step's tokens.
type aiUsage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// aiTurnRequest is one request of the loop: the step's settings and the
// conversation so far (the journal's entries after the prompt).
type aiTurnRequest struct {
	Model, System, Prompt string
	MaxTokens             int
	Temperature           *float64
	Tools                 []aiToolSpec
	Entries               []aiEntry
}

// aiAnswer is one model answer.
type aiAnswer struct {
	Text       string
	Calls      []aiCall
	StopReason string
	Model      string
	Usage      aiUsage
}

// modelClient asks a provider for one answer.
type modelClient interface {
	turn(ctx context.Context, req aiTurnRequest) (aiAnswer, error)
}

// newModelClient is the client of connection type t at baseURL.
func newModelClient(t automation.ConnectionType, baseURL, key string, hc *http.Client) (modelClient, error) {
	base := strings.TrimSuffix(baseURL, "/")
	switch t {
	case automation.ConnectionOpenAI:
		return openaiClient{url: base + "/chat/completions", key: key, hc: hc, openAI: isOpenAIHost(base)}, nil
	case automation.ConnectionAnthropic:
		return anthropicClient{url: base + "/v1/messages", key: key, hc: hc}, nil
	}
	return nil, fmt.Errorf("connection type %s is not a model provider: use an OPENAI or ANTHROPIC connection", t)
}

// isOpenAIHost reports whether base is OpenAI's own API, whose newer
// models take max_completion_tokens and refuse max_tokens; compatible
// servers (Ollama, vLLM, LM Studio) know max_tokens.
func isOpenAIHost(base string) bool {
	u, err := url.Parse(base)
	return err == nil && u.Hostname() == "api.openai.com"
}

// schemaMap is a tool's JSON Schema as a provider takes it: an object.
func schemaMap(raw json.RawMessage) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	if m["type"] == nil {
		m["type"] = "object"
	}
	return m
}

// MaxAIAnswerBytes bounds a model's answer as read from the wire.
const MaxAIAnswerBytes = 4 << 20

// postModel sends one request to a provider and decodes its 2xx answer into
// out; any other status is a *modelError with the provider's message.
func postModel(ctx context.Context, hc *http.Client, url string, hdr map[string]string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAIAnswerBytes+1))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		msg := http.StatusText(resp.StatusCode)
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
		}
		return &modelError{status: resp.StatusCode, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After")),
			msg: fmt.Sprintf("the model provider answered %d: %s", resp.StatusCode, clipMessage(msg))}
	}
	if len(data) > MaxAIAnswerBytes {
		return fmt.Errorf("the model's answer is larger than %d bytes", MaxAIAnswerBytes)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("the model's answer is not the provider's JSON: %w", err)
	}
	return nil
}

// openaiClient speaks OpenAI's chat completions, which every
// OpenAI-compatible server serves.
type openaiClient struct {
	url, key string
	hc       *http.Client
	openAI   bool
}

type openaiMessage struct {
	Role       string           `json:"role"`
	Content    *string          `json:"content"`
	ToolCalls  []openaiToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openaiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func (c openaiClient) turn(ctx context.Context, req aiTurnRequest) (aiAnswer, error) {
	text := func(s string) *string { return &s }
	var msgs []openaiMessage
	if req.System != "" {
		msgs = append(msgs, openaiMessage{Role: "system", Content: text(req.System)})
	}
	msgs = append(msgs, openaiMessage{Role: "user", Content: text(req.Prompt)})
	for _, e := range req.Entries {
		switch e.Kind {
		case entryModel:
			m := openaiMessage{Role: "assistant"}
			if e.Text != "" || len(e.Calls) == 0 {
				m.Content = text(e.Text)
			}
			for _, call := range e.Calls {
				tc := openaiToolCall{ID: call.ID, Type: "function"}
				tc.Function.Name, tc.Function.Arguments = call.Name, string(call.Arguments)
				m.ToolCalls = append(m.ToolCalls, tc)
			}
			msgs = append(msgs, m)
		case entryTool:
			msgs = append(msgs, openaiMessage{Role: "tool", ToolCallID: e.CallID, Content: text(e.content())})
		case entryRepair:
			msgs = append(msgs, openaiMessage{Role: "user", Content: text(e.Text)})
		}
	}
	body := map[string]any{"model": req.Model, "messages": msgs}
	if c.openAI {
		body["max_completion_tokens"] = req.MaxTokens
	} else {
		body["max_tokens"] = req.MaxTokens
	}
	if req.Temperature != nil {
		body["temperature"] = *req.Temperature
	}
	if len(req.Tools) > 0 {
		var tools []any
		for _, t := range req.Tools {
			tools = append(tools, map[string]any{"type": "function", "function": map[string]any{
				"name": t.Name, "description": t.Description, "parameters": schemaMap(t.Schema)}})
		}
		body["tools"] = tools
	}
	var resp struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content   *string          `json:"content"`
				ToolCalls []openaiToolCall `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens     int64 `json:"prompt_tokens"`
			CompletionTokens int64 `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := postModel(ctx, c.hc, c.url, map[string]string{"Authorization": "Bearer " + c.key}, body, &resp); err != nil {
		return aiAnswer{}, err
	}
	if len(resp.Choices) == 0 {
		return aiAnswer{}, errors.New("the model's answer has no choices")
	}
	ch := resp.Choices[0]
	out := aiAnswer{StopReason: ch.FinishReason, Model: resp.Model,
		Usage: aiUsage{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens}}
	if ch.Message.Content != nil {
		out.Text = *ch.Message.Content
	}
	for _, tc := range ch.Message.ToolCalls {
		args := json.RawMessage(tc.Function.Arguments)
		if !json.Valid(args) {
			args, _ = json.Marshal(tc.Function.Arguments) // kept as the text it was
		}
		out.Calls = append(out.Calls, aiCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	return out, nil
}

// anthropicClient speaks Anthropic's Messages API.
type anthropicClient struct {
	url, key string
	hc       *http.Client
}

// AnthropicVersion is the Messages API version requests ask for.
const AnthropicVersion = "2023-06-01"

type anthropicMessage struct {
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

func (c anthropicClient) turn(ctx context.Context, req aiTurnRequest) (aiAnswer, error) {
	textBlock := func(s string) any { return map[string]any{"type": "text", "text": s} }
	msgs := []anthropicMessage{{Role: "user", Content: []any{textBlock(req.Prompt)}}}
	var results []any
	flush := func() {
		if len(results) > 0 {
			msgs = append(msgs, anthropicMessage{Role: "user", Content: results})
			results = nil
		}
	}
	for _, e := range req.Entries {
		switch e.Kind {
		case entryModel:
			flush()
			var blocks []any
			if e.Text != "" {
				blocks = append(blocks, textBlock(e.Text))
			}
			for _, call := range e.Calls {
				blocks = append(blocks, map[string]any{"type": "tool_use", "id": call.ID, "name": call.Name, "input": call.Arguments})
			}
			if len(blocks) == 0 {
				blocks = append(blocks, textBlock("(no answer)")) // the API refuses an empty turn
			}
			msgs = append(msgs, anthropicMessage{Role: "assistant", Content: blocks})
		case entryTool:
			results = append(results, map[string]any{"type": "tool_result", "tool_use_id": e.CallID,
				"content": e.content(), "is_error": e.Error != ""})
		case entryRepair:
			flush()
			msgs = append(msgs, anthropicMessage{Role: "user", Content: []any{textBlock(e.Text)}})
		}
	}
	flush()
	body := map[string]any{"model": req.Model, "max_tokens": req.MaxTokens, "messages": msgs}
	if req.System != "" {
		body["system"] = req.System
	}
	if req.Temperature != nil {
		body["temperature"] = *req.Temperature
	}
	if len(req.Tools) > 0 {
		var tools []any
		for _, t := range req.Tools {
			tools = append(tools, map[string]any{"name": t.Name, "description": t.Description, "input_schema": schemaMap(t.Schema)})
		}
		body["tools"] = tools
	}
	var resp struct {
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Type  string          `json:"type"`
			Text  string          `json:"text"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		} `json:"content"`
		Usage struct {
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"usage"`
	}
	hdr := map[string]string{"X-Api-Key": c.key, "Anthropic-Version": AnthropicVersion}
	if err := postModel(ctx, c.hc, c.url, hdr, body, &resp); err != nil {
		return aiAnswer{}, err
	}
	out := aiAnswer{StopReason: resp.StopReason, Model: resp.Model,
		Usage: aiUsage{InputTokens: resp.Usage.InputTokens, OutputTokens: resp.Usage.OutputTokens}}
	var texts []string
	for _, b := range resp.Content {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "tool_use":
			args := b.Input
			if len(args) == 0 {
				args = json.RawMessage(`{}`)
			}
			out.Calls = append(out.Calls, aiCall{ID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Text = strings.Join(texts, "")
	return out, nil
}

// modelError is a provider's refusal: its status and the wait it asked for.
type modelError struct {
	status     int
	retryAfter time.Duration
	msg        string
}

func (e *modelError) Error() string { return e.msg }

// parseRetryAfter reads Retry-After in seconds (what model providers
// send); an HTTP date is taken as a minute.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && n >= 0 {
		return time.Duration(n * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && !t.IsZero() {
		return AIMaxRetryAfter
	}
	return 0
}
