package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	oshared "github.com/openai/openai-go/v3/shared"

	"flowservice/pkg/automation"
)

// The model providers of AI steps, through their official SDKs
// (docs/architecture.md, "Dependencies"). The SDKs get an *http.Client
// over the engine's guarded transport (aiClient), never retry themselves
// (the step does, aiTurn, so that its waits follow the engine's clock) and
// never read the process environment: every option is explicit.

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
	switch t {
	case automation.ConnectionOpenAI:
		return openaiClient{svc: openai.NewChatCompletionService(
			ooption.WithBaseURL(baseURL), ooption.WithAPIKey(key), ooption.WithHTTPClient(hc), ooption.WithMaxRetries(0))}, nil
	case automation.ConnectionAnthropic:
		return anthropicClient{svc: anthropic.NewMessageService(
			aoption.WithBaseURL(baseURL), aoption.WithAPIKey(key), aoption.WithHTTPClient(hc), aoption.WithMaxRetries(0))}, nil
	}
	return nil, fmt.Errorf("connection type %s is not a model provider: use an OPENAI or ANTHROPIC connection", t)
}

// schemaMap is a JSON Schema as the SDKs take it.
func schemaMap(raw json.RawMessage) map[string]any {
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	if m["type"] == nil {
		m["type"] = "object"
	}
	return m
}

type openaiClient struct{ svc openai.ChatCompletionService }

func (c openaiClient) turn(ctx context.Context, req aiTurnRequest) (aiAnswer, error) {
	var msgs []openai.ChatCompletionMessageParamUnion
	if req.System != "" {
		msgs = append(msgs, openai.SystemMessage(req.System))
	}
	msgs = append(msgs, openai.UserMessage(req.Prompt))
	for _, e := range req.Entries {
		switch e.Kind {
		case entryModel:
			a := openai.ChatCompletionAssistantMessageParam{}
			if e.Text != "" || len(e.Calls) == 0 {
				a.Content.OfString = param.NewOpt(e.Text)
			}
			for _, call := range e.Calls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: call.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: call.Name, Arguments: string(call.Arguments)}}})
			}
			msgs = append(msgs, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case entryTool:
			msgs = append(msgs, openai.ToolMessage(e.content(), e.CallID))
		case entryRepair:
			msgs = append(msgs, openai.UserMessage(e.Text))
		}
	}
	p := openai.ChatCompletionNewParams{Model: oshared.ChatModel(req.Model), Messages: msgs,
		MaxCompletionTokens: param.NewOpt(int64(req.MaxTokens))}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	for _, t := range req.Tools {
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(oshared.FunctionDefinitionParam{
			Name: t.Name, Description: param.NewOpt(t.Description), Parameters: schemaMap(t.Schema)}))
	}
	resp, err := c.svc.New(ctx, p)
	if err != nil {
		return aiAnswer{}, providerError(err)
	}
	if len(resp.Choices) == 0 {
		return aiAnswer{}, errors.New("the model's answer has no choices")
	}
	ch := resp.Choices[0]
	out := aiAnswer{Text: ch.Message.Content, StopReason: ch.FinishReason, Model: resp.Model,
		Usage: aiUsage{InputTokens: resp.Usage.PromptTokens, OutputTokens: resp.Usage.CompletionTokens}}
	for _, tc := range ch.Message.ToolCalls {
		args := json.RawMessage(tc.Function.Arguments)
		if !json.Valid(args) {
			args, _ = json.Marshal(tc.Function.Arguments) // kept as the text it was
		}
		out.Calls = append(out.Calls, aiCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args})
	}
	return out, nil
}

type anthropicClient struct{ svc anthropic.MessageService }

func (c anthropicClient) turn(ctx context.Context, req aiTurnRequest) (aiAnswer, error) {
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(req.Prompt))}
	var results []anthropic.ContentBlockParamUnion
	flush := func() {
		if len(results) > 0 {
			msgs = append(msgs, anthropic.NewUserMessage(results...))
			results = nil
		}
	}
	for _, e := range req.Entries {
		switch e.Kind {
		case entryModel:
			flush()
			var blocks []anthropic.ContentBlockParamUnion
			if e.Text != "" {
				blocks = append(blocks, anthropic.NewTextBlock(e.Text))
			}
			for _, call := range e.Calls {
				blocks = append(blocks, anthropic.NewToolUseBlock(call.ID, call.Arguments, call.Name))
			}
			if len(blocks) == 0 {
				blocks = append(blocks, anthropic.NewTextBlock("(no answer)"))
			}
			msgs = append(msgs, anthropic.NewAssistantMessage(blocks...))
		case entryTool:
			results = append(results, anthropic.NewToolResultBlock(e.CallID, e.content(), e.Error != ""))
		case entryRepair:
			flush()
			msgs = append(msgs, anthropic.NewUserMessage(anthropic.NewTextBlock(e.Text)))
		}
	}
	flush()
	p := anthropic.MessageNewParams{Model: anthropic.Model(req.Model), MaxTokens: int64(req.MaxTokens), Messages: msgs}
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	var opts []aoption.RequestOption
	if req.Temperature != nil {
		// The v2 SDK dropped the field (deprecated by the API for newer
		// models); older models and compatible gateways still take it.
		opts = append(opts, aoption.WithJSONSet("temperature", *req.Temperature))
	}
	for _, t := range req.Tools {
		m := schemaMap(t.Schema)
		in := anthropic.ToolInputSchemaParam{Properties: m["properties"], ExtraFields: map[string]any{}}
		if r, ok := m["required"].([]any); ok {
			for _, n := range r {
				if s, ok := n.(string); ok {
					in.Required = append(in.Required, s)
				}
			}
		}
		for k, v := range m {
			if k != "type" && k != "properties" && k != "required" {
				in.ExtraFields[k] = v
			}
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{
			Name: t.Name, Description: anthropic.String(t.Description), InputSchema: in}})
	}
	resp, err := c.svc.New(ctx, p, opts...)
	if err != nil {
		return aiAnswer{}, providerError(err)
	}
	out := aiAnswer{StopReason: string(resp.StopReason), Model: string(resp.Model),
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

// providerError turns an SDK error into a modelError when the provider
// answered, keeping the chain otherwise (a transport refusal, a timeout).
func providerError(err error) error {
	status, header, msg := 0, http.Header(nil), ""
	var oe *openai.Error
	var ae *anthropic.Error
	switch {
	case errors.As(err, &oe):
		status, msg = oe.StatusCode, oe.Message
		if oe.Response != nil {
			header = oe.Response.Header
		}
	case errors.As(err, &ae):
		status, msg = ae.StatusCode, ae.Error()
		if ae.Response != nil {
			header = ae.Response.Header
		}
	default:
		return err
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &modelError{status: status, retryAfter: parseRetryAfter(header.Get("Retry-After")),
		msg: fmt.Sprintf("the model provider answered %d: %s", status, clipMessage(msg))}
}

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
