package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowdef"
)

// The AI step (docs/flows.md, "AI"): a durable agent loop. Every model
// answer and every tool result is an entry of the step's journal, written
// to the run's record (journalNow) before the loop goes on; an attempt
// that resumes the step (a retry, a restart after a crash, the wake-up
// after a flow tool ended) rebuilds the conversation from the entries and
// goes on after the last one: a recorded turn is never requested again, a
// finished tool call never repeated.
//
// While the loop runs, the step's recorded output is its journal
// ({"journal": [...], ...}); waiting for a flow tool it is also
// {"waiting": true, "runId"} (automation.WaitingCall), which parks the run
// as a waiting CALL_FLOW does. An attempt whose time (the run's timeout,
// the Lambda invocation's) no longer holds a model request ends the loop
// with {"continue": true} (automation.AIContinues) once it has made
// progress: the run is parked due at once, and the next attempt (the next
// invocation) goes on from the journal with its own time.
//
// Before each model request the project's aiTokensPerDay is asked
// (automation.AIMeter); a project over it fails the step with
// QUOTA_EXCEEDED. Each turn's tokens are counted once the turn is
// journaled: the journal is what keeps a turn from being requested (and
// paid) twice. The finished step's output is the answer
// ({"text", "json"?, "toolCalls", "turns", "usage", "model", "stopReason"}).

// Kinds of journal entries.
const (
	entryModel  = "model"  // a model answer
	entryTool   = "tool"   // a tool call's result (or, Pending, a flow tool under way)
	entryRepair = "repair" // the message asking for an answer that meets the output schema
)

