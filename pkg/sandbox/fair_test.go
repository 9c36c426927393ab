package sandbox_test

import (
	"context"
	"testing"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/sandbox"
)

// TestOneProjectCannotTakeEveryChild: a project that keeps every child
// busy with scripts that loop until their timeout still leaves a child for
// another project, whose quick script finishes while the flood runs.
func TestOneProjectCannotTakeEveryChild(t *testing.T) {
	p, err := sandbox.New(sandbox.Config{Max: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })

	const floods = 8 // twice the children
	// The flood's scripts loop until the test stops them, after the quiet
	// one (or at their longest timeout, should the quiet one wait for a
	// child of theirs): the order of ends, not a time, says who waited.
	floodCtx, stopFlood := context.WithCancel(context.Background())
	defer stopFlood()
	type ended struct {
		res automation.CodeResult
		err error
	}
	flooded := make(chan ended, floods)
	for range floods {
		go func() {
			res, err := p.RunCode(floodCtx, automation.CodeRequest{
				Code: `while (true) {}`, Scope: []byte(`{}`), TimeoutMs: automation.MaxCodeTimeout.Milliseconds(), Project: "prj_flood",
			})
			flooded <- ended{res, err}
		}()
	}
	// The flood holds what it may (three of four children) and queues the rest.
	testwait.Event(t, "the flood to hold three children and queue the rest", func() bool {
		running, waiting := p.Load()
		return running >= 3 && running+waiting >= floods
	})
	res, err := p.RunCode(context.Background(), automation.CodeRequest{Code: `return 1`, Scope: []byte(`{}`),
		TimeoutMs: automation.MaxCodeTimeout.Milliseconds(), Project: "prj_quiet"})
	if err != nil || string(res.Output) != "1" {
		t.Fatalf("quiet project's script: %s %q %v; want 1 while the flood runs", res.Output, res.Error, err)
	}
	// Ordering, not timing: no flood script has ended yet.
	if n := len(flooded); n != 0 {
		e := <-flooded
		t.Fatalf("%d flood scripts ended (%q %v) before the quiet one: it waited for a child of theirs", n, e.res.Error, e.err)
	}
	stopFlood()
	for range floods {
		if e := <-flooded; e.err == nil && e.res.Error == "" {
			t.Errorf("a flood script ended without an error: %s", e.res.Output)
		}
	}
}
