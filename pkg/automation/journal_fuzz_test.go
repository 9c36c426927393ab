package automation_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"

	"flowservice/pkg/automation"
)

// FuzzStepPatches: for random pairs of result trees (SWITCH branches and
// FOR_EACH items nested, results changed, added, removed or reshaped),
// the patches DiffSteps makes, through JSON as a store keeps them, turn
// the first into the second.
func FuzzStepPatches(f *testing.F) {
	for _, s := range []uint64{1, 2, 42, 1 << 40} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		r := rand.New(rand.NewPCG(seed, seed>>7))
		old := randomResults(r, int(steps%6), 0)
		now := mutateResults(r, old, 0)
		run := automation.Run{Steps: old}
		b, err := json.Marshal(automation.DiffSteps(automation.PatchRootSteps, old, now))
		if err != nil {
			t.Fatal(err)
		}
		var patches []automation.StepPatch
		if err := json.Unmarshal(b, &patches); err != nil {
			t.Fatal(err)
		}
		// Applied to a copy as a store decodes it: no sharing with old.
		var stored []automation.StepResult
		if err := json.Unmarshal(mustMarshal(t, old), &stored); err != nil {
			t.Fatal(err)
		}
		run.Steps = stored
		if err := automation.ApplyStepPatches(&run, patches); err != nil {
			t.Fatalf("apply: %v\npatches %s", err, b)
		}
		if g, w := string(mustMarshal(t, run.Steps)), string(mustMarshal(t, orEmpty(now))); g != w {
			t.Fatalf("folded\n%s\nwant\n%s\npatches %s", g, w, b)
		}
	})
}

func orEmpty(s []automation.StepResult) []automation.StepResult {
	if s == nil {
		return []automation.StepResult{}
	}
	return s
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var statuses = []automation.StepStatus{automation.StepSkipped, automation.StepSucceeded, automation.StepFailed}

func randomResults(r *rand.Rand, n, depth int) []automation.StepResult {
	out := make([]automation.StepResult, n)
	for i := range out {
		st := automation.StepResult{Name: fmt.Sprint("s", depth, i), Type: automation.StepCode, Status: statuses[r.IntN(3)]}
		if r.IntN(2) == 0 {
			st.Output = json.RawMessage(fmt.Sprintf(`{"v":%d}`, r.IntN(100)))
		}
		if depth < 2 {
			switch r.IntN(3) {
			case 0:
				st.Type, st.Steps = automation.StepSwitch, randomResults(r, r.IntN(3), depth+1)
			case 1:
				st.Type = automation.StepForEach
				for k := range r.IntN(4) {
					st.Iterations = append(st.Iterations, automation.Iteration{Index: k, Status: statuses[r.IntN(3)],
						Steps: randomResults(r, r.IntN(3), depth+1)})
				}
			}
		}
		out[i] = st
	}
	return out
}

// mutateResults is a copy of in with random changes, sharing what it
// does not change (as the engine's snapshots share outputs).
func mutateResults(r *rand.Rand, in []automation.StepResult, depth int) []automation.StepResult {
	if r.IntN(8) == 0 {
		return randomResults(r, r.IntN(4), depth) // reshaped
	}
	out := make([]automation.StepResult, len(in))
	for i, st := range in {
		if r.IntN(3) == 0 {
			st.Status = statuses[r.IntN(3)]
			st.Output = json.RawMessage(fmt.Sprintf(`{"w":%d}`, r.IntN(100)))
			st.Logs = append([]string(nil), fmt.Sprint("line ", r.IntN(9)))
		}
		if len(st.Steps) > 0 {
			st.Steps = mutateResults(r, st.Steps, depth+1)
		}
		if st.Iterations != nil {
			its := append([]automation.Iteration(nil), st.Iterations...)
			for k := range its {
				if r.IntN(2) == 0 {
					its[k].Status, its[k].Error = statuses[r.IntN(3)], "e"
				}
				its[k].Steps = mutateResults(r, its[k].Steps, depth+1)
			}
			if r.IntN(5) == 0 {
				its = append(its, automation.Iteration{Index: len(its), Status: automation.StepSkipped})
			}
			st.Iterations = its
		}
		out[i] = st
	}
	return out
}
