package automation

import "context"

// RunStatusReader is a RunStore that can read a run's status without the
// run: what a wait that looks at a run every 100 ms (AwaitRun, while
// another attempt executes it) needs. On DynamoDB the whole run costs the
// transfer and decoding of its steps, and the payload objects of a large
// run are two S3 reads more; the status alone is a few bytes. A store
// without it is polled with Run.
type RunStatusReader interface {
	// RunStatus returns the status of the project's flow's run, or an
	// error wrapping ErrNotFound. It may lag the run's latest write
	// (an eventually consistent read): a wait looks again.
	RunStatus(ctx context.Context, project, flowID, id string) (RunStatus, error)
}

// pollRun looks at a run a wait is waiting for: the status alone where the
// store can read it, and the whole run (strongly consistent) only once the
// status is final. It reports whether the run is final. A failed or
// missing status read falls back to the whole run, which settles it (the
// status read may lag the run's creation).
func pollRun(ctx context.Context, runs RunStore, sr RunStatusReader, r Run) (Run, bool, error) {
	if sr != nil {
		st, err := sr.RunStatus(ctx, r.Project, r.FlowID, r.ID)
		if err == nil && !st.Final() {
			return Run{}, false, nil
		}
	}
	cur, err := runs.Run(ctx, r.Project, r.FlowID, r.ID)
	if err != nil {
		return Run{}, false, err
	}
	return cur.Public(), cur.Status.Final(), nil
}
