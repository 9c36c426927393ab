package automation

import (
	"bytes"
	"testing"
)

// NewService wires one of each service and every service to the same
// ones: a second ProjectService would keep its own quotas cache (webhook
// buckets, limits), a second FlowService its own cache of pinned versions.
func TestNewServiceWiresOneOfEach(t *testing.T) {
	type store struct{ Store } // never called: wiring only
	type secrets struct{ Secrets }
	type checker struct{ Checker }
	svc, err := NewService(Config{Store: store{}, Secrets: secrets{}, Checker: checker{},
		CursorKey: bytes.Repeat([]byte("k"), 32), Runtime: &RunRuntime{}})
	if err != nil {
		t.Fatal(err)
	}
	if svc.FlowService.projects != svc.ProjectService || svc.RunService.projects != svc.ProjectService {
		t.Error("FlowService or RunService calls another ProjectService than the Service's")
	}
	if svc.FlowService.variables != svc.VariableService {
		t.Error("FlowService calls another VariableService than the Service's")
	}
	if svc.RunService.flows != svc.FlowService {
		t.Error("RunService calls another FlowService than the Service's")
	}
	b := svc.ProjectService.base
	for name, other := range map[string]*base{
		"FlowService": svc.FlowService.base, "flowValidator": svc.FlowService.flowValidator.base,
		"ConnectionService": svc.ConnectionService.base, "VariableService": svc.VariableService.base,
		"RunService": svc.RunService.base,
	} {
		if other != b {
			t.Errorf("%s has its own base (clock, IDs, log, cursor key)", name)
		}
	}
	if b.now == nil || b.newID == nil || b.log == nil {
		t.Error("base defaults not set")
	}
}
