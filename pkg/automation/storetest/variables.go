package storetest

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

func textPtr(s string) *string { return &s }

// setVariables is an UpdateVariables change that sets the given variables.
func setVariables(vs ...automation.Variable) func(map[string]automation.Variable) (map[string]automation.Variable, error) {
	return func(cur map[string]automation.Variable) (map[string]automation.Variable, error) {
		next := maps.Clone(cur)
		if next == nil {
			next = map[string]automation.Variable{}
		}
		for _, v := range vs {
			next[v.Name] = v
		}
		return next, nil
	}
}

// A project's variables: empty at first, replaced whole by each update with
// every field kept (a secret one without value, a plain one with an empty
// value), invisible to other projects, and a refusing change leaves them.
func testVariables(t *testing.T, s automation.Store) {
	ctx := context.Background()
	project := automation.NewID(automation.PrefixProject)
	other := automation.NewID(automation.PrefixProject)
	got, err := s.Variables(ctx, project)
	must(t, "Variables of a new project", err)
	if got == nil || len(got) != 0 {
		t.Fatalf("Variables of a new project = %#v, want an empty map", got)
	}

	t0 := now()
	base := automation.Variable{Name: "BASE_URL", Value: textPtr("https://api.example.com"), Created: t0, Updated: t0}
	token := automation.Variable{Name: "TOKEN", Secret: true, Created: t0, Updated: t0.Add(time.Second)}
	empty := automation.Variable{Name: "_empty", Value: textPtr(""), Created: t0, Updated: t0}
	must(t, "UpdateVariables", s.UpdateVariables(ctx, project, setVariables(base, token, empty)))
	want := map[string]automation.Variable{"BASE_URL": base, "TOKEN": token, "_empty": empty}
	got, err = s.Variables(ctx, project)
	must(t, "Variables", err)
	wantSame(t, "variables", got, want)

	// Replace one, delete another.
	base2 := base
	base2.Value, base2.Updated = textPtr("https://staging.example.com"), t0.Add(time.Minute)
	must(t, "UpdateVariables", s.UpdateVariables(ctx, project, func(cur map[string]automation.Variable) (map[string]automation.Variable, error) {
		wantSame(t, "variables seen by change", cur, want)
		next := maps.Clone(cur)
		next["BASE_URL"] = base2
		delete(next, "_empty")
		return next, nil
	}))
	want = map[string]automation.Variable{"BASE_URL": base2, "TOKEN": token}
	got, err = s.Variables(ctx, project)
	must(t, "Variables", err)
	wantSame(t, "variables after replace and delete", got, want)

	refused := errors.New("too many")
	if err := s.UpdateVariables(ctx, project, func(map[string]automation.Variable) (map[string]automation.Variable, error) {
		return nil, refused
	}); !errors.Is(err, refused) {
		t.Errorf("refused change: err = %v, want %v", err, refused)
	}
	got, err = s.Variables(ctx, project)
	must(t, "Variables", err)
	wantSame(t, "variables after a refused change", got, want)

	got, err = s.Variables(ctx, other)
	must(t, "Variables of another project", err)
	if len(got) != 0 {
		t.Errorf("another project reads %s", jsonOf(t, got))
	}
	must(t, "UpdateVariables of another project", s.UpdateVariables(ctx, other, setVariables(automation.Variable{Name: "BASE_URL", Value: textPtr("x"), Created: t0, Updated: t0})))
	got, err = s.Variables(ctx, project)
	must(t, "Variables", err)
	wantSame(t, "variables after another project's write", got, want)
}

// Concurrent updates of one project's variables each apply once.
func testVariablesRace(t *testing.T, s automation.Store) {
	ctx := context.Background()
	project := automation.NewID(automation.PrefixProject)
	const writers = 4
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			errs[i] = s.UpdateVariables(ctx, project, setVariables(automation.Variable{
				Name: "V" + strconv.Itoa(i), Value: textPtr(strconv.Itoa(i)), Created: now(), Updated: now()}))
		})
	}
	wg.Wait()
	var ok []string
	for i, err := range errs {
		if err == nil {
			ok = append(ok, "V"+strconv.Itoa(i))
		}
	}
	if len(ok) == 0 {
		t.Fatalf("every concurrent update failed: %v", errs)
	}
	got, err := s.Variables(ctx, project)
	must(t, "Variables", err)
	if len(got) != len(ok) {
		t.Errorf("variables = %s after successful updates of %v (errors %v)", jsonOf(t, got), ok, errs)
	}
	for _, name := range ok {
		if _, found := got[name]; !found {
			t.Errorf("variable %s of a successful update is missing: %s", name, jsonOf(t, got))
		}
	}
}

// A flow's ManagedBy marker is kept by create and put, and cleared by a
// put without it: `flowctl apply --prune` relies on it.
func testFlowManagedBy(t *testing.T, s automation.Store) {
	ctx := context.Background()
	f := flowBuilderWebhook(automation.NewID(automation.PrefixProject), "managed", now())
	f.ManagedBy = automation.ManagedByApply
	must(t, "CreateFlow", s.CreateFlow(ctx, f))
	got, err := s.Flow(ctx, f.Project, f.ID)
	must(t, "Flow", err)
	equalFlow(t, "managed flow", got, f)

	g := f
	g.ManagedBy, g.Version, g.Updated = "", 2, f.Updated.Add(time.Second)
	must(t, "PutFlow", s.PutFlow(ctx, g))
	got, err = s.Flow(ctx, f.Project, f.ID)
	must(t, "Flow", err)
	equalFlow(t, "unmarked flow", got, g)

	h := g
	h.ManagedBy, h.Version, h.Updated = automation.ManagedByApply, 3, g.Updated.Add(time.Second)
	must(t, "PutFlow", s.PutFlow(ctx, h))
	got, err = s.FlowByID(ctx, f.ID)
	must(t, "FlowByID", err)
	equalFlow(t, "marked again", got, h)
}
