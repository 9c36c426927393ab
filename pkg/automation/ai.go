package automation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"flowservice/pkg/flowdef"
)

// AI steps (docs/flows.md, "AI"): a model asked in a durable loop, with
// the project's flows and MCP servers' tools as its tools. The loop runs
// in the engine; what it needs of the domain is here.

// Aliases of the flow language's AI names, for the domain's code.
const StepAI = flowdef.StepAI

type (
	AITool     = flowdef.AITool
	MCPToolRef = flowdef.MCPToolRef
)

// ToolFlow is a flow as an AI step's model sees it as a tool: its name
// for the model (flowdef.ToolName), its description and the JSON Schema
// of its trigger body.
type ToolFlow struct {
	ID          string
	Name        string // the flow's name
	Tool        string // the name the model calls it by
	Description string
	InputSchema json.RawMessage
	Active      bool
}

// ToolFlows finds the flows AI steps name as tools.
type ToolFlows interface {
	// ToolFlow returns the flow of project named name; an *Error with code
	// FLOW_NOT_FOUND when none (or several) carry the name.
	ToolFlow(ctx context.Context, project, name string) (ToolFlow, error)
}

var _ ToolFlows = (*FlowService)(nil)

// ToolFlow finds a flow of project by its name, for an AI step's tool.
func (s *FlowService) ToolFlow(ctx context.Context, project, name string) (ToolFlow, error) {
	var found []Flow
	q := ListQuery{Limit: MaxPageSize}
	for {
		page, err := s.store.ListFlows(ctx, project, q)
		if err != nil {
			return ToolFlow{}, wrap("find tool flow", err)
		}
		for _, f := range page.Items {
			if f.Name == name {
				found = append(found, f)
			}
		}
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	switch len(found) {
	case 0:
		return ToolFlow{}, &Error{Kind: ErrNotFound, Code: "FLOW_NOT_FOUND",
			Message: fmt.Sprintf("tool flow %q: this project has no flow of that name (was it renamed or deleted?)", ClipID(name))}
	case 1:
	default:
		return ToolFlow{}, &Error{Kind: ErrInvalid, Code: "FLOW_AMBIGUOUS",
			Message: fmt.Sprintf("tool flow %q: %d flows of this project have that name: rename all but one", ClipID(name), len(found))}
	}
	return toolFlowOf(found[0]), nil
}

func toolFlowOf(f Flow) ToolFlow {
	schema := f.Trigger.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	return ToolFlow{ID: f.ID, Name: f.Name, Tool: flowdef.ToolName(f.Name), Description: f.Description,
		InputSchema: schema, Active: f.Status == FlowActive}
}

// aiRefs checks what an AI step names in the project: its flow tools are
// flows of the project, its MCP tools' connections (when the project has
// them) MCP connections. Its connection is found by name when it runs, as
// an HTTP step's is, so that a flow file works on every installation.
func (s *flowValidator) aiRefs(ctx context.Context, f *Flow, st *Step, at string) error {
	for i, t := range st.Tools {
		if t.MCP != nil {
			field := fmt.Sprintf("%s.tools[%d].mcp.connection", at, i)
			if err := s.namedConnectionKind(ctx, f, t.MCP.Connection, field, "an MCP tool", ConnectionMCP); err != nil {
				return err
			}
			continue
		}
		if t.Flow == "" || t.Flow == f.Name {
			continue
		}
		probe := Step{Flow: t.Flow, Name: st.Name}
		if err := s.resolveCalledFlow(ctx, f, &probe, fmt.Sprintf("%s.tools[%d]", at, i)); err != nil {
			return err
		}
	}
	return nil
}

// AIContinues reports whether a recorded AI step handed its loop to the
// run's next attempt: the attempt's time no longer held a model request
// (the run's timeout, a Lambda invocation's end), so the run is parked due
// at once and the next attempt goes on from the step's journal. Its output
// is then {"journal": [...], "continue": true, ...}.
func AIContinues(sr StepResult) bool {
	if sr.Type != StepAI || sr.Status != StepSucceeded || !bytes.Contains(sr.Output, []byte(`"continue"`)) {
		return false
	}
	var out struct {
		Continue bool `json:"continue"`
	}
	return json.Unmarshal(sr.Output, &out) == nil && out.Continue
}
