package sqlitestore_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

func TestQueueState(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "stats.db"))
	st, err := s.QueueState(ctx)
	if err != nil || st.Depth != 0 || st.Parked != 0 || !st.OldestDue.IsZero() {
		t.Fatalf("empty queue stats = %+v, %v", st, err)
	}
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	for i, id := range []string{"run_1", "run_2", "run_3"} {
		r := automation.Run{ID: id, Project: "prj_s", FlowID: "flw_s", Status: automation.RunRunning,
			Created: t0.Add(time.Duration(i) * time.Second), Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}}
		if err := s.Enqueue(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Park(ctx, "run_1", "stopped"); err != nil {
		t.Fatal(err)
	}
	st, err = s.QueueState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Depth != 2 || st.Parked != 1 {
		t.Errorf("depth %d parked %d, want 2 and 1", st.Depth, st.Parked)
	}
	// The oldest unparked entry is run_2's, due when it was created.
	if want := t0.Add(time.Second); !st.OldestDue.Equal(want) {
		t.Errorf("oldest due %v, want %v", st.OldestDue, want)
	}
}
