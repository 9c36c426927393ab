package automation

import "context"

// RunService holds runs: starting them from webhooks and test deliveries
// (runs.go, receive.go), schedules and polls (runs.go, poll.go's PollFlow),
// retries and replays (retry.go), CALL_FLOW steps (callflow.go) and queue
// messages (message.go); executing them through the run state machine
// (runstate.go, with admission, finishing and inline attempts in
// runstate_admission.go, runstate_finish.go and runstate_inline.go); the
// in-memory fast path of ON_COMPLETION runs without side effects (pure.go);
// and reading, searching and purging them (runquery.go). A trigger or
// step type's file (poll.go, callflow.go) holds both its save-time
// validation (flowValidator) and what it does at run time (RunService).
type RunService struct {
	*base
	store    runPorts
	checker  Checker
	rt       *RunRuntime // nil: runs are not configured (runtime())
	exec     Executor    // from rt.NewExecutor
	flows    *FlowService
	projects *ProjectService
	tracer   Tracer // nil: tracing is off (tracing.go)
}

// runPorts is the part of Store a RunService uses: the flows it runs, the
// admission slots, a flow's draft (a test run executes it) and the
// projects with their flows (ScheduledFlows lists them all), and the
// counters of finished runs that insights sum.
type runPorts interface {
	Flow(ctx context.Context, project, id string) (Flow, error)
	FlowByID(ctx context.Context, id string) (Flow, error)
	ListFlows(ctx context.Context, project string, q ListQuery) (Page[Flow], error)
	SlotStore
	Draft(ctx context.Context, project, flowID string) (Draft, error)
	Projects(ctx context.Context) ([]Project, error)
	InsightStore // a flow's counters of finished runs (insights.go)
}
