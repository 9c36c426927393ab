package storetest

import (
	"context"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// testListFlowsVersion: list items carry each flow's live version and
// whether it has a draft, as reading the flow does, so a flow list can
// mark drafts without reading every flow.
func testListFlowsVersion(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p := automation.NewID(automation.PrefixProject)
	plain := webhookFlow(p, "plain", "POST", "list/plain", base)
	plain.LiveVersion = 1
	plain.Publish = []automation.FlowVersion{versionOf(plain, 1, base, "", "")}
	must(t, "CreateFlow plain", s.CreateFlow(ctx, plain))
	f := webhookFlow(p, "drafted", "POST", "list/drafted", base.Add(time.Millisecond))
	f.LiveVersion = 1
	f.Publish = []automation.FlowVersion{versionOf(f, 1, f.Created, "", "")}
	must(t, "CreateFlow drafted", s.CreateFlow(ctx, f))

	g := f
	g.Version, g.LiveVersion, g.Updated = 2, 2, base.Add(time.Second)
	g.Publish = []automation.FlowVersion{versionOf(g, 2, g.Updated, "two", "")}
	must(t, "PutFlow publishing 2", s.PutFlow(ctx, g))
	d := automation.Draft{FlowID: f.ID, Project: p, BasedOn: 2, Updated: base.Add(2 * time.Second),
		Definition: automation.DefinitionOf(scheduleFlow(p, "x", base))}
	g.Publish, g.Version, g.HasDraft, g.SaveDraft = nil, 3, true, &d
	must(t, "PutFlow saving a draft", s.PutFlow(ctx, g))

	listed := func() map[string]automation.Flow {
		t.Helper()
		page, err := s.ListFlows(ctx, p, automation.ListQuery{Limit: 10})
		must(t, "ListFlows", err)
		out := map[string]automation.Flow{}
		for _, it := range page.Items {
			out[it.ID] = it
		}
		if len(out) != 2 {
			t.Fatalf("ListFlows: %d flows, want 2", len(out))
		}
		return out
	}
	got := listed()
	if it := got[f.ID]; it.LiveVersion != 2 || !it.HasDraft {
		t.Errorf("listed flow with a draft: version %d hasDraft %v, want 2 true", it.LiveVersion, it.HasDraft)
	}
	if it := got[plain.ID]; it.LiveVersion != 1 || it.HasDraft {
		t.Errorf("listed flow without a draft: version %d hasDraft %v, want 1 false", it.LiveVersion, it.HasDraft)
	}

	g.Version, g.SaveDraft, g.HasDraft, g.DropDraft = 4, nil, false, true
	must(t, "PutFlow dropping the draft", s.PutFlow(ctx, g))
	if it := listed()[f.ID]; it.LiveVersion != 2 || it.HasDraft {
		t.Errorf("listed flow after its draft was dropped: version %d hasDraft %v, want 2 false", it.LiveVersion, it.HasDraft)
	}
}
