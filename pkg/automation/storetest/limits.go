package storetest

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"flowservice/pkg/automation"
)

// testProjectLimits: a project's limit overrides are stored, read back by
// every project read, replaced as a whole, and refused for an unknown
// project.
func testProjectLimits(t *testing.T, s automation.Store) {
	ctx := context.Background()
	p := newProject("limited", now())
	must(t, "create", s.CreateProject(ctx, p))
	if got, err := s.Project(ctx, p.ID); err != nil || len(got.LimitOverrides) != 0 {
		t.Fatalf("a new project: overrides %v, %v; want none", got.LimitOverrides, err)
	}
	want := map[string]int64{"flows": 3, "webhooksPerSecond": automation.Unlimited}
	must(t, "set", s.SetProjectLimits(ctx, p.ID, want))
	byID, err := s.Project(ctx, p.ID)
	must(t, "Project", err)
	byName, err := s.ProjectByName(ctx, p.Name)
	must(t, "ProjectByName", err)
	all, err := s.Projects(ctx)
	must(t, "Projects", err)
	var listed automation.Project
	for _, x := range all {
		if x.ID == p.ID {
			listed = x
		}
	}
	for what, got := range map[string]automation.Project{"Project": byID, "ProjectByName": byName, "Projects": listed} {
		if d := cmp.Diff(want, got.LimitOverrides); d != "" {
			t.Errorf("%s: overrides (-want +got):\n%s", what, d)
		}
	}
	if l := byID.Limits(); l.Flows == nil || *l.Flows != 3 || l.WebhooksPerSecond != nil || l.ConcurrentRuns == nil {
		t.Errorf("Limits() = %+v; want flows 3, webhooks unlimited, the rest the plan's", l)
	}
	must(t, "replace", s.SetProjectLimits(ctx, p.ID, map[string]int64{"concurrentRuns": 1}))
	got, err := s.Project(ctx, p.ID)
	must(t, "Project", err)
	if d := cmp.Diff(map[string]int64{"concurrentRuns": 1}, got.LimitOverrides); d != "" {
		t.Errorf("after a replace: overrides (-want +got):\n%s", d)
	}
	must(t, "clear", s.SetProjectLimits(ctx, p.ID, nil))
	if got, _ := s.Project(ctx, p.ID); len(got.LimitOverrides) != 0 {
		t.Errorf("after clearing: overrides %v", got.LimitOverrides)
	}
	err = s.SetProjectLimits(ctx, automation.NewID(automation.PrefixProject), want)
	wantKind(t, "SetProjectLimits(unknown)", err, automation.ErrNotFound, "PROJECT_NOT_FOUND")
}
