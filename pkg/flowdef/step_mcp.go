package flowdef

import (
	"bytes"
	"fmt"
	"regexp"
	"time"
)

// Limits of MCP steps (docs/reliability.md).
const (
	DefaultMCPTimeout = 60 * time.Second
	MaxMCPTimeout     = 120 * time.Second
	// MaxMCPArgumentsBytes bounds a step's arguments as written.
	MaxMCPArgumentsBytes = 64 << 10
	// MaxMCPToolName is the MCP specification's longest tool name.
	MaxMCPToolName = 128
)

func init() {
	register(Rules{
		Type:        StepMCP,
		Fields:      []string{"connection", "tool", "arguments", "timeout", "retry"},
		SideEffects: true,
		Check:       checkMCP,
	})
}

// mcpToolNameRE is the MCP specification's tool name: 1 to 128 of
// A-Z, a-z, 0-9, _, - and . (no spaces).
var mcpToolNameRE = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,128}$`)

// CheckMCPToolName says why name is not an MCP tool's name, nil if it is.
func CheckMCPToolName(at, name string) error {
	if name == "" {
		return Invalid(`%s is required: the name of a tool the MCP server lists, e.g. "create_issue"`, at)
	}
	if !mcpToolNameRE.MatchString(name) {
		return Invalid(`%s %q is not an MCP tool name: 1 to %d letters, digits, '_', '-' or '.', e.g. "create_issue"`, at, ClipID(name), MaxMCPToolName)
	}
	return nil
}

// checkMCP checks an MCP step.
func checkMCP(c Checks, st *Step, at string) error {
	if err := CheckText(at+".connection", st.Connection, 200); err != nil {
		return Invalid(`%s (the name of an MCP connection, e.g. "github-mcp")`, err.(*Error).Message)
	}
	if err := CheckMCPToolName(at+".tool", st.Tool); err != nil {
		return err
	}
	if len(st.Arguments) > 0 {
		if len(st.Arguments) > MaxMCPArgumentsBytes {
			return Invalid("%s.arguments is %d bytes; at most %d are allowed", at, len(st.Arguments), MaxMCPArgumentsBytes)
		}
		if t := bytes.TrimSpace(st.Arguments); len(t) == 0 || t[0] != '{' {
			return Invalid(`%s.arguments must be a JSON object (the tool's input), e.g. {"title": "{{ trigger.body.title }}"}`, at)
		}
		if err := CheckTemplates(c, at+".arguments", st.Arguments); err != nil {
			return err
		}
	}
	if _, err := st.MCPTimeout(); err != nil {
		return Invalid("%s.%v", at, err)
	}
	return nil
}

// MCPTimeout is an MCP step's time limit for its call: its timeout, or
// DefaultMCPTimeout when unset.
func (s Step) MCPTimeout() (time.Duration, error) {
	if s.Timeout == "" {
		return DefaultMCPTimeout, nil
	}
	d, err := time.ParseDuration(s.Timeout)
	if err != nil || d <= 0 || d > MaxMCPTimeout {
		return 0, fmt.Errorf("timeout %q: use a duration above 0 and at most %s, such as \"30s\"", s.Timeout, MaxMCPTimeout)
	}
	return d, nil
}
