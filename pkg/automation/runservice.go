package automation

import "context"

// RunService holds runs: starting them from webhooks, schedules, polls,
// tests, retries, replays and CALL_FLOW steps (runs.go, sample.go,
// poll.go's PollFlow, retry.go, callflow.go, message.go), executing them
// through the run state machine (runstate.go, with admission, finishing
// and inline attempts in runstate_admission.go, runstate_finish.go and
// runstate_inline.go), the in-memory fast path of ON_COMPLETION runs
// without side effects (pure.go), and reading, searching and purging them.
type RunService struct {
	*base
	store    runPorts
	checker  Checker
	rt       *RunRuntime // nil: runs are not configured (runtime())
	exec     Executor    // from rt.NewExecutor
	flows    *FlowService
	projects *ProjectService
}

// runPorts is the part of Store a RunService uses: the flows it runs, the
// samples a Test Trigger captures, and the admission slots.
type runPorts interface {
	FlowStore
	SampleStore
	SlotStore
	VersionStore
	Projects(ctx context.Context) ([]Project, error) // ScheduledFlows
}
