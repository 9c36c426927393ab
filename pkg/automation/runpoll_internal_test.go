package automation

import (
	"context"
	"testing"
)

// statusRuns is a RunStore that answers Run and RunStatus from fields and
// counts the calls; the other methods are not used by pollRun.
type statusRuns struct {
	RunStore
	status    RunStatus
	statusErr error
	run       Run
	statuses  int
	runs      int
}

func (s *statusRuns) RunStatus(context.Context, string, string, string) (RunStatus, error) {
	s.statuses++
	return s.status, s.statusErr
}

func (s *statusRuns) Run(context.Context, string, string, string) (Run, error) {
	s.runs++
	return s.run, nil
}

func TestPollRunReadsTheStatusUntilFinal(t *testing.T) {
	waiting := Run{ID: "run_1", Project: "prj_a", FlowID: "flw_1", Status: RunRunning}
	done := waiting
	done.Status, done.Error = RunFailed, "boom"
	for _, c := range []struct {
		name         string
		store        *statusRuns
		wantFinal    bool
		wantStatuses int
		wantRuns     int
		wantRun      Run
	}{
		{name: "running: the status alone", store: &statusRuns{status: RunRunning, run: waiting},
			wantStatuses: 1, wantRuns: 0},
		{name: "final: then the whole run", store: &statusRuns{status: RunFailed, run: done},
			wantFinal: true, wantStatuses: 1, wantRuns: 1, wantRun: done},
		{name: "status read failed or lagging: the whole run settles it",
			store:        &statusRuns{statusErr: NotFound("run", "run_1"), run: waiting},
			wantStatuses: 1, wantRuns: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, final, err := pollRun(t.Context(), c.store, c.store, waiting)
			if err != nil {
				t.Fatal(err)
			}
			if final != c.wantFinal || c.store.statuses != c.wantStatuses || c.store.runs != c.wantRuns {
				t.Errorf("final %v after %d status reads and %d run reads; want %v, %d, %d",
					final, c.store.statuses, c.store.runs, c.wantFinal, c.wantStatuses, c.wantRuns)
			}
			if c.wantFinal && (got.Status != c.wantRun.Status || got.Error != c.wantRun.Error) {
				t.Errorf("run = %+v, want the whole final run %+v", got, c.wantRun)
			}
		})
	}
	// A backend without the status read (no StatusReader) is polled with
	// Run.
	inner := &statusRuns{status: RunRunning, run: done}
	got, final, err := pollRun(t.Context(), inner, nil, waiting)
	if err != nil || !final || got.Status != RunFailed || inner.statuses != 0 || inner.runs != 1 {
		t.Errorf("without RunStatus: %+v, %v, %v after %d status reads; want the final run from Run", got, final, err, inner.statuses)
	}
}
