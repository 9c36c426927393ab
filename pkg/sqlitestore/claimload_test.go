package sqlitestore_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/sqlitestore"
)

// TestClaimDueBatchBoundedByBytes: a batch claim stops before the
// documents of its runs pass the batch's bytes (one run always comes),
// loads documents larger than a claim reads inline after the claim, with
// the attempt counted, and ends a run too large to load FAILED, saying
// why, without handing it over.
func TestClaimDueBatchBoundedByBytes(t *testing.T) {
	ctx := context.Background()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "claims.db"), sqlitestore.ClaimLimits(3<<20, 5<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	body := func(n int) json.RawMessage { return json.RawMessage(`"` + strings.Repeat("b", n) + `"`) }
	for i, r := range []struct {
		id   string
		size int
	}{{"run_a", 1200 << 10}, {"run_b", 1200 << 10}, {"run_big", 6 << 20}, {"run_c", 1200 << 10}} {
		if err := s.Enqueue(ctx, automation.Run{ID: r.id, Project: "prj_b", FlowID: "flw_b", Status: automation.RunRunning,
			Created: t0.Add(time.Duration(i) * time.Millisecond), Trigger: automation.TriggerData{Body: body(r.size)}}); err != nil {
			t.Fatal(err)
		}
	}
	at := t0.Add(time.Second)
	claim := func() []automation.QueueEntry {
		t.Helper()
		es, err := s.ClaimDueBatch(ctx, at, time.Minute, 10)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	es := claim()
	if len(es) != 2 || es[0].RunID != "run_a" || es[1].RunID != "run_b" {
		t.Fatalf("first batch = %+v; want run_a and run_b (a third would pass 3 MiB)", es)
	}
	for _, e := range es {
		if e.Run == nil || len(e.Run.Trigger.Body) != 1200<<10+2 || e.Run.Attempts != 1 || e.Run.LeaseToken == "" || e.Bytes < 1200<<10 {
			t.Fatalf("entry %s: bytes %d, run %v; want its run loaded after the claim, attempt 1", e.RunID, e.Bytes, e.Run != nil)
		}
	}
	es = claim()
	if len(es) != 1 || es[0].RunID != "run_big" || es[0].Run != nil {
		t.Fatalf("second batch = %+v; want run_big alone, not handed over", es)
	}
	big, err := s.Run(ctx, "prj_b", "flw_b", "run_big")
	if err != nil {
		t.Fatal(err)
	}
	if big.Status != automation.RunFailed || !strings.Contains(big.Error, "over the 5242880 bytes a run may take to load") || big.Attempts != 1 {
		t.Fatalf("run too large to load: %s %q attempts %d; want FAILED saying why, its claim counted", big.Status, big.Error, big.Attempts)
	}
	if es := claim(); len(es) != 1 || es[0].RunID != "run_c" || es[0].Run == nil {
		t.Fatalf("third batch = %+v; want run_c", es)
	}
}
