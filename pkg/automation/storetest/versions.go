package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// versionOf is version n of f's definition as the Service publishes it.
func versionOf(f automation.Flow, n int64, at time.Time, message, by string) automation.FlowVersion {
	def := automation.DefinitionOf(f)
	return automation.FlowVersion{FlowID: f.ID, Project: f.Project, Version: n, Created: at,
		Message: message, CreatedBy: by, Definition: &def}
}

// listVersions walks every page of a flow's versions.
func listVersions(t *testing.T, s automation.Store, project, flowID string, limit int) (all []automation.FlowVersion, pages int) {
	t.Helper()
	after := ""
	for {
		p, err := s.FlowVersions(context.Background(), project, flowID, automation.ListQuery{Limit: limit, After: after})
		must(t, "FlowVersions", err)
		all, pages = append(all, p.Items...), pages+1
		if p.Next == "" {
			return all, pages
		}
		after = p.Next
		if pages > 100 {
			t.Fatal("FlowVersions never ends")
		}
	}
}

func withoutDefinition(vs ...automation.FlowVersion) []automation.FlowVersion {
	out := make([]automation.FlowVersion, len(vs))
	for i, v := range vs {
		v.Definition = nil
		out[i] = v
	}
	return out
}

// testFlowVersions: versions are written with the flow, read back whole,
// listed newest first without definitions, never overwritten, and go with
// the flow; a large definition (most of what a flow item may hold) fits.
func testFlowVersions(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p1, p2 := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)
	f := webhookFlow(p1, "deploy", "POST", "versions/deploy", base)
	f.LiveVersion = 1
	v1 := versionOf(f, 1, base, "", "key_1")
	f.Publish = []automation.FlowVersion{v1}
	must(t, "CreateFlow", s.CreateFlow(ctx, f))

	got := getFlow(t, s, p1, f.ID)
	if got.LiveVersion != 1 || got.HasDraft {
		t.Fatalf("new flow: version %d hasDraft %v, want 1 false", got.LiveVersion, got.HasDraft)
	}
	gv, err := s.FlowVersion(ctx, p1, f.ID, 1)
	must(t, "FlowVersion 1", err)
	wantSame(t, "version 1", gv, v1)
	_, err = s.FlowVersion(ctx, p2, f.ID, 1)
	wantKind(t, "another project's version", err, automation.ErrNotFound, "VERSION_NOT_FOUND")
	_, err = s.FlowVersion(ctx, p1, f.ID, 2)
	wantKind(t, "missing version", err, automation.ErrNotFound, "VERSION_NOT_FOUND")

	// Version 2: a large definition, with a message.
	g := f
	g.Publish = nil
	big := `{"blob": "` + strings.Repeat("x", 120<<10) + `"}`
	g.Steps = []automation.Step{{Name: "big", Type: automation.StepSet, Values: json.RawMessage(big)}}
	g.OnError = nil
	g.Version, g.LiveVersion, g.Updated = 2, 2, base.Add(time.Second)
	v2 := versionOf(g, 2, g.Updated, "bigger", "key_2")
	g.Publish = []automation.FlowVersion{v2}
	must(t, "PutFlow publishing 2", s.PutFlow(ctx, g))
	if got := getFlow(t, s, p1, f.ID); got.LiveVersion != 2 || len(got.Steps) != 1 {
		t.Fatalf("after publish: version %d, %d steps; want 2, 1", got.LiveVersion, len(got.Steps))
	}
	gv, err = s.FlowVersion(ctx, p1, f.ID, 2)
	must(t, "FlowVersion 2", err)
	wantSame(t, "version 2", gv, v2)
	gv, err = s.FlowVersion(ctx, p1, f.ID, 1)
	must(t, "FlowVersion 1 again", err)
	wantSame(t, "version 1 after 2 was published", gv, v1)

	// A metadata write publishes nothing; versions stay.
	h := g
	h.Publish, h.Name, h.Version = nil, "renamed", 3
	must(t, "PutFlow metadata", s.PutFlow(ctx, h))

	// A version number taken already fails the whole write.
	dup := h
	dup.Version, dup.Name, dup.LiveVersion = 4, "dup", 2
	dup.Publish = []automation.FlowVersion{versionOf(h, 2, base, "again", "key_3")}
	err = s.PutFlow(ctx, dup)
	wantKind(t, "publishing a taken number", err, automation.ErrConflict, "FLOW_MODIFIED")
	if got := getFlow(t, s, p1, f.ID); got.Name != "renamed" || got.Version != 3 {
		t.Fatalf("a failed publish changed the flow: %q version %d", got.Name, got.Version)
	}
	gv, err = s.FlowVersion(ctx, p1, f.ID, 2)
	must(t, "FlowVersion 2 after a failed publish", err)
	wantSame(t, "version 2 after a failed publish", gv, v2)

	// Two more at once (the first publish of a flow from before versions
	// writes its version 1 beside the new one): 3 and 4.
	k := h
	k.Version, k.LiveVersion = 4, 4
	v3, v4 := versionOf(f, 3, base.Add(2*time.Second), "", "key_4"), versionOf(f, 4, base.Add(3*time.Second), "four", "dashboard")
	k.Trigger, k.Steps, k.OnError = f.Trigger, f.Steps, f.OnError
	k.Publish = []automation.FlowVersion{v3, v4}
	must(t, "PutFlow publishing 3 and 4", s.PutFlow(ctx, k))

	want := withoutDefinition(v4, v3, v2, v1)
	for _, limit := range []int{1, 3, 10} {
		all, pages := listVersions(t, s, p1, f.ID, limit)
		wantSame(t, "versions listed by "+string(rune('0'+limit)), all, want)
		if wantPages := (len(want) + limit - 1) / limit; pages != wantPages && pages != wantPages+1 {
			t.Errorf("limit %d: %d pages for %d versions", limit, pages, len(want))
		}
	}
	if all, _ := listVersions(t, s, p2, f.ID, 10); len(all) != 0 {
		t.Errorf("another project lists %d versions of the flow", len(all))
	}

	must(t, "DeleteFlow", s.DeleteFlow(ctx, p1, f.ID))
	for n := int64(1); n <= 4; n++ {
		_, err = s.FlowVersion(ctx, p1, f.ID, n)
		wantKind(t, "version of a deleted flow", err, automation.ErrNotFound, "VERSION_NOT_FOUND")
	}
	if all, _ := listVersions(t, s, p1, f.ID, 10); len(all) != 0 {
		t.Errorf("a deleted flow lists %d versions", len(all))
	}
}

