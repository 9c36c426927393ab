package automation

import "context"

// FlowService holds flow definitions and everything about them short of
// running them: create, update, enable, delete and webhook settings
// (flows.go), drafts, published versions and the cache runs read pinned
// versions from (drafts.go, versions.go, versioncache.go), save-time
// validation with its step-type parts (validate.go, flowlimits.go,
// poll.go, paginate.go, respond.go, callflow.go's validateCallFlow),
// custom routes (routeholder.go), the flow's state (state.go), Test Trigger
// samples (sample.go) and export/import (portable.go).
type FlowService struct {
	*base
	store       flowPorts // a PollStore too when the store keeps poll state (poll.go)
	secrets     Secrets   // flows/<id>: a flow's webhook secrets
	checker     Checker
	scheduler   Scheduler // nil: schedules are not kept
	engineURL   string
	workflowURL string
	versions    versionCache // flow versions pinned runs execute (versioncache.go)
	projects    *ProjectService
	variables   *VariableService
}

// flowPorts is the part of Store a FlowService uses; validation reads
// connections (Connection) to check a step's connection exists.
type flowPorts interface {
	FlowStore
	VersionStore
	SampleStore
	StateStore
	Connection(ctx context.Context, project, id string) (Connection, error)
}
