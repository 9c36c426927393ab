package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sync"
	"testing"

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