// testFlowDraft: the draft is saved and dropped with the flow's HasDraft,
// in one write, and goes with the flow.
func testFlowDraft(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p1, p2 := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)
	f := webhookFlow(p1, "deploy", "POST", "drafts/deploy", base)
	f.LiveVersion = 1
	f.Publish = []automation.FlowVersion{versionOf(f, 1, base, "", "")}
	must(t, "CreateFlow", s.CreateFlow(ctx, f))
	_, err := s.Draft(ctx, p1, f.ID)
	wantKind(t, "no draft yet", err, automation.ErrNotFound, "DRAFT_NOT_FOUND")

	d := automation.Draft{FlowID: f.ID, Project: p1, BasedOn: 1, Updated: base.Add(time.Second),
		Definition: automation.DefinitionOf(scheduleFlow(p1, "x", base))}
	g := f
	g.Publish, g.Version, g.HasDraft, g.SaveDraft = nil, 2, true, &d
	must(t, "PutFlow saving a draft", s.PutFlow(ctx, g))
	got, err := s.Draft(ctx, p1, f.ID)
	must(t, "Draft", err)
	wantSame(t, "draft", got, d)
	if fl := getFlow(t, s, p1, f.ID); !fl.HasDraft || fl.LiveVersion != 1 {
		t.Fatalf("flow with a draft: hasDraft %v version %d, want true 1", fl.HasDraft, fl.LiveVersion)
	}
	_, err = s.Draft(ctx, p2, f.ID)
	wantKind(t, "another project's draft", err, automation.ErrNotFound, "DRAFT_NOT_FOUND")

	// Saved again: replaced.
	d2 := d
	d2.Updated, d2.Definition = base.Add(2*time.Second), automation.DefinitionOf(f)
	g.Version, g.SaveDraft = 3, &d2
	must(t, "PutFlow saving the draft again", s.PutFlow(ctx, g))
	got, err = s.Draft(ctx, p1, f.ID)
	must(t, "Draft again", err)
	wantSame(t, "draft saved again", got, d2)

	// Dropped.
	g.Version, g.SaveDraft, g.HasDraft, g.DropDraft = 4, nil, false, true
	must(t, "PutFlow dropping the draft", s.PutFlow(ctx, g))
	_, err = s.Draft(ctx, p1, f.ID)
	wantKind(t, "dropped draft", err, automation.ErrNotFound, "DRAFT_NOT_FOUND")
	if fl := getFlow(t, s, p1, f.ID); fl.HasDraft {
		t.Fatal("flow still says it has a draft")
	}

	// And with the flow.
	g.Version, g.SaveDraft, g.HasDraft, g.DropDraft = 5, &d, true, false
	must(t, "PutFlow saving a draft once more", s.PutFlow(ctx, g))
	must(t, "DeleteFlow", s.DeleteFlow(ctx, p1, f.ID))
	_, err = s.Draft(ctx, p1, f.ID)
	wantKind(t, "draft of a deleted flow", err, automation.ErrNotFound, "DRAFT_NOT_FOUND")
}