// aiEntry is one entry of an AI step's journal.
type aiEntry struct {
	Kind string `json:"kind"`
	// model
	Text       string   `json:"text,omitempty"`
	Calls      []aiCall `json:"calls,omitempty"`
	StopReason string   `json:"stopReason,omitempty"`
	Model      string   `json:"model,omitempty"`
	Usage      *aiUsage `json:"usage,omitempty"`
	// tool: Index counts the step's tool calls from 0
	Index   int             `json:"index,omitempty"`
	CallID  string          `json:"callId,omitempty"`
	Tool    string          `json:"tool,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   string          `json:"error,omitempty"`
	Pending string          `json:"pending,omitempty"` // the flow tool's run, not ended yet
}

// content is a tool entry as the model reads it.
func (e aiEntry) content() string {
	if e.Error != "" {
		return "error: " + e.Error
	}
	return string(e.Result)
}

// aiProgress is the recorded output of an AI step under way.
type aiProgress struct {
	Journal []aiEntry `json:"journal"`
	// MCPTools are the MCP tools as their servers listed them when the
	// step began: a resumed attempt offers the model the same tools
	// without listing them again.
	MCPTools []mcpListed `json:"mcpTools,omitempty"`
	Waiting  bool        `json:"waiting,omitempty"`
	RunID    string      `json:"runId,omitempty"`
	// Continue: the attempt's time ran short; the next one goes on.
	Continue bool    `json:"continue,omitempty"`
	Turns    int     `json:"turns"`
	Usage    aiUsage `json:"usage"`
}

// aiLoop is one attempt's view of an AI step.
type aiLoop struct {
	x       *execution
	s       automation.Step
	key     string // the step's journal key
	client  modelClient
	req     aiTurnRequest
	tools   map[string]aiToolImpl
	entries []aiEntry
	secrets []string // the connection's key, masked wherever it could show
	// moved says this attempt journaled a turn or a tool result: only
	// then may it hand the loop to the next attempt (continueLater).
	moved bool
	// mcpTools are the step's MCP tools as listed (kept in its journal),
	// sessions its open MCP sessions by connection name (step_mcp.go).
	mcpTools []mcpListed
	mcpLists map[string]map[string]mcpListed // tools/list by connection name
	sessions map[string]*mcpSession
}

// aiToolImpl is how the loop runs a tool the model calls.
type aiToolImpl struct {
	flow *automation.ToolFlow
	mcp  *mcpListed
}

// aiStep runs an AI step.
func (x *execution) aiStep(ctx context.Context, s automation.Step) (any, error) {
	l := &aiLoop{x: x, s: s, key: journalKey(s.Name, x.iter), tools: map[string]aiToolImpl{}}
	defer l.closeSessions()
	var listed []mcpListed
	if prev, ok := x.sh.previous[l.key]; ok && prev.Type == automation.StepAI {
		var p aiProgress
		if json.Unmarshal(prev.Output, &p) == nil {
			l.entries, listed = p.Journal, p.MCPTools
		}
	}
	if se := l.prepare(ctx, listed); se != nil {
		return nil, l.withProgress(se)
	}
	out, se := l.run(ctx)
	if se != nil {
		return nil, l.withProgress(se)
	}
	return out, nil
}

// withProgress keeps the journal as a failed step's output, so that the
// run's next attempt resumes after it.
func (l *aiLoop) withProgress(se *stepError) *stepError {
	se.msg = automation.MaskText(se.msg, automation.SecretMasks(l.secrets))
	if len(l.entries) > 0 && se.output == nil {
		se.output = l.progress("")
	}
	return se
}

// prepare reads the connection, renders the texts and finds the tools;
// MCP tools listed by an earlier attempt are taken from listed.
func (l *aiLoop) prepare(ctx context.Context, listed []mcpListed) *stepError {
	x, s := l.x, l.s
	cred, se := x.credential(ctx, s)
	if se != nil {
		return se
	}
	if cred.conn.ID == "" {
		return &stepError{msg: "connection is required: an OPENAI or ANTHROPIC connection"}
	}
	if !automation.IsModelConnection(cred.conn.Type) {
		return &stepError{msg: fmt.Sprintf("connection %s (%s) is %s: an AI step uses an OPENAI or ANTHROPIC connection", cred.conn.ID, cred.conn.Name, cred.conn.Type)}
	}
	l.secrets = cred.secrets
	client, err := newModelClient(cred.conn.Type, cred.baseURL, cred.key, x.aiHTTPClient(cred.conn, ""))
	if err != nil {
		return fail(false, err)
	}
	l.client = client
	l.req = aiTurnRequest{Model: s.Model, MaxTokens: s.MaxTokens, Temperature: s.Temperature}
	if l.req.MaxTokens <= 0 {
		l.req.MaxTokens = flowdef.DefaultAIMaxTokens
	}
	if l.req.System, err = x.e.checker.evalText(s.System, x.env); err != nil {
		return fail(false, fmt.Errorf("system: %w", err))
	}
	if l.req.Prompt, err = x.e.checker.evalText(s.Prompt, x.env); err != nil {
		return fail(false, fmt.Errorf("prompt: %w", err))
	}
	if len(s.Output) > 0 {
		l.req.System = strings.TrimSpace(l.req.System + "\n\nAnswer with one JSON value only, no other text, that meets this JSON Schema:\n" + string(s.Output))
	}
	for _, t := range s.Tools {
		switch {
		case t.Flow != "":
			if x.e.toolFlows == nil {
				return &stepError{msg: "flow tools are not available in this deployment"}
			}
			tf, err := x.e.toolFlows.ToolFlow(ctx, x.flow.Project, t.Flow)
			if err != nil {
				var ae *automation.Error
				if errors.As(err, &ae) {
					return &stepError{msg: ae.Message}
				}
				return &stepError{msg: "the step's tool flows could not be read; the run will be retried", retryable: true}
			}
			l.tools[tf.Tool] = aiToolImpl{flow: &tf}
			l.req.Tools = append(l.req.Tools, aiToolSpec{Name: tf.Tool, Description: tf.Description, Schema: tf.InputSchema})
		case t.MCP != nil:
			spec, se := l.mcpTool(ctx, *t.MCP, listed)
			if se != nil {
				return se
			}
			name := flowdef.ToolName(t.MCP.Tool)
			l.tools[name] = aiToolImpl{mcp: &spec}
			l.req.Tools = append(l.req.Tools, aiToolSpec{Name: name, Description: spec.Description, Schema: spec.Schema})
			l.mcpTools = append(l.mcpTools, spec)
		}
	}
	return nil
}

// run goes on from the journal until the model's final answer.
func (l *aiLoop) run(ctx context.Context) (any, *stepError) {
	maxTurns := l.s.MaxTurns
	if maxTurns <= 0 {
		maxTurns = flowdef.DefaultAIMaxTurns
	}
	for {
		if ctx.Err() != nil {
			return nil, &stepError{msg: "the run ended during the step", retryable: true}
		}
		last := l.lastModel()
		if last >= 0 && len(l.entries[last].Calls) > 0 {
			// Tool calls of the last answer first; then the next turn.
			waiting, se := l.runTools(ctx, last)
			if se != nil {
				return nil, se
			}
			if waiting != "" {
				return l.progress(waiting), nil
			}
		} else if last >= 0 && last == len(l.entries)-1 {
			out, se := l.final(ctx, l.entries[last])
			if se != nil || out != nil {
				return out, se
			}
			continue // a repair entry was added
		}
		if l.turns() >= maxTurns {
			return nil, &stepError{msg: fmt.Sprintf("the model did not finish within maxTurns (%d turns)", maxTurns)}
		}
		if l.moved && l.canPark() && !l.x.e.timeForTurn(ctx) {
			p := l.progress("")
			p.Continue = true
			return p, nil
		}
		if se := l.admitTurn(ctx); se != nil {
			return nil, se
		}
		if se := l.ask(ctx); se != nil {
			return nil, se
		}
	}
}

// lastModel is the index of the last model entry, -1 before the first.
func (l *aiLoop) lastModel() int {
	for i := len(l.entries) - 1; i >= 0; i-- {
		if l.entries[i].Kind == entryModel {
			return i
		}
	}
	return -1
}

func (l *aiLoop) turns() int {
	n := 0
	for _, e := range l.entries {
		if e.Kind == entryModel {
			n++
		}
	}
	return n
}

func (l *aiLoop) usage() aiUsage {
	var u aiUsage
	for _, e := range l.entries {
		if e.Usage != nil {
			u.InputTokens += e.Usage.InputTokens
			u.OutputTokens += e.Usage.OutputTokens
		}
	}
	return u
}

// toolCount is the number of tool entries: the index of the next call.
func (l *aiLoop) toolCount() int {
	n := 0
	for _, e := range l.entries {
		if e.Kind == entryTool {
			n++
		}
	}
	return n
}

// ask requests the next turn and journals it.
func (l *aiLoop) ask(ctx context.Context) *stepError {
	req := l.req
	req.Entries = l.entries
	ans, se := l.x.aiTurn(ctx, l.client, req)
	if se != nil {
		return se
	}
	u := ans.Usage
	l.entries = append(l.entries, aiEntry{Kind: entryModel, Text: ans.Text, Calls: ans.Calls,
		StopReason: ans.StopReason, Model: ans.Model, Usage: &u})
	if se := l.journal(ctx); se != nil {
		return se
	}
	if m := l.x.e.aiTokens; m != nil {
		if err := m.CountAITokens(ctx, l.x.flow.Project, u.InputTokens+u.OutputTokens); err != nil {
			// The turn is journaled: the next attempt goes on after it.
			l.x.e.log.WarnContext(ctx, "count model tokens", "run", l.x.run.ID, "step", l.s.Name, "err", err)
			return &stepError{msg: "the model's tokens could not be counted; the run will be retried", retryable: true}
		}
	}
	return nil
}

// admitTurn asks the project's aiTokensPerDay for one more turn.
func (l *aiLoop) admitTurn(ctx context.Context) *stepError {
	m := l.x.e.aiTokens
	if m == nil {
		return nil
	}
	err := m.AdmitAITurn(ctx, l.x.flow.Project)
	if err == nil {
		return nil
	}
	var ae *automation.Error
	if errors.As(err, &ae) && ae.Code == "QUOTA_EXCEEDED" {
		return &stepError{msg: ae.Code + ": " + ae.Message} // named, for what reads the run
	}
	l.x.e.log.WarnContext(ctx, "read model tokens", "run", l.x.run.ID, "step", l.s.Name, "err", err)
	return &stepError{msg: "the project's model tokens could not be read; the run will be retried", retryable: true}
}

// canPark reports whether the step may hand its loop over: only where
// a run can park (not inside FOR_EACH, not in onError), as a flow tool's
// wait; elsewhere the loop goes on, bounded by the attempt's time.
func (l *aiLoop) canPark() bool { return l.x.iter == "" && !l.x.sh.onError }

// timeForTurn reports whether ctx leaves time for one model request
// (AIModelTimeout) before its deadline. Deadlines are the wall clock's,
// whatever clock the engine was given.
func (e *Engine) timeForTurn(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) >= AIModelTimeout
}

// aiTurn asks the model once, retrying 429, 5xx and network failures up
// to AIModelAttempts, each request within AIModelTimeout.
func (x *execution) aiTurn(ctx context.Context, c modelClient, req aiTurnRequest) (aiAnswer, *stepError) {
	var last *stepError
	for attempt := 1; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, AIModelTimeout)
		ans, err := c.turn(rctx, req)
		timedOut := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return ans, nil
		}
		var se *stepError
		var me *modelError
		var wait time.Duration
		switch {
		case errors.As(err, &se):
			return aiAnswer{}, se // refused before sending: allowedHosts, the outbound quota
		case ctx.Err() != nil:
			return aiAnswer{}, &stepError{msg: "the run ended while the model answered", retryable: true}
		case timedOut:
			last = &stepError{msg: fmt.Sprintf("the model did not answer within %s", AIModelTimeout), retryable: true}
		case errors.As(err, &me):
			if me.status != http.StatusTooManyRequests && me.status < 500 {
				return aiAnswer{}, &stepError{msg: me.msg}
			}
			last = &stepError{msg: me.msg, retryable: true, retryAfter: me.retryAfter}
			wait = me.retryAfter
		default:
			var ne net.Error
			if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
				last = &stepError{msg: "the model provider could not be reached: " + err.Error(), retryable: true}
			} else {
				last = &stepError{msg: "the model request failed: " + err.Error(), retryable: true}
			}
		}
		if attempt >= AIModelAttempts || wait > AIMaxRetryAfter {
			return aiAnswer{}, last
		}
		if wait == 0 {
			d := time.Second << (attempt - 1)
			wait = d/2 + rand.N(d/2+1)
		}
		if !x.e.sleep(ctx, wait) {
			return aiAnswer{}, &stepError{msg: "the run ended while the step waited to ask the model again", retryable: true}
		}
	}
}

// runTools runs the calls of model entry m that have no result yet, in
// order, journaling each result; it returns the run a flow tool waits
// for, if one does.
func (l *aiLoop) runTools(ctx context.Context, m int) (waiting string, se *stepError) {
	answered := map[string]int{} // call ID -> entry index
	for i := m + 1; i < len(l.entries); i++ {
		if l.entries[i].Kind == entryTool {
			answered[l.entries[i].CallID] = i
		}
	}
	for _, call := range l.entries[m].Calls {
		at, ok := answered[call.ID]
		if ok && l.entries[at].Pending == "" {
			continue
		}
		var e aiEntry
		if ok {
			e = l.entries[at]
		} else {
			e = aiEntry{Kind: entryTool, Index: l.toolCount(), CallID: call.ID, Tool: call.Name}
		}
		impl, known := l.tools[call.Name]
		switch {
		case !known:
			e.Error = fmt.Sprintf("there is no tool %q", call.Name)
		case impl.flow != nil:
			var se *stepError
			if e, se = l.flowTool(ctx, *impl.flow, call, e); se != nil {
				return "", se
			}
		case impl.mcp != nil:
			var se *stepError
			if e, se = l.callMCP(ctx, *impl.mcp, call, e); se != nil {
				return "", se
			}
		}
		if ok {
			l.entries[at] = e
		} else {
			l.entries = append(l.entries, e)
		}
		if e.Pending != "" {
			return e.Pending, nil // parked: the release journals it
		}
		if se := l.journal(ctx); se != nil {
			return "", se
		}
	}
	return "", nil
}

// flowTool runs a flow tool as a waited CALL_FLOW: the first execution
// asks for the child run (started once this run is parked) and marks the
// entry pending; an execution that finds the child ended records its
// answer or its error.
func (l *aiLoop) flowTool(ctx context.Context, tf automation.ToolFlow, call aiCall, e aiEntry) (aiEntry, *stepError) {
	x := l.x
	if x.e.calls == nil {
		e.Error = "flow tools are not available in this deployment"
		return e, nil
	}
	if e.Pending != "" {
		child, err := x.e.calls.CalledRun(ctx, x.flow.Project, tf.ID, e.Pending)
		switch {
		case err == nil && child.Status == automation.RunRunning:
			return e, nil // still running: wait on
		case err == nil:
			out, cerr := x.calledRun(child)
			var se *stepError
			switch {
			case errors.As(cerr, &se):
				e.Pending, e.Error = "", se.msg
			case cerr == nil:
				e.Pending, e.Result = "", l.toolResult(out)
			}
			return e, nil
		case !automation.IsNotFound(err):
			return e, &stepError{msg: "the tool's run could not be read; the run will be retried", retryable: true}
		}
		// Not started (the process died after parking): ask again.
	}
	var args any
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		e.Error = "the arguments are not valid JSON"
		return e, nil
	}
	if len(tf.InputSchema) > 0 {
		if err := flowdef.ValidateJSON(tf.InputSchema, args); err != nil {
			e.Error = "the arguments do not meet the tool's input schema: " + err.Error()
			return e, nil
		}
	}
	depth := x.run.Trigger.Depth() + 1
	if depth > automation.MaxFlowDepth {
		e.Error = fmt.Sprintf("calls nest at most %d deep", automation.MaxFlowDepth)
		return e, nil
	}
	c := automation.Call{
		Project: x.flow.Project, FlowID: tf.ID,
		// Derived from the call's index: a repeated attempt finds the same run.
		RunID: automation.CallRunID(x.run.ID, l.key+"#tool"+strconv.Itoa(e.Index), tf.ID),
		Body:  call.Arguments, Depth: depth,
		Caller: automation.Caller{RunID: x.run.ID, FlowID: x.flow.ID, Wait: true, Secrets: x.secretsIn(args)},
	}
	if err := x.e.calls.CheckCall(ctx, c.Project, c.FlowID); err != nil {
		var ae *automation.Error
		if errors.As(err, &ae) {
			e.Error = ae.Message // told to the model, which may go on without it
			return e, nil
		}
		return e, &stepError{msg: "the tool's flow could not be checked; the run will be retried", retryable: true}
	}
	x.locked(func() { x.sh.calls = append(x.sh.calls, c) })
	e.Pending = c.RunID
	return e, nil
}

// toolResult is a tool's output as the journal keeps it and the model
// reads it, cut to MaxAIToolResultBytes.
func (l *aiLoop) toolResult(out any) json.RawMessage {
	b, err := json.Marshal(out)
	if err != nil {
		b, _ = json.Marshal(fmt.Sprint(out))
	}
	if len(b) > MaxAIToolResultBytes {
		b, _ = json.Marshal(strings.ToValidUTF8(string(b[:MaxAIToolResultBytes]), "") + "… (cut)")
	}
	return b
}

// final checks a final answer: without an output schema it is the
// step's output; with one, a JSON answer that meets it is, else a repair
// entry asks again (AIRepairTurns times) and final returns nil.
func (l *aiLoop) final(ctx context.Context, ans aiEntry) (any, *stepError) {
	out := map[string]any{"text": ans.Text, "toolCalls": l.toolCalls(), "turns": l.turns(),
		"usage": l.usage(), "model": ans.Model, "stopReason": ans.StopReason}
	if len(l.s.Output) == 0 {
		return out, nil
	}
	v, err := parseAnswerJSON(ans.Text)
	if err == nil {
		err = flowdef.ValidateJSON(l.s.Output, v)
	}
	if err == nil {
		out["json"] = v
		return out, nil
	}
	repairs := 0
	for _, e := range l.entries {
		if e.Kind == entryRepair {
			repairs++
		}
	}
	if repairs >= flowdef.AIRepairTurns {
		return nil, &stepError{msg: fmt.Sprintf("the model's answer does not meet the output schema after %d repair turns: %v", repairs, err)}
	}
	l.entries = append(l.entries, aiEntry{Kind: entryRepair,
		Text: "Your answer does not meet the JSON Schema: " + err.Error() + ". Answer again with one JSON value only that meets the schema."})
	if se := l.journal(ctx); se != nil {
		return nil, se
	}
	return nil, nil
}

// parseAnswerJSON reads a model's JSON answer, allowing a Markdown fence.
func parseAnswerJSON(text string) (any, error) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "```") {
		t = strings.TrimPrefix(t, "```json")
		t = strings.TrimPrefix(t, "```")
		t = strings.TrimSuffix(strings.TrimSpace(t), "```")
	}
	var v any
	if err := json.Unmarshal([]byte(t), &v); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %v", err)
	}
	return v, nil
}

