package sqlitestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestClaimDueSharedFindsAnotherProject: behind 3,000 due entries of a
// project that holds its share of the workers, a shared claim finds the
// one entry of another project (a plain batch claim takes the flooder's
// oldest), and takes no more of the flooder's than its share leaves.
func TestClaimDueSharedFindsAnotherProject(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "share.db"))
	t0 := time.Now().UTC().Truncate(time.Millisecond).Add(-time.Hour)
	runs := make([]automation.Run, 0, 3001)
	for i := range 3000 {
		runs = append(runs, automation.Run{ID: fmt.Sprintf("run_f%04d", i), Project: "prj_flood", FlowID: "flw_f",
			Status: automation.RunRunning, Created: t0.Add(time.Duration(i) * time.Millisecond), Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}})
	}
	runs = append(runs, automation.Run{ID: "run_quiet", Project: "prj_quiet", FlowID: "flw_q",
		Status: automation.RunRunning, Created: t0.Add(time.Hour - time.Second), Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}})
	for _, r := range runs {
		if err := s.Enqueue(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	now := t0.Add(time.Hour)

	es, err := s.ClaimDueShared(ctx, now, time.Minute, 4, automation.Share{Held: map[string]int{"prj_flood": 6}, PerProject: 6})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].RunID != "run_quiet" || es[0].Run == nil {
		t.Fatalf("shared claim with the flooder at its share = %+v; want run_quiet alone, claimed", es)
	}
	es, err = s.ClaimDueShared(ctx, now, time.Minute, 4, automation.Share{Held: map[string]int{"prj_flood": 4}, PerProject: 6})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].RunID != "run_f0000" || es[1].RunID != "run_f0001" {
		t.Fatalf("shared claim with room for 2 of the flooder's = %+v; want its two oldest", es)
	}
	es, err = s.ClaimDueBatch(ctx, now, time.Minute, 4)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 4 || es[0].RunID != "run_f0002" {
		t.Fatalf("plain batch claim = %+v; want the flooder's next 4, oldest first", es)
	}
}
