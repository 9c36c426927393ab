package httpapi

import (
	"testing"

	"flowservice/pkg/automation"
)

// TestFlowListShowsVersionAndDraft: list items carry the live version and
// hasDraft, as the flow object does (checked against openapi.json by the
// validating client), through a draft, its publish and a second draft.
func TestFlowListShowsVersionAndDraft(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	f := createFlow(t, h.api, h.key, workflowFlow("listed-wf", "POST", "", `[{"name":"live","type":"SET","values":{"v":1}}]`))
	other := createFlow(t, h.api, h.key, workflowFlow("other-wf", "POST", "", `[]`))
	base := "/api/v1/flows/" + f.ID
	listed := func(id string) automation.FlowSummary {
		t.Helper()
		var l struct{ Data []automation.FlowSummary }
		call(t, h.api, "GET", "/api/v1/flows?limit=100", h.key, "").into(t, 200, &l)
		for _, it := range l.Data {
			if it.ID == id {
				return it
			}
		}
		t.Fatalf("flow %s not listed: %+v", id, l.Data)
		return automation.FlowSummary{}
	}
	if it := listed(f.ID); it.Version != 1 || it.HasDraft {
		t.Fatalf("new flow listed with version %d hasDraft %v, want 1 false", it.Version, it.HasDraft)
	}
	call(t, h.api, "PUT", base+"/draft", h.key, `{"steps":[{"name":"drafted","type":"SET","values":{"v":2}}]}`).into(t, 200, &automation.Draft{})
	if it := listed(f.ID); it.Version != 1 || !it.HasDraft {
		t.Errorf("flow with a draft listed with version %d hasDraft %v, want 1 true", it.Version, it.HasDraft)
	}
	if it := listed(other.ID); it.Version != 1 || it.HasDraft {
		t.Errorf("the other flow listed with version %d hasDraft %v, want 1 false", it.Version, it.HasDraft)
	}
	call(t, h.api, "POST", base+"/publish", h.key, "").into(t, 200, &struct{}{})
	if it := listed(f.ID); it.Version != 2 || it.HasDraft {
		t.Errorf("published flow listed with version %d hasDraft %v, want 2 false", it.Version, it.HasDraft)
	}
}