// toolCalls are the step's tool calls as its output shows them.
func (l *aiLoop) toolCalls() []any {
	args := map[string]json.RawMessage{}
	for _, e := range l.entries {
		for _, c := range e.Calls {
			args[c.ID] = c.Arguments
		}
	}
	out := []any{}
	for _, e := range l.entries {
		if e.Kind != entryTool || e.Pending != "" {
			continue
		}
		c := map[string]any{"tool": e.Tool, "arguments": recorded(args[e.CallID])}
		if e.Error != "" {
			c["error"] = e.Error
		} else {
			c["result"] = recorded(e.Result)
		}
		out = append(out, c)
	}
	return out
}

// progress is the step's recorded output while under way.
func (l *aiLoop) progress(waiting string) aiProgress {
	return aiProgress{Journal: l.entries, MCPTools: l.mcpTools, Waiting: waiting != "", RunID: waiting, Turns: l.turns(), Usage: l.usage()}
}

// journal records the entries so far as the step's output and has the
// run's journal keep them before the loop goes on.
func (l *aiLoop) journal(ctx context.Context) *stepError {
	x := l.x
	l.moved = true
	raw, err := json.Marshal(l.progress(""))
	if err != nil {
		return fail(false, err)
	}
	raw = automation.MaskJSON(x.maskJSON(raw), automation.SecretMasks(l.secrets))
	if sr := x.cur; sr != nil {
		x.locked(func() { sr.Output = raw })
	}
	if err := x.journalNow(ctx); err != nil {
		return &stepError{msg: "its journal could not be recorded: " + err.Error(), retryable: true}
	}
	return nil
}