// testRunPinned: a run's flowVersion, and a test run's draft flag and
// definition (large enough to leave a run item that holds the rest) and
// its caller's trace context (Run.Trace), are kept through its claim,
// journal, release and finish; summaries and public views leave the
// definition and the trace context out.
func testRunPinned(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f := runFixture(t, env)
	pinned := newRun(f, now())
	v := int64(3)
	pinned.FlowVersion = &v
	must(t, "create pinned run", env.Create(ctx, pinned))
	wantSame(t, "pinned run", getRun(t, env, pinned), pinned)

	draft := newRun(f, now().Add(time.Millisecond))
	def := automation.DefinitionOf(f)
	def.Steps = append(def.Steps, automation.Step{Name: "large", Type: automation.StepSet,
		Values: json.RawMessage(`{"v": "` + strings.Repeat("d", 64<<10) + `"}`)})
	draft.Draft, draft.DraftDefinition = true, &def
	trace := automation.RunTrace{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", State: "vendor=a1"}
	draft.Trace = &trace
	must(t, "create draft run", env.Create(ctx, draft))
	wantSame(t, "draft run", getRun(t, env, draft), draft)

	c, err := env.Runs.ClaimRun(ctx, f.Project, draft.ID, now(), time.Minute)
	must(t, "claim draft run", err)
	if !c.Draft || c.DraftDefinition == nil || len(c.DraftDefinition.Steps) != len(def.Steps) || c.FlowVersion != nil {
		t.Fatalf("claimed draft run: draft %v, definition %v, flowVersion %v", c.Draft, c.DraftDefinition != nil, c.FlowVersion)
	}
	c.Steps = []automation.StepResult{{Name: "set", Status: automation.StepSucceeded, Output: json.RawMessage(`{"a":1}`)}}
	must(t, "record steps", env.Runs.RecordSteps(ctx, c))
	must(t, "release", env.Runs.ReleaseRun(ctx, c))
	c, err = env.Runs.ClaimRun(ctx, f.Project, draft.ID, now(), time.Minute)
	must(t, "claim draft run again", err)
	c.Status = automation.RunSucceeded
	must(t, "finish draft run", env.Runs.FinishRun(ctx, c))
	got := getRun(t, env, draft)
	if got.DraftDefinition == nil || len(got.DraftDefinition.Steps) != len(def.Steps) || !got.Draft {
		t.Fatalf("finished draft run lost its definition: draft %v, definition %v", got.Draft, got.DraftDefinition != nil)
	}
	wantSame(t, "finished draft run's definition", *got.DraftDefinition, def)
	if got.Trace == nil || *got.Trace != trace {
		t.Fatalf("finished draft run's trace context = %+v, want %+v", got.Trace, trace)
	}
	page, err := env.Runs.ListRuns(ctx, f.Project, f.ID, automation.ListQuery{Limit: 10})
	must(t, "ListRuns", err)
	for _, r := range page.Items {
		if r.DraftDefinition != nil || r.Trace != nil {
			t.Errorf("run %s: a summary holds the draft definition or the trace context", r.ID)
		}
	}
	js, err := env.Runs.ListRunsJSON(ctx, f.Project, f.ID, automation.ListQuery{Limit: 10})
	must(t, "ListRunsJSON", err)
	for _, raw := range js.Items {
		if strings.Contains(string(raw), "draftDefinition") || strings.Contains(string(raw), `"trace"`) {
			t.Errorf("a summary's JSON holds the draft definition or the trace context: %.200s", raw)
		}
	}
}
