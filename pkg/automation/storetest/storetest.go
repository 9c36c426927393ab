// Package storetest is the contract suite every automation.Store and
// automation.Secrets adapter passes: the embedded SQLite store and the
// DynamoDB store run the same test functions, so the Service can rely on the
// doc comments of pkg/automation/ports.go whichever adapter is wired.
//
// The suite builds values by hand (no Service), with IDs from
// automation.NewID and times truncated to milliseconds in UTC, as the Service
// makes them.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// Run runs the store contract against the adapter open makes. open must
// return an empty store each call and arrange its own cleanup (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) automation.Store) {
	t.Run("Projects", func(t *testing.T) { testProjects(t, open(t)) })
	t.Run("ProjectLimits", func(t *testing.T) { testProjectLimits(t, open(t)) })
	t.Run("Keys", func(t *testing.T) { testKeys(t, open(t)) })
	t.Run("FlowCreateGet", func(t *testing.T) { testFlowCreateGet(t, open(t)) })
	t.Run("FlowPut", func(t *testing.T) { testFlowPut(t, open(t)) })
	t.Run("FlowPutKeepsStats", func(t *testing.T) { testFlowPutKeepsStats(t, open(t)) })
	t.Run("Routes", func(t *testing.T) { testRoutes(t, open(t)) })
	t.Run("RoutesMove", func(t *testing.T) { testRoutesMove(t, open(t)) })
	t.Run("RoutesNamespace", func(t *testing.T) { testRoutesNamespace(t, open(t)) })
	t.Run("RouteShapes", func(t *testing.T) { testRouteShapes(t, open(t)) })
	t.Run("RouteShapesRace", func(t *testing.T) { testRouteShapesRace(t, open(t)) })
	t.Run("FlowDelete", func(t *testing.T) { testFlowDelete(t, open(t)) })
	t.Run("ListFlows", func(t *testing.T) { testListFlows(t, open(t)) })
	t.Run("ListFlowsStatus", func(t *testing.T) { testListFlowsStatus(t, open(t)) })
	t.Run("Connections", func(t *testing.T) { testConnections(t, open(t)) })
	t.Run("ListConnections", func(t *testing.T) { testListConnections(t, open(t)) })
	t.Run("SampleArming", func(t *testing.T) { testSampleArming(t, open(t)) })
	t.Run("SamplePut", func(t *testing.T) { testSamplePut(t, open(t)) })
	t.Run("SampleTakeRace", func(t *testing.T) { testSampleTakeRace(t, open(t)) })
	t.Run("SampleGoesWithFlow", func(t *testing.T) { testSampleGoesWithFlow(t, open(t)) })
	t.Run("FlowState", func(t *testing.T) { testFlowState(t, open(t)) })
	t.Run("FlowStateRace", func(t *testing.T) { testFlowStateRace(t, open(t)) })
	t.Run("ConcurrentWrites", func(t *testing.T) { testConcurrentWrites(t, open(t)) })
	t.Run("Variables", func(t *testing.T) { testVariables(t, open(t)) })
	t.Run("VariablesRace", func(t *testing.T) { testVariablesRace(t, open(t)) })
	t.Run("FlowManagedBy", func(t *testing.T) { testFlowManagedBy(t, open(t)) })
	t.Run("KeyRoles", func(t *testing.T) { testKeyRoles(t, open(t)) })
	t.Run("AuditLog", func(t *testing.T) { testAuditLog(t, open(t)) })
	t.Run("AuditInTheChange", func(t *testing.T) { testAuditInTheChange(t, open(t)) })
	t.Run("AuditVariables", func(t *testing.T) { testAuditVariables(t, open(t)) })
	t.Run("FlowQuota", func(t *testing.T) { testFlowQuota(t, open(t)) }) // quota.go
	t.Run("ConnectionHosts", func(t *testing.T) { testConnectionHosts(t, open(t)) })
	t.Run("FlowVersions", func(t *testing.T) { testFlowVersions(t, open(t)) })
	t.Run("FlowDraft", func(t *testing.T) { testFlowDraft(t, open(t)) })
	t.Run("Slots", func(t *testing.T) { testSlots(t, open(t)) })
	t.Run("SlotsRace", func(t *testing.T) { testSlotsRace(t, open(t)) })
	t.Run("FlowLimits", func(t *testing.T) { testFlowLimits(t, open(t)) })
	t.Run("PollState", func(t *testing.T) { testPollState(t, open(t)) })
	t.Run("ListFlowsVersion", func(t *testing.T) { testListFlowsVersion(t, open(t)) }) // flowlist.go
	t.Run("AITokens", func(t *testing.T) { testAITokens(t, open(t)) })                 // aitokens.go
}

// now is a base time as the Service makes them: UTC, milliseconds.
func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

// wantKind fails unless err wraps kind and, when code is set, is an
// *automation.Error with that code.
func wantKind(t *testing.T, what string, err, kind error, code string) *automation.Error {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: err = %v, want an error wrapping %v", what, err, kind)
	}
	var e *automation.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: err = %v (%T), want an *automation.Error", what, err, err)
	}
	if code != "" && e.Code != code {
		t.Fatalf("%s: code = %s, want %s (message %q)", what, e.Code, code, e.Message)
	}
	return e
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func newProject(name string, created time.Time) automation.Project {
	return automation.Project{ID: automation.NewID(automation.PrefixProject), Name: name,
		Plan: automation.PlanTeam, Created: created}
}