// aiHTTPClient is the client the model SDKs send with: the engine's
// guarded transport, the connection's allowedHosts, the project's
// outbound quota, the run's identification, and idem as Idempotency-Key
// when set. Redirects are refused: a model API does not redirect, and a
// redirect could carry the key elsewhere.
func (x *execution) aiHTTPClient(conn automation.Connection, idem string) *http.Client {
	return &http.Client{
		Transport: aiTransport{x: x, conn: conn, idem: idem},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the model provider answered with a redirect, which AI steps do not follow")
		},
	}
}

type aiTransport struct {
	x    *execution
	conn automation.Connection
	idem string
}

func (t aiTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	x := t.x
	host := req.URL.Hostname()
	if t.conn.ID != "" && !automation.HostAllowed(t.conn.AllowedHosts, host) {
		return nil, &stepError{msg: automation.HostRefused(t.conn, host)}
	}
	if se := x.admitOutbound(req.Context(), req.Method+" "+redactURL(req.URL)); se != nil {
		return nil, se
	}
	req = req.Clone(req.Context())
	x.identify(req)
	if t.idem != "" {
		req.Header.Set("Idempotency-Key", t.idem)
	}
	// The traced transport: a model request is a client span of the step
	// and sends traceparent, as HTTP, ACTION and MCP requests do.
	return x.e.sender.RoundTrip(req)
}
