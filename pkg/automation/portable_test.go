package automation_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"flowservice/pkg/automation"
)

// A flow moved to another installation (here: another project, whose IDs
// differ) keeps its concurrency and throttle, and its CALL_FLOW step calls
// that installation's flow of the name the document gives beside flowId.
// No flow of that name, or several, is a 400 naming the step.
func TestExportImportCarriesBoundsAndCalledFlow(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := t.Context()
	child := e.ActiveFlow(t, e.project, "Enrich", automation.Step{Name: "v", Type: automation.StepSet, Values: json.RawMessage(`{"v": 1}`)})
	wait := true
	parent := e.ActiveFlow(t, e.project, "Orders",
		automation.Step{Name: "enrich", Type: automation.StepCallFlow, FlowID: child.ID, Wait: &wait},
		automation.Step{Name: "again", Type: automation.StepCallFlow, FlowID: "", Flow: "Orders", Wait: new(bool)})
	conc := &automation.Concurrency{Limit: 2, Key: "trigger.body.order"}
	thr := &automation.Throttle{Limit: 30, Period: "1m", Key: "trigger.body.customer"}
	parent, err := e.svc.UpdateFlow(ctx, e.project, parent.ID, automation.FlowInput{
		Concurrency: automation.Nullable[automation.Concurrency]{Set: true, Value: conc},
		Throttle:    automation.Nullable[automation.Throttle]{Set: true, Value: thr}})
	if err != nil {
		t.Fatal(err)
	}
	if st := parent.Steps[1]; st.FlowID != parent.ID || st.Flow != "" {
		t.Fatalf("a step calling the flow's own name saved as flowId %q flow %q, want its own ID and no name", st.FlowID, st.Flow)
	}

	raw, err := e.svc.ExportFlow(ctx, e.project, parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	var doc automation.FlowDocument
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	def := doc.Definition
	if diff := cmp.Diff(conc, def.Concurrency); diff != "" {
		t.Errorf("exported concurrency (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(thr, def.Throttle); diff != "" {
		t.Errorf("exported throttle (-want +got):\n%s", diff)
	}
	if st := def.Steps[0]; st.Flow != "Enrich" || st.FlowID != child.ID {
		t.Errorf("exported CALL_FLOW step: flow %q flowId %q, want Enrich beside %s", st.Flow, st.FlowID, child.ID)
	}
	if st := def.Steps[1]; st.Flow != "Orders" {
		t.Errorf("exported self call: flow %q, want Orders", st.Flow)
	}

	other, _ := e.Project(t, "other", automation.PlanEnterprise)
	// No flow called Enrich there yet: refused, naming the step.
	_, err = e.svc.ImportFlow(ctx, other, doc)
	if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), `definition.steps[0].flow "Enrich" (step "enrich"): this project has no flow of that name`) {
		t.Fatalf("import with no flow of the called name: %v", err)
	}
	there := e.ActiveFlow(t, other, "Enrich", automation.Step{Name: "v", Type: automation.StepSet, Values: json.RawMessage(`{"v": 2}`)})
	got, err := e.svc.ImportFlow(ctx, other, doc)
	if err != nil {
		t.Fatal(err)
	}
	if got.Steps[0].FlowID != there.ID || got.Steps[0].Flow != "" || got.Steps[1].FlowID != got.ID {
		t.Errorf("imported steps call %q (%q) and %q; want %s, then the imported flow itself %s",
			got.Steps[0].FlowID, got.Steps[0].Flow, got.Steps[1].FlowID, there.ID, got.ID)
	}
	if diff := cmp.Diff(conc, got.Concurrency); diff != "" {
		t.Errorf("imported concurrency (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(thr, got.Throttle); diff != "" {
		t.Errorf("imported throttle (-want +got):\n%s", diff)
	}

	// A second Enrich makes the name ambiguous: refused, naming both.
	twin := e.ActiveFlow(t, other, "Enrich", automation.Step{Name: "v", Type: automation.StepSet, Values: json.RawMessage(`{"v": 3}`)})
	doc = automation.FlowDocument{} // saving resolved the names in place
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Name = "Orders copy"
	_, err = e.svc.ImportFlow(ctx, other, doc)
	if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), `definition.steps[0].flow "Enrich" (step "enrich"): 2 flows of this project have that name`) ||
		!strings.Contains(err.Error(), there.ID) || !strings.Contains(err.Error(), twin.ID) {
		t.Errorf("import with two flows of the called name: %v", err)
	}
	// flow belongs to CALL_FLOW steps only.
	name, eng := "wrong", automation.FlowBuilder
	steps := []automation.Step{{Name: "s", Type: automation.StepSet, Values: json.RawMessage(`{}`), Flow: "Enrich"}}
	if _, err := e.svc.CreateFlow(ctx, other, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps}); !errors.Is(err, automation.ErrInvalid) ||
		!strings.Contains(err.Error(), "steps[0].flow does not apply to SET steps") {
		t.Errorf("flow on a SET step: %v", err)
	}
}