func testProjects(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p1 := newProject("alpha", base)
	p2 := newProject("beta", base.Add(time.Millisecond))
	p2.Plan = automation.PlanEnterprise
	must(t, "create p1", s.CreateProject(ctx, p1))
	must(t, "create p2", s.CreateProject(ctx, p2))

	for _, want := range []automation.Project{p1, p2} {
		got, err := s.Project(ctx, want.ID)
		must(t, "Project", err)
		equalProject(t, "Project("+want.ID+")", got, want)
		got, err = s.ProjectByName(ctx, want.Name)
		must(t, "ProjectByName", err)
		equalProject(t, "ProjectByName("+want.Name+")", got, want)
	}

	dup := newProject("alpha", base)
	wantKind(t, "create a second alpha", s.CreateProject(ctx, dup), automation.ErrConflict, "PROJECT_EXISTS")
	if _, err := s.Project(ctx, dup.ID); !automation.IsNotFound(err) {
		t.Errorf("the refused project was stored anyway: Project = %v", err)
	}

	_, err := s.Project(ctx, automation.NewID(automation.PrefixProject))
	wantKind(t, "Project(unknown)", err, automation.ErrNotFound, "PROJECT_NOT_FOUND")
	_, err = s.ProjectByName(ctx, "gamma")
	wantKind(t, "ProjectByName(unknown)", err, automation.ErrNotFound, "PROJECT_NOT_FOUND")

	p3 := newProject("gamma", base.Add(2*time.Millisecond))
	must(t, "create p3", s.CreateProject(ctx, p3))
	all, err := s.Projects(ctx)
	must(t, "Projects", err)
	if len(all) != 3 {
		t.Fatalf("Projects = %d items, want 3", len(all))
	}
	for i, want := range []automation.Project{p1, p2, p3} {
		equalProject(t, fmt.Sprintf("Projects[%d]", i), all[i], want)
	}
}

func equalProject(t *testing.T, what string, got, want automation.Project) {
	t.Helper()
	wantSame(t, what, got, want)
}

func newKey(project string, created time.Time) automation.APIKey {
	secret := automation.NewID(automation.PrefixAPIKey)
	return automation.APIKey{ID: automation.NewID(automation.PrefixKey), Project: project,
		Hash: automation.HashAPIKey(secret), Prefix: secret[:10], Created: created, Role: automation.RoleAdmin}
}

func testKeys(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p1, p2 := newProject("one", base), newProject("two", base)
	must(t, "create p1", s.CreateProject(ctx, p1))
	must(t, "create p2", s.CreateProject(ctx, p2))

	// Interleaved so that per-project order and the all-projects order differ.
	k1 := newKey(p1.ID, base)
	k2 := newKey(p2.ID, base.Add(time.Millisecond))
	k3 := newKey(p1.ID, base.Add(2*time.Millisecond))
	for _, k := range []automation.APIKey{k1, k2, k3} {
		must(t, "CreateKey", s.CreateKey(ctx, k))
	}

	got, err := s.KeyByHash(ctx, k2.Hash)
	must(t, "KeyByHash", err)
	equalKey(t, "KeyByHash(k2)", got, k2)
	_, err = s.KeyByHash(ctx, automation.HashAPIKey("fsk_unknown"))
	wantKind(t, "KeyByHash(unknown)", err, automation.ErrNotFound, "")

	ks, err := s.Keys(ctx, p1.ID)
	must(t, "Keys(p1)", err)
	equalKeys(t, "Keys(p1)", ks, []automation.APIKey{k1, k3})
	ks, err = s.Keys(ctx, "")
	must(t, "Keys(all)", err)
	equalKeys(t, "Keys(all)", ks, []automation.APIKey{k1, k2, k3})
	ks, err = s.Keys(ctx, automation.NewID(automation.PrefixProject))
	must(t, "Keys(unknown project)", err)
	equalKeys(t, "Keys(unknown project)", ks, nil)

	at := base.Add(time.Hour)
	must(t, "RevokeKey", s.RevokeKey(ctx, k1.ID, at))
	got, err = s.KeyByHash(ctx, k1.Hash)
	must(t, "KeyByHash(revoked)", err)
	if got.Revoked == nil || !got.Revoked.Equal(at) {
		t.Fatalf("revoked key: Revoked = %v, want %v", got.Revoked, at)
	}
	// Revoking again leaves the first time.
	must(t, "RevokeKey again", s.RevokeKey(ctx, k1.ID, at.Add(time.Hour)))
	got, err = s.KeyByHash(ctx, k1.Hash)
	must(t, "KeyByHash(revoked twice)", err)
	if got.Revoked == nil || !got.Revoked.Equal(at) {
		t.Errorf("key revoked twice: Revoked = %v, want the first time %v", got.Revoked, at)
	}
	// The others are untouched.
	got, err = s.KeyByHash(ctx, k3.Hash)
	must(t, "KeyByHash(k3)", err)
	if got.Revoked != nil {
		t.Errorf("revoking k1 revoked k3 too: %v", got.Revoked)
	}
	wantKind(t, "RevokeKey(unknown)", s.RevokeKey(ctx, automation.NewID(automation.PrefixKey), at),
		automation.ErrNotFound, "")
}

func equalKey(t *testing.T, what string, got, want automation.APIKey) {
	t.Helper()
	wantSame(t, what, got, want)
}

func equalKeys(t *testing.T, what string, got, want []automation.APIKey) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %d keys, want %d", what, len(got), len(want))
	}
	for i := range want {
		equalKey(t, fmt.Sprintf("%s[%d]", what, i), got[i], want[i])
	}
}
