package automation_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestStepPatchesFoldBack: each run state of a FOR_EACH with a SWITCH
// inside, diffed against the previous one and applied to the stored copy,
// gives that state back; the entry of one finished item holds that item
// alone, whatever the items before it hold.
func TestStepPatchesFoldBack(t *testing.T) {
	const items = 50
	big := json.RawMessage(`"` + strings.Repeat("x", 4000) + `"`)
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	state := func(done int) []automation.StepResult {
		loop := automation.StepResult{Name: "each", Type: automation.StepForEach, Status: automation.StepSkipped, StartedAt: &at}
		for i := range items {
			it := automation.Iteration{Index: i, Status: automation.StepSkipped, Steps: []automation.StepResult{
				{Name: "pick", Type: automation.StepSwitch, Status: automation.StepSkipped},
			}}
			if i < done {
				it.Status = automation.StepSucceeded
				it.Steps[0] = automation.StepResult{Name: "pick", Type: automation.StepSwitch, Status: automation.StepSucceeded,
					Output: json.RawMessage(`{"case":0}`), Steps: []automation.StepResult{
						{Name: "call", Type: automation.StepHTTP, Status: automation.StepSucceeded, Output: big, Logs: []string{fmt.Sprint(i)}},
					}}
			}
			loop.Iterations = append(loop.Iterations, it)
		}
		return []automation.StepResult{{Name: "start", Type: automation.StepCode, Status: automation.StepSucceeded}, loop}
	}
	stored := automation.Run{Steps: []automation.StepResult{}}
	prev := stored.Steps
	for done := 0; done <= items; done++ {
		now := state(done)
		patches := automation.DiffSteps(automation.PatchRootSteps, prev, now)
		entry, err := json.Marshal(patches)
		if err != nil {
			t.Fatal(err)
		}
		var back []automation.StepPatch // as a store reads it
		if err := json.Unmarshal(entry, &back); err != nil {
			t.Fatal(err)
		}
		if err := automation.ApplyStepPatches(&stored, back); err != nil {
			t.Fatalf("after item %d: %v", done, err)
		}
		if g, w := mustJSON(t, stored.Steps), mustJSON(t, now); g != w {
			t.Fatalf("after item %d: folded\n%s\nwant\n%s", done, g, w)
		}
		if done > 0 && len(entry) > len(big)+1000 {
			t.Errorf("entry of item %d is %d bytes: more than the item's own result", done, len(entry))
		}
		prev = now
	}
	if p := automation.DiffSteps(automation.PatchRootSteps, prev, state(items)); len(p) != 0 {
		t.Errorf("no change gave %d patches", len(p))
	}
}

// TestStepPatchesRefuseAnotherDocument: an entry whose path leads
// nowhere in the run is an error, never a silent change.
func TestStepPatchesRefuseAnotherDocument(t *testing.T) {
	r := automation.Run{Steps: []automation.StepResult{{Name: "a", Type: automation.StepCode}}}
	for _, p := range []automation.StepPatch{
		{Path: "s/3", Step: &automation.StepResult{Name: "x"}},
		{Path: "s/0/i2/0", Step: &automation.StepResult{Name: "x"}},
		{Path: "x/0", Step: &automation.StepResult{Name: "x"}},
		{Path: "s/0"}, // nothing to put there
	} {
		if err := automation.ApplyStepPatches(&r, []automation.StepPatch{p}); err == nil {
			t.Errorf("patch at %s applied", p.Path)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
