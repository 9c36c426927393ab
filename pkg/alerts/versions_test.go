package alerts_test

import (
	"testing"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
)

// TestFlowEventOfVersions: a publish (a new live version, even of the same
// definition, as a restore may be) is flow.published; a draft saved beside
// the live version changes nothing that runs and is no event.
func TestFlowEventOfVersions(t *testing.T) {
	live := automation.Flow{ID: "flw_1", Status: automation.FlowActive, LiveVersion: 2,
		Steps: []automation.Step{{Name: "a", Type: automation.StepSet}}}
	draftSaved := live
	draftSaved.HasDraft = true
	republished := live
	republished.LiveVersion = 3
	changed := republished
	changed.Steps = []automation.Step{{Name: "b", Type: automation.StepSet}}
	renamed := live
	renamed.Name = "other"
	for _, tt := range []struct {
		name      string
		old, next automation.Flow
		want      string
	}{
		{"draft saved", live, draftSaved, ""},
		{"metadata", live, renamed, ""},
		{"restore of the same definition", live, republished, alerts.EventFlowPublished},
		{"publish", draftSaved, changed, alerts.EventFlowPublished},
	} {
		if got := alerts.FlowEventType(&tt.old, &tt.next); got != tt.want {
			t.Errorf("%s: event %q, want %q", tt.name, got, tt.want)
		}
	}
}
