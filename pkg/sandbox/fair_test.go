package sandbox_test

import (
	"context"
	"testing"
	"time"

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
	flooded := make(chan automation.CodeResult, floods)
	for range floods {
		go func() {
			res, err := p.RunCode(context.Background(), automation.CodeRequest{
				Code: `while (true) {}`, Scope: []byte(`{}`), TimeoutMs: 3000, Project: "prj_flood",
			})
			if err != nil {
				t.Errorf("flood script: %v", err)
			}
			flooded <- res
		}()
	}
	// The flood holds what it may (three of four children) and queues the rest.
	for running, waiting := p.Load(); running < 3 || running+waiting < floods; running, waiting = p.Load() {
		time.Sleep(time.Millisecond)
	}
	// A deadline far above a quick script's run time but below the flood's.
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	res, err := p.RunCode(ctx, automation.CodeRequest{Code: `return 1`, Scope: []byte(`{}`), TimeoutMs: 1000, Project: "prj_quiet"})
	if err != nil || string(res.Output) != "1" {
		t.Fatalf("quiet project's script: %s %q %v; want 1 while the flood runs", res.Output, res.Error, err)
	}
	// Ordering, not timing: no flood script has ended yet (each loops for 3 s).
	if n := len(flooded); n != 0 {
		t.Fatalf("%d flood scripts ended before the quiet one; the test did not overlap them", n)
	}
	for range floods {
		if res := <-flooded; res.Error == "" {
			t.Errorf("a flood script ended without an error: %s", res.Output)
		}
	}
}
