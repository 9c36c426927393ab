package automation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/flowdef"
)

// Flows as MCP tools (docs/api.md, "MCP"): the project's enabled flows
// whose trigger has an inputSchema are tools an MCP client lists and calls
// through /mcp. A call is a run started like a webhook's (launch: the
// runsPerMinute quota, the queue, the run's admission) and awaited like an
// ON_COMPLETION delivery's (AwaitRun), whose answer is the run's.

// MCPMethod is the trigger method of a run an MCP client's tools/call
// started.
const MCPMethod = "MCP"

// MCPToolFlows lists the ACTIVE flows of project that have a
// trigger.inputSchema, as tools, in the store's order. Two flows whose
// names give the same tool name are both left out (a call could not tell
// them apart), and reported in clashes. The list is bounded by the
// project's flows quota.
func (s *FlowService) MCPToolFlows(ctx context.Context, project string) (tools []ToolFlow, clashes []string, err error) {
	seen := map[string]int{}
	q := ListQuery{Limit: MaxPageSize}
	for {
		page, err := s.store.ListFlows(ctx, project, q)
		if err != nil {
			return nil, nil, wrap("list tool flows", err)
		}
		for _, f := range page.Items {
			if f.Status != FlowActive || len(f.Trigger.InputSchema) == 0 {
				continue
			}
			t := toolFlowOf(f)
			seen[t.Tool]++
			tools = append(tools, t)
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	out := tools[:0]
	for _, t := range tools {
		if seen[t.Tool] > 1 {
			clashes = append(clashes, t.Tool)
			continue
		}
		out = append(out, t)
	}
	return out, clashes, nil
}

// ToolCall is an MCP client's tools/call of a flow.
type ToolCall struct {
	Project string
	FlowID  string
	// Args are the call's arguments, the run's trigger.body; empty or
	// null is {}.
	Args json.RawMessage
	// Depth is the request's X-Flow-Depth (ParseFlowDepth): a flow that
	// calls this server through an MCP step is one link of a chain.
	Depth int
	// Wait is how long the call waits for the run's end.
	Wait time.Duration
	// WatchOnly leaves the run to the queue's executor and only watches
	// its record: the api function on Lambda executes no steps (the
	// runner has the network, the grants and the time for them).
	WatchOnly bool
}

// CallTool starts a run of the flow c names, with the arguments as
// trigger.body and trigger.caller {"mcp": true}, and awaits it: the run is
// returned final, or still RUNNING when c.Wait passed first (it goes on).
// Refusals before the start are *Errors: the chain too deep (508), the flow
// not found, disabled or not a tool, arguments its inputSchema refuses
// (400), the project's runsPerMinute quota (429).
func (s *RunService) CallTool(ctx context.Context, c ToolCall) (Run, error) {
	if c.Depth > MaxFlowDepth {
		return Run{}, LoopDetected(c.Depth)
	}
	f, err := s.callTarget(ctx, c.Project, c.FlowID)
	if err != nil {
		return Run{}, err
	}
	if len(f.Trigger.InputSchema) == 0 {
		return Run{}, &Error{Kind: ErrNotFound, Code: "TOOL_NOT_FOUND",
			Message: fmt.Sprintf("flow %s (%s) has no trigger.inputSchema: it is not a tool", f.ID, f.Name)}
	}
	body := c.Args
	if t := bytes.TrimSpace(body); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		body = json.RawMessage(`{}`)
	}
	var args any
	if err := json.Unmarshal(body, &args); err != nil {
		return Run{}, Invalid("arguments are not JSON: %v", err)
	}
	if err := flowdef.ValidateJSON(f.Trigger.InputSchema, args); err != nil {
		return Run{}, InvalidCode("INVALID_ARGUMENTS", "arguments do not match the tool's inputSchema: %v", err)
	}
	td := TriggerData{
		Method: MCPMethod, Headers: map[string]string{}, Query: map[string]string{},
		Body: body, Caller: &Caller{MCP: true},
	}
	if c.Depth > 0 {
		td.Headers[strings.ToLower(FlowDepthHeader)] = strconv.Itoa(c.Depth)
	}
	// Claimed at its start where the queue can (flowd): it is executed in
	// this request, as an ON_COMPLETION delivery's is; elsewhere it is
	// queued, and executed here too (racing the runner for the claim)
	// unless WatchOnly.
	run, err := s.launch(ctx, s.newRun(f, td), !c.WatchOnly)
	if err != nil {
		return Run{}, err
	}
	return s.awaitRun(ctx, run, c.Wait, !c.WatchOnly)
}
