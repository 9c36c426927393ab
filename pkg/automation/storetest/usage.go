package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// testStoredBytes: a project's stored bytes count its finished runs (at
// least their trigger bodies and step outputs), and another project's
// runs not at all.
func testStoredBytes(t *testing.T, env RunEnv) {
	ctx := context.Background()
	f := runFixture(t, env)
	before, err := env.Store.StoredBytes(ctx, f.Project)
	must(t, "stored bytes before", err)
	other := newProject("other", now())
	must(t, "create other project", env.Store.CreateProject(ctx, other))

	const body, output = 100_000, 50_000
	r := newRun(f, now())
	r.Trigger.Body = json.RawMessage(`{"pad":"` + strings.Repeat("b", body) + `"}`)
	must(t, "create run", env.Create(ctx, r))
	c, err := env.Runs.ClaimRun(ctx, f.Project, r.ID, now(), time.Minute)
	must(t, "claim", err)
	fin := now()
	d := int64(1)
	c.Status, c.Started, c.Finished, c.DurationMs = automation.RunSucceeded, &fin, &fin, &d
	c.Steps = []automation.StepResult{{Name: "call", Type: automation.StepHTTP, Status: automation.StepSucceeded, Attempts: 1,
		Output: json.RawMessage(`{"pad":"` + strings.Repeat("o", output) + `"}`)}}
	must(t, "finish", env.Runs.FinishRun(ctx, c))

	after, err := env.Store.StoredBytes(ctx, f.Project)
	must(t, "stored bytes after", err)
	if after-before < body+output {
		t.Errorf("stored bytes grew by %d with a finished run of a %d-byte body and a %d-byte output, want at least %d",
			after-before, body, output, body+output)
	}
	if n, err := env.Store.StoredBytes(ctx, other.ID); err != nil || n != 0 {
		t.Errorf("another project's stored bytes = %d, %v; want 0", n, err)
	}
}
