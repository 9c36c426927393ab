package flowdef

import (
	"regexp"
	"strings"
)

// AITool is one tool an AI step's model may call: exactly one of Flow (a
// flow of the project, by name, run as a waited CALL_FLOW) and MCP (a tool
// of an MCP server).
type AITool struct {
	Flow string      `json:"flow,omitempty"`
	MCP  *MCPToolRef `json:"mcp,omitempty"`
}

// MCPToolRef names a tool of the MCP server an MCP connection reaches.
type MCPToolRef struct {
	Connection string `json:"connection"`
	Tool       string `json:"tool"`
}

// Bounds of AI steps (docs/reliability.md).
const (
	DefaultAIMaxTurns  = 8
	MaxAITurns         = 32
	DefaultAIMaxTokens = 4096
	MaxAIMaxTokens     = 128_000
	MaxAITools         = 32
	MaxAIPromptBytes   = 64 << 10
	// AIRepairTurns are the turns an answer that does not meet the
	// step's output schema is given to be repaired before the step fails.
	AIRepairTurns = 2
)

func init() {
	register(Rules{
		Type: StepAI,
		Fields: []string{"connection", "model", "system", "prompt", "output", "tools", "maxTurns",
			"maxTokens", "temperature"},
		SideEffects: true,
		Parks: func(st *Step) (string, string) {
			for _, t := range st.Tools {
				if t.Flow != "" {
					return "an AI step with flow tools waits for the flows it calls, which it cannot do inside FOR_EACH (move it out of the loop)",
						"an AI step with flow tools waits for the flows it calls, which onError steps cannot do"
				}
			}
			return "", ""
		},
		Check: checkAI,
	})
}

func checkAI(c Checks, st *Step, at string) error {
	if err := CheckText(at+".connection", st.Connection, 200); err != nil {
		return Invalid(`%s.connection is required for AI: the name of an OPENAI or ANTHROPIC connection`, at)
	}
	if err := CheckText(at+".model", st.Model, 200); err != nil {
		return Invalid(`%s.model is required for AI: the model's name, e.g. "gpt-4o-mini" or "claude-sonnet-4-5"`, at)
	}
	if strings.TrimSpace(st.Prompt) == "" {
		return Invalid(`%s.prompt is required for AI: the user's message, a template such as "{{ trigger.body.text }}"`, at)
	}
	for field, v := range map[string]string{"prompt": st.Prompt, "system": st.System} {
		if len(v) > MaxAIPromptBytes {
			return Invalid("%s.%s is %d bytes; at most %d are allowed", at, field, len(v), MaxAIPromptBytes)
		}
		if err := c.Template(v); err != nil {
			return Invalid("%s.%s: %v", at, field, err)
		}
	}
	if len(st.Output) > 0 {
		if err := CheckSchema(at+".output", st.Output); err != nil {
			return err
		}
	}
	if st.MaxTurns == 0 {
		st.MaxTurns = DefaultAIMaxTurns
	}
	if st.MaxTurns < 1 || st.MaxTurns > MaxAITurns {
		return Invalid("%s.maxTurns %d: use 1 to %d", at, st.MaxTurns, MaxAITurns)
	}
	if st.MaxTokens == 0 {
		st.MaxTokens = DefaultAIMaxTokens
	}
	if st.MaxTokens < 1 || st.MaxTokens > MaxAIMaxTokens {
		return Invalid("%s.maxTokens %d: use 1 to %d", at, st.MaxTokens, MaxAIMaxTokens)
	}
	if t := st.Temperature; t != nil && (*t < 0 || *t > 2) {
		return Invalid("%s.temperature %v: use 0 to 2", at, *t)
	}
	if len(st.Tools) > MaxAITools {
		return Invalid("%s.tools: %d tools; at most %d are allowed", at, len(st.Tools), MaxAITools)
	}
	seen := map[string]bool{}
	for i, t := range st.Tools {
		here := at + ".tools[" + itoa(i) + "]"
		var name string
		switch {
		case t.Flow != "" && t.MCP != nil:
			return Invalid(`%s: a tool is either {"flow": "<flow name>"} or {"mcp": {"connection", "tool"}}, not both`, here)
		case t.Flow != "":
			if err := CheckText(here+".flow", t.Flow, 200); err != nil {
				return err
			}
			name = ToolName(t.Flow)
		case t.MCP != nil:
			if err := CheckText(here+".mcp.connection", t.MCP.Connection, 200); err != nil {
				return err
			}
			if err := CheckMCPToolName(here+".mcp.tool", t.MCP.Tool); err != nil {
				return err
			}
			name = ToolName(t.MCP.Tool)
		default:
			return Invalid(`%s: a tool is {"flow": "<flow name>"} or {"mcp": {"connection": "<MCP connection>", "tool": "<name>"}}`, here)
		}
		if seen[name] {
			return Invalid("%s: two tools are both named %q for the model; keep one", here, name)
		}
		seen[name] = true
	}
	return nil
}

var toolNameRE = regexp.MustCompile(`[^a-z0-9_]+`)

// ToolName is a flow's (or an MCP tool's) name as a model or an MCP
// client sees it: lower case, every run of other characters than a-z, 0-9
// and _ one underscore, at most 64 characters ("Create Ticket" →
// "create_ticket").
func ToolName(name string) string {
	s := strings.Trim(toolNameRE.ReplaceAllString(strings.ToLower(name), "_"), "_")
	if len(s) > 64 {
		s = s[:64]
	}
	if s == "" {
		s = "tool"
	}
	return s
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}
