package automation

import "context"

// FlowService holds flow definitions and everything about them short of
// running them: create, update, enable, delete and webhook settings
// (flows.go), drafts, published versions and the cache runs read pinned
// versions from (drafts.go, versions.go, versioncache.go), save-time
// validation (flowValidator, below), custom routes and which flow a
// delivery addresses (routeholder.go, routing.go), the trigger's
// idempotency key (triggers.go), the flow's state (state.go),
// Test Trigger samples (sample.go) and export/import (portable.go).
type FlowService struct {
	*base
	*flowValidator
	store       flowPorts
	pollStore   PollStore   // nil: the backend keeps no poll state (poll.go)
	secrets     secretStore // flows/<id>: a flow's webhook secrets
	checker     Checker     // a trigger's idempotency key (triggers.go)
	scheduler   Scheduler   // nil: schedules are not kept
	engineURL   string
	workflowURL string
	versions    versionCache // flow versions pinned runs execute (versioncache.go)
	projects    *ProjectService
	variables   *VariableService
}

// flowPorts is the part of Store a FlowService uses; an export reads the
// connections its steps name (Connection).
type flowPorts interface {
	FlowStore
	VersionStore
	SampleStore
	StateStore
	Connection(ctx context.Context, project, id string) (Connection, error)
}

// flowValidator checks a flow definition when it is saved (validate.go, and
// each trigger or step type's part in its own file: flowlimits.go, poll.go,
// paginate.go, respond.go, callflow.go). It needs only the expression
// checker and the project's connections and flows, which a step may name
// (an HTTP step's connectionId, a CALL_FLOW step's flowId).
type flowValidator struct {
	*base
	checker Checker
	code    CodeChecker // nil: CODE scripts are compiled when they run
	polls   PollChecker // nil: every valid POLL interval
	apps    AppCatalog  // nil: ACTION steps are refused
	store   interface {
		Connection(ctx context.Context, project, id string) (Connection, error)
		Flow(ctx context.Context, project, id string) (Flow, error)
		// A CALL_FLOW step naming its flow (portable.go) is resolved
		// among the project's flows.
		ListFlows(ctx context.Context, project string, q ListQuery) (Page[Flow], error)
		// SQL and EMAIL steps name their connection: its type is checked.
		ListConnections(ctx context.Context, project string, q ListQuery) (Page[Connection], error)
	}
}
