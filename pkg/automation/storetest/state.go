package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// setKeys is an UpdateFlowState change that sets keys to JSON values.
func setKeys(kv map[string]string) func(map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	return func(cur map[string]json.RawMessage) (map[string]json.RawMessage, error) {
		next := maps.Clone(cur)
		for k, v := range kv {
			next[k] = json.RawMessage(v)
		}
		return next, nil
	}
}

func wantState(t *testing.T, s automation.Store, f automation.Flow, want map[string]string) {
	t.Helper()
	got, err := s.FlowState(context.Background(), f.Project, f.ID)
	must(t, "FlowState", err)
	if len(got) != len(want) {
		t.Fatalf("FlowState = %s, want %v", jsonOf(t, got), want)
	}
	for k, v := range want {
		if !equalJSON(got[k], json.RawMessage(v)) {
			t.Errorf("state[%s] = %s, want %s", k, got[k], v)
		}
	}
}

// A flow's state: empty at first, replaced by each update, invisible to
// other projects and other flows, and gone with the flow.
func testFlowState(t *testing.T, s automation.Store) {
	ctx := context.Background()
	f := sampleFixture(t, s)
	g := flowBuilderWebhook(f.Project, "other", now())
	must(t, "create flow", s.CreateFlow(ctx, g))
	wantState(t, s, f, map[string]string{})

	must(t, "UpdateFlowState", s.UpdateFlowState(ctx, f.Project, f.ID, setKeys(map[string]string{"lastSha": `"abc"`, "seen": `[1,2]`})))
	wantState(t, s, f, map[string]string{"lastSha": `"abc"`, "seen": `[1,2]`})
	must(t, "UpdateFlowState", s.UpdateFlowState(ctx, f.Project, f.ID, func(cur map[string]json.RawMessage) (map[string]json.RawMessage, error) {
		next := maps.Clone(cur)
		delete(next, "seen")
		next["n"] = json.RawMessage(`{"a":1}`)
		return next, nil
	}))
	wantState(t, s, f, map[string]string{"lastSha": `"abc"`, "n": `{"a":1}`})
	wantState(t, s, g, map[string]string{})

	// A refusing change leaves the state as it was, and its error comes back.
	refused := errors.New("too large")
	if err := s.UpdateFlowState(ctx, f.Project, f.ID, func(map[string]json.RawMessage) (map[string]json.RawMessage, error) {
		return nil, refused
	}); !errors.Is(err, refused) {
		t.Errorf("refused change: err = %v", err)
	}
	wantState(t, s, f, map[string]string{"lastSha": `"abc"`, "n": `{"a":1}`})

	// Another project sees nothing and cannot write.
	other := automation.NewID(automation.PrefixProject)
	got, err := s.FlowState(ctx, other, f.ID)
	must(t, "FlowState of another project", err)
	if len(got) != 0 {
		t.Errorf("another project reads %s", jsonOf(t, got))
	}
	wantKind(t, "UpdateFlowState in another project", s.UpdateFlowState(ctx, other, f.ID, setKeys(map[string]string{"x": "1"})),
		automation.ErrNotFound, "FLOW_NOT_FOUND")

	must(t, "DeleteFlow", s.DeleteFlow(ctx, f.Project, f.ID))
	wantState(t, s, f, map[string]string{})
	wantKind(t, "UpdateFlowState of a deleted flow", s.UpdateFlowState(ctx, f.Project, f.ID, setKeys(map[string]string{"x": "1"})),
		automation.ErrNotFound, "FLOW_NOT_FOUND")
	wantState(t, s, g, map[string]string{})
}

// Concurrent updates of one flow's state each apply once: none is lost.
func testFlowStateRace(t *testing.T, s automation.Store) {
	ctx := context.Background()
	f := sampleFixture(t, s)
	const writers = 4
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			errs[i] = s.UpdateFlowState(ctx, f.Project, f.ID, func(cur map[string]json.RawMessage) (map[string]json.RawMessage, error) {
				var n int
				if v, ok := cur["count"]; ok {
					if err := json.Unmarshal(v, &n); err != nil {
						return nil, err
					}
				}
				next := maps.Clone(cur)
				b, _ := json.Marshal(n + 1)
				next["count"] = b
				return next, nil
			})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		if err == nil {
			ok++
		}
	}
	if ok == 0 {
		t.Fatalf("every concurrent update failed: %v", errs)
	}
	got, err := s.FlowState(ctx, f.Project, f.ID)
	must(t, "FlowState", err)
	var n int
	if err := json.Unmarshal(got["count"], &n); err != nil || n != ok {
		t.Errorf("count = %s after %d successful updates (errors %v)", got["count"], ok, errs)
	}
}

// testRunNestedResults: a run's nested step results (a SWITCH's branch, a
// FOR_EACH's items) and its onError results are stored whole and read back
// the same; run lists leave them out, as they leave out outputs.
func testRunNestedResults(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f := runFixture(t, env)
	r := newRun(f, now())
	must(t, "create run", env.Create(ctx, r))
	c, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, now(), time.Minute)
	must(t, "claim", err)
	line := func(i int) automation.StepResult {
		return automation.StepResult{Name: "line", Type: automation.StepHTTP, Status: automation.StepSucceeded, Attempts: 1,
			Output: json.RawMessage(`{"status":201,"n":` + strconv.Itoa(i) + `}`), Logs: []string{"line " + strconv.Itoa(i)}}
	}
	c.Status, c.Error = automation.RunFailed, "step route: step each: item 1: step line: refused"
	c.Steps = []automation.StepResult{
		{Name: "maybe", Type: automation.StepSet, Status: automation.StepSkipped},
		{Name: "route", Type: automation.StepSwitch, Status: automation.StepFailed, Attempts: 1, Output: json.RawMessage(`{"case":0}`),
			Steps: []automation.StepResult{{Name: "each", Type: automation.StepForEach, Status: automation.StepFailed, Attempts: 1,
				Iterations: []automation.Iteration{
					{Index: 0, Status: automation.StepSucceeded, Steps: []automation.StepResult{line(0)}},
					{Index: 1, Status: automation.StepFailed, Error: "step line: refused", Steps: []automation.StepResult{
						{Name: "line", Type: automation.StepHTTP, Status: automation.StepFailed, Error: "refused", Attempts: 1}}},
				}}}},
	}
	c.OnErrorSteps = []automation.StepResult{{Name: "alert", Type: automation.StepHTTP, Status: automation.StepSucceeded, Attempts: 1,
		Output: json.RawMessage(`{"status":200}`)}}
	must(t, "finish", env.Runs.FinishRun(ctx, c))
	wantSame(t, "run with nested results", getRun(t, env, r), c)
	page, err := env.Runs.ListRuns(ctx, f.Project, f.ID, automation.ListQuery{Limit: 10})
	must(t, "list runs", err)
	if len(page.Items) != 1 {
		t.Fatalf("%d runs listed, want 1", len(page.Items))
	}
	wantSame(t, "listed run", page.Items[0], c.Summary())
}
