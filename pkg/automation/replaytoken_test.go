package automation_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestReplayTokenMakesRetriesSafe: a replay sent again with its token (a
// client retrying after a timeout) makes no second run of any failed run,
// even once the first try's runs have failed in turn; a new token is a new
// replay; a bad token is a 400 naming the field.
func TestReplayTokenMakesRetriesSafe(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	e := newEnv(t, automation.RunPolicy{}, func() time.Time { return now })
	ctx := context.Background()
	svc := newRecorder(t, status(400))
	f := e.flowOf(t, automation.Step{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: svc.URL})
	for range 3 {
		r := e.start1(t, f)
		if at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID); at.Run.Status != automation.RunFailed {
			t.Fatalf("run = %s, want FAILED", at.Run.Status)
		}
		now = now.Add(time.Minute)
	}
	running := func() []string {
		t.Helper()
		page, err := e.svc.SearchRuns(ctx, e.project, automation.RunSearch{PageRequest: automation.PageRequest{Status: "RUNNING"}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, raw := range page.Data {
			ids = append(ids, raw.ID)
		}
		return ids
	}
	req := automation.ReplayRequest{Status: "FAILED", ReplayToken: "replay-2026-05-01-a"}
	for try := range 2 {
		n, err := e.svc.ReplayRuns(ctx, e.project, req)
		if err != nil || n.Replayed != 3 {
			t.Fatalf("try %d: replayed %+v, %v; want 3", try, n, err)
		}
		if got := len(running()); got != 3 {
			t.Fatalf("try %d: %d RUNNING runs, want the 3 replays", try, got)
		}
	}
	// The replays fail too; the same replay again still makes nothing new.
	page, err := e.svc.SearchRuns(ctx, e.project, automation.RunSearch{PageRequest: automation.PageRequest{Status: "RUNNING"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range page.Data {
		if _, err := e.svc.ExecuteRun(ctx, e.project.ID, raw.ID); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.svc.ReplayRuns(ctx, e.project, req); err != nil || n.Replayed != 3 || len(running()) != 0 {
		t.Fatalf("third try after the replays failed: %+v, %v, %d RUNNING; want 3 counted, none made", n, err, len(running()))
	}
	// Another token is another replay: of the six FAILED runs, the three
	// originals; their replays are in the window with them, and a replay
	// never replays a replay of its own window.
	req.ReplayToken = "replay-2026-05-01-b"
	if n, err := e.svc.ReplayRuns(ctx, e.project, req); err != nil || n.Replayed != 3 {
		t.Fatalf("new token: %+v, %v; want the 3 originals", n, err)
	}
	for _, bad := range []string{"has space", strings.Repeat("x", 129)} {
		_, err := e.svc.ReplayRuns(ctx, e.project, automation.ReplayRequest{Status: "FAILED", ReplayToken: bad})
		if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), "replayToken") {
			t.Errorf("token %.20q: err %v, want a 400 naming replayToken", bad, err)
		}
	}
}
