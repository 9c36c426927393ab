package automation

import (
	"context"
	"time"
)

// ListQuery asks a store for one page of a list in creation order.
type ListQuery struct {
	Limit  int    // 1..MaxPageSize, already checked by the Service
	After  string // a store position from an earlier Page.Next; "" for the first page
	Status string // optional filter (flows: FlowStatus; runs: RunStatus)
}

// Page is one page of a list. Next is the store position after the last item
// when more items exist, and "" when this is the last page: stores read
// Limit+1 rows to know. The Service seals Next into an opaque cursor; stores
// never see or make cursors.
type Page[T any] struct {
	Items []T
	Next  string
}

// ProjectStore persists projects.
type ProjectStore interface {
	// CreateProject fails with ErrConflict if the name is taken.
	CreateProject(ctx context.Context, p Project) error
	// Project returns an error wrapping ErrNotFound if there is no such project.
	Project(ctx context.Context, id string) (Project, error)
	// ProjectByName returns an error wrapping ErrNotFound if no project has the name.
	ProjectByName(ctx context.Context, name string) (Project, error)
	// Projects lists all projects in creation order.
	Projects(ctx context.Context) ([]Project, error)
}

// KeyStore persists API keys, which are looked up by the hash of the key.
type KeyStore interface {
	CreateKey(ctx context.Context, k APIKey) error
	// KeyByHash returns the key with that hash, revoked or not, or an error
	// wrapping ErrNotFound.
	KeyByHash(ctx context.Context, hash string) (APIKey, error)
	// Keys lists the keys of a project, or of all projects for "", in
	// creation order.
	Keys(ctx context.Context, project string) ([]APIKey, error)
	// RevokeKey sets Revoked; an unknown ID is ErrNotFound, a revoked key is
	// left as it is.
	RevokeKey(ctx context.Context, id string, at time.Time) error
}

// FlowStore persists flows and the workflow builder routes they own.
type FlowStore interface {
	// CreateFlow stores a new flow (Version 1) and reserves f.Routes() in the
	// same atomic write; a route another flow holds fails the whole write
	// with ErrConflict (code ROUTE_CONFLICT).
	CreateFlow(ctx context.Context, f Flow) error
	// Flow returns an error wrapping ErrNotFound if the project has no such flow.
	Flow(ctx context.Context, project, id string) (Flow, error)
	// FlowByID finds a flow by its ID alone, for the flow builder receiver.
	FlowByID(ctx context.Context, id string) (Flow, error)
	// PutFlow replaces a flow's definition, metadata and allowlist, and moves
	// its routes to f.Routes(), atomically. It fails with ErrConflict (code
	// FLOW_MODIFIED) unless the stored version is f.Version-1, with
	// ErrConflict (ROUTE_CONFLICT) if a new route is held by another flow,
	// and with ErrNotFound if the flow is gone. Run stats are not written.
	PutFlow(ctx context.Context, f Flow) error
	// DeleteFlow removes a flow, its routes, its runs and its queued work.
	DeleteFlow(ctx context.Context, project, id string) error
	// ListFlows pages through a project's flows in creation order; with
	// q.Status set, every page but the last still holds q.Limit items.
	ListFlows(ctx context.Context, project string, q ListQuery) (Page[Flow], error)
	// RouteFlows returns the flow IDs registered on a workflow builder path,
	// by concrete method (GET, POST, PUT, DELETE); empty if none.
	RouteFlows(ctx context.Context, path string) (map[string]string, error)
}

// ConnectionStore persists connection metadata; credentials go to Secrets.
type ConnectionStore interface {
	CreateConnection(ctx context.Context, c Connection) error
	// Connection returns an error wrapping ErrNotFound if the project has no
	// such connection.
	Connection(ctx context.Context, project, id string) (Connection, error)
	ListConnections(ctx context.Context, project string, q ListQuery) (Page[Connection], error)
	// DeleteConnection returns an error wrapping ErrNotFound if it is gone.
	DeleteConnection(ctx context.Context, project, id string) error
	// SetConnectionStatus records a state change of DESIGN §8.
	SetConnectionStatus(ctx context.Context, project, id string, s ConnectionStatus, at time.Time) error
}

// Store is everything the Service persists outside Secrets.
type Store interface {
	ProjectStore
	KeyStore
	FlowStore
	ConnectionStore
}

// Secrets keeps write-only values: connection credentials and the secrets of
// a flow's webhook settings. Values are opaque bytes.
type Secrets interface {
	PutSecret(ctx context.Context, project, name string, value []byte) error
	// Secret returns an error wrapping ErrNotFound if there is no such secret.
	Secret(ctx context.Context, project, name string) ([]byte, error)
	// DeleteSecret removes a secret at once; a missing one is not an error.
	DeleteSecret(ctx context.Context, project, name string) error
}

// ConnectionSecretName is the Secrets name of a connection's credential.
func ConnectionSecretName(connectionID string) string { return "connections/" + connectionID }

// FlowSecretName is the Secrets name of a flow's webhook and step secrets.
func FlowSecretName(flowID string) string { return "flows/" + flowID }

// Scheduler keeps the schedules of SCHEDULE flows in step with the flows.
type Scheduler interface {
	// SyncSchedule makes f's schedule exist while f is an ACTIVE SCHEDULE
	// flow and not otherwise.
	SyncSchedule(ctx context.Context, f Flow) error
	// RemoveSchedule removes a flow's schedule; a missing one is not an error.
	RemoveSchedule(ctx context.Context, project, flowID string) error
}

// Checker validates the parts of a definition written in a language: it
// lives with the engine that evaluates them, so that what validates is what
// runs.
type Checker interface {
	// Expression checks a bare expression, such as a FILTER condition.
	Expression(src string) error
	// Template checks a string that may hold {{ expression }} parts.
	Template(s string) error
	// Cron checks a five-field cron spec in an IANA time zone.
	Cron(spec, timezone string) error
}
