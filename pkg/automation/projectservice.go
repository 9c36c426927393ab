package automation

import (
	"context"
	"time"
)

// ProjectService holds the tenants and what they are allowed: projects,
// API keys and roles (admin.go, access.go), the audit log (audit.go), and
// the per-project limits with their usage: quotas (quota.go), stored bytes
// (storage.go) and the outbound request gate (outbound.go).
type ProjectService struct {
	*base
	store    projectPorts
	users    UserStore // nil: no people; personal keys are refused
	quotas   quotas
	storage  storageUsage  // storage.go
	outbound outboundGates // outbound.go
	// buckets, when set, count webhooksPerSecond and outboundPerMinute
	// for every instance together (Config.RateBuckets).
	buckets RateBuckets
}

// projectPorts is the part of Store a ProjectService uses; it counts flows
// (ListFlows) for the flows quota.
type projectPorts interface {
	ProjectStore
	KeyStore
	AuditStore
	UsageStore
	ListFlows(ctx context.Context, project string, q ListQuery) (Page[Flow], error)
}

// projectQuota returns a project's limits and delivery bucket from the
// quotas cache (quota.go), reading the project only when they are stale.
func (s *ProjectService) projectQuota(ctx context.Context, project string, now time.Time) (*projectQuota, error) {
	return s.quotas.get(ctx, s.store, project, now)
}
