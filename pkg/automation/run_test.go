package automation

import (
	"encoding/json"
	"strings"
	"testing"
)

// The journal's internal fields are stored with a run but never shown:
// Public and Summary drop them at every depth, and leave the run as it was.
func TestPublicRunHidesJournalFields(t *testing.T) {
	list := &ItemsJournal{Count: 2, SHA256: strings.Repeat("0", 64), Items: json.RawMessage(`[1,2]`)}
	loop := StepResult{Name: "each", Type: StepForEach, Status: StepFailed, ItemsJournal: list,
		Iterations: []Iteration{{Index: 0, Steps: []StepResult{{Name: "inner", Type: StepForEach, ItemsJournal: list}}}}}
	r := Run{ID: "run_1", Status: RunRunning, OnErrorOf: RunFailed,
		Steps:        []StepResult{{Name: "route", Type: StepSwitch, Steps: []StepResult{loop}}, loop},
		OnErrorSteps: []StepResult{loop}}
	stored, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(stored), `"onErrorOf":"FAILED"`) || strings.Count(string(stored), `"itemsJournal"`) != 6 {
		t.Fatalf("stored document lacks the journal fields: %s", stored)
	}
	for name, v := range map[string]Run{"public": r.Public(), "summary": r.Summary()} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "onErrorOf") || strings.Contains(string(b), "itemsJournal") {
			t.Errorf("%s run shows internal fields: %s", name, b)
		}
	}
	if again, _ := json.Marshal(r); string(again) != string(stored) {
		t.Errorf("Public changed the run itself:\n%s\nwas\n%s", again, stored)
	}
}
