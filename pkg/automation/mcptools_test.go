package automation_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// TestCallToolIsAnyRunStart: a tools/call starts its run through the same
// gate as every start: the project's runsPerMinute quota counts it and,
// past it, refuses it with QUOTA_EXCEEDED and no run; the tool list holds
// only the project's ACTIVE flows with an inputSchema, and a flow without
// one is not callable.
func TestCallToolIsAnyRunStart(t *testing.T) {
	// The clock stands still: the three calls are in one minute.
	now := time.Date(2030, 1, 1, 12, 0, 15, 0, time.UTC)
	fe := flowtest.New(t, flowtest.Options{Clock: func() time.Time { return now }})
	ctx := context.Background()
	p, _ := fe.Project(t, "mcp", automation.PlanTeam)
	if _, err := fe.Svc.SetProjectLimits(ctx, p.Name, map[string]int64{"runsPerMinute": 2}, nil); err != nil {
		t.Fatal(err)
	}
	name, eng := "Echo", automation.FlowBuilder
	steps := []automation.Step{{Name: "answer", Type: automation.StepRespond, Body: json.RawMessage(`{"got": "{{ trigger.body.n }}"}`)}}
	trig := automation.Trigger{Type: automation.TriggerWebhook, InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}
	tool, err := fe.Svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps, Trigger: &trig})
	if err != nil {
		t.Fatal(err)
	}
	if tool, err = fe.Svc.EnableFlow(ctx, p, tool.ID); err != nil {
		t.Fatal(err)
	}
	plain := fe.ActiveFlow(t, p, "plain", steps...)

	tools, clashes, err := fe.Svc.MCPToolFlows(ctx, p.ID)
	if err != nil || len(tools) != 1 || tools[0].ID != tool.ID || tools[0].Tool != "echo" || len(clashes) != 0 {
		t.Fatalf("MCPToolFlows = %+v %v %v, want the echo flow alone", tools, clashes, err)
	}
	if _, err := fe.Svc.CallTool(ctx, automation.ToolCall{Project: p.ID, FlowID: plain.ID, Wait: time.Minute}); err == nil ||
		!strings.Contains(err.Error(), "TOOL_NOT_FOUND") && !strings.Contains(err.Error(), "not a tool") {
		t.Errorf("calling a flow without inputSchema: %v", err)
	}
	for i := range 2 {
		r, err := fe.Svc.CallTool(ctx, automation.ToolCall{Project: p.ID, FlowID: tool.ID, Args: json.RawMessage(`{"n": 5}`), Wait: time.Minute})
		if err != nil || r.Status != automation.RunSucceeded || string(r.Response.Body) != `{"got":5}` || r.Trigger.Caller == nil || !r.Trigger.Caller.MCP {
			t.Fatalf("call %d: %+v %v", i, r, err)
		}
	}
	_, err = fe.Svc.CallTool(ctx, automation.ToolCall{Project: p.ID, FlowID: tool.ID, Args: json.RawMessage(`{"n": 5}`), Wait: time.Minute})
	var ae *automation.Error
	if !errors.As(err, &ae) || ae.Code != "QUOTA_EXCEEDED" {
		t.Errorf("third call in a minute with runsPerMinute 2: %v, want QUOTA_EXCEEDED", err)
	}
}
