package automation

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	xrate "golang.org/x/time/rate"
)

// Limits are a project's quotas: what it may make the service do, so that
// no tenant can take the service from the others or use it to flood a
// third party. A nil field is unlimited. docs/reliability.md lists the
// defaults and what happens past each.
type Limits struct {
	// WebhooksPerSecond bounds deliveries to the project's flows, both
	// receivers together; past it a delivery is 429 with Retry-After and
	// starts no run.
	WebhooksPerSecond *int64 `json:"webhooksPerSecond"`
	// ConcurrentRuns bounds the project's runs executing at once.
	ConcurrentRuns *int64 `json:"concurrentRuns"`
	// OutboundPerMinute bounds HTTP step requests, retries included.
	OutboundPerMinute *int64 `json:"outboundPerMinute"`
	// Flows bounds the project's flows; past it a create is 403
	// QUOTA_EXCEEDED.
	Flows *int64 `json:"flows"`
	// StoredBytes bounds runs, samples, state and flow versions.
	StoredBytes *int64 `json:"storedBytes"`
	// RunsPerMinute bounds the runs the project starts in a minute, every
	// way a run starts (runquota.go); past it a webhook is 429 with
	// Retry-After and a CALL_FLOW step fails with QUOTA_EXCEEDED.
	RunsPerMinute *int64 `json:"runsPerMinute"`
	// VersionsPerFlow bounds the published versions each flow keeps: a
	// publish past it prunes the oldest ones in its own write, except the
	// live one and those a RUNNING run is pinned to (versions.go). Nil
	// keeps every version.
	VersionsPerFlow *int64 `json:"versionsPerFlow"`
	// AITokensPerDay bounds the model tokens (input and output) the
	// project's AI steps use in a UTC day (aitokens.go): past it an AI
	// step fails with QUOTA_EXCEEDED before asking the model again.
	AITokensPerDay *int64 `json:"aiTokensPerDay"`
}

// LimitNames are the names of Limits' fields, as the API, flowctl and the
// stored overrides spell them.
var LimitNames = []string{"webhooksPerSecond", "concurrentRuns", "outboundPerMinute", "flows", "storedBytes", "runsPerMinute", "versionsPerFlow", "aiTokensPerDay"}

// Unlimited is how an override says "no limit".
const Unlimited int64 = -1

func limit(n int64) *int64 { return &n }

// DefaultLimits are the quotas of each plan.
func DefaultLimits(p Plan) Limits {
	switch p {
	case PlanEnterprise:
		// Versions are bounded even here: each one is a whole definition
		// (up to the 1 MiB body limit), and nothing else bounds how many
		// a flow collects.
		return Limits{VersionsPerFlow: limit(1000)}
	case PlanTeam:
		return Limits{WebhooksPerSecond: limit(100), ConcurrentRuns: limit(50), OutboundPerMinute: limit(6000),
			Flows: limit(1000), StoredBytes: limit(20 << 30), RunsPerMinute: limit(1200),
			VersionsPerFlow: limit(100), AITokensPerDay: limit(5_000_000)}
	default:
		return Limits{WebhooksPerSecond: limit(10), ConcurrentRuns: limit(5), OutboundPerMinute: limit(600),
			Flows: limit(50), StoredBytes: limit(1 << 30), RunsPerMinute: limit(120),
			VersionsPerFlow: limit(20), AITokensPerDay: limit(100_000)}
	}
}

// field is the Limits field of a name in LimitNames.
func (l *Limits) field(name string) **int64 {
	switch name {
	case "webhooksPerSecond":
		return &l.WebhooksPerSecond
	case "concurrentRuns":
		return &l.ConcurrentRuns
	case "outboundPerMinute":
		return &l.OutboundPerMinute
	case "flows":
		return &l.Flows
	case "storedBytes":
		return &l.StoredBytes
	case "runsPerMinute":
		return &l.RunsPerMinute
	case "versionsPerFlow":
		return &l.VersionsPerFlow
	case "aiTokensPerDay":
		return &l.AITokensPerDay
	}
	return nil
}

// Limits are the project's quotas: its plan's, with the operator's
// overrides applied.
func (p Project) Limits() Limits {
	l := DefaultLimits(p.Plan)
	for name, v := range p.LimitOverrides {
		f := l.field(name)
		if f == nil {
			continue // a name a later version dropped
		}
		if v == Unlimited {
			*f = nil
		} else {
			*f = limit(v)
		}
	}
	return l
}

// ParseLimit reads an override as an operator types it: a whole number of
// at least 0, "unlimited", or "default" (which removes the override and is
// returned as ok=false).
func ParseLimit(name, value string) (v int64, set bool, err error) {
	if !slices.Contains(LimitNames, name) {
		return 0, false, Invalid("unknown limit %q: allowed are %s", name, strings.Join(LimitNames, ", "))
	}
	switch strings.ToLower(strings.TrimSpace(value)) {
	case "unlimited":
		return Unlimited, true, nil
	case "default":
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil || n < 0 {
		return 0, false, Invalid("limit %s: %q is not a whole number of at least 0, \"unlimited\" or \"default\"", name, value)
	}
	return n, true, nil
}

// Usage is what a project uses now of what Limits bound.
type Usage struct {
	Flows int64 `json:"flows"`
	// StoredBytes is what the project's runs, webhook samples, flow
	// state and flow versions take in the store, measured now
	// (storage.go).
	StoredBytes int64 `json:"storedBytes"`
	// RunsPerMinute is the runs the project started in the current
	// minute (one process), or those of about the last minute that its
	// shared bucket still holds (Lambda, a cluster): runquota.go.
	RunsPerMinute int64 `json:"runsPerMinute"`
	// AITokensToday is the model tokens the project's AI steps used in
	// the current UTC day, counted in the store (aitokens.go).
	AITokensToday int64 `json:"aiTokensToday"`
}

// ProjectInfo is the answer of GET /api/v1/project.
type ProjectInfo struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Plan   Plan   `json:"plan"`
	Limits Limits `json:"limits"`
	Usage  Usage  `json:"usage"`
}

// ProjectInfo is the project of the caller with its limits and usage.
func (s *ProjectService) ProjectInfo(ctx context.Context, p Project) (ProjectInfo, error) {
	n, err := s.countFlows(ctx, p.ID, math.MaxInt64)
	if err != nil {
		return ProjectInfo{}, err
	}
	stored, err := s.storedBytes(ctx, p.ID) // storage.go
	if err != nil {
		return ProjectInfo{}, err
	}
	now := s.clock()
	runs, err := s.runsCounted(ctx, p.ID, p.Limits(), now) // runquota.go
	if err != nil {
		return ProjectInfo{}, err
	}
	tokens, err := s.store.AITokens(ctx, p.ID, AIDay(now))
	if err != nil {
		return ProjectInfo{}, wrap("read the project's model tokens of today", err)
	}
	return ProjectInfo{ID: p.ID, Name: p.Name, Plan: p.Plan, Limits: p.Limits(), Usage: Usage{Flows: n, StoredBytes: stored,
		RunsPerMinute: runs, AITokensToday: tokens}}, nil
}

// SetProjectLimits sets (or, for values not set, removes) the overrides of
// the named project's limits and answers the project. An operator's
// command: flowctl projects set-limits.
func (s *ProjectService) SetProjectLimits(ctx context.Context, name string, set map[string]int64, unset []string) (Project, error) {
	p, err := s.store.ProjectByName(ctx, name)
	if err != nil {
		return Project{}, wrap("set limits", err)
	}
	over := map[string]int64{}
	for k, v := range p.LimitOverrides {
		over[k] = v
	}
	for _, k := range unset {
		delete(over, k)
	}
	for k, v := range set {
		if !slices.Contains(LimitNames, k) || (v < 0 && v != Unlimited) {
			return Project{}, Invalid("limit %s: %d is not allowed", k, v)
		}
		over[k] = v
	}
	if err := s.store.SetProjectLimits(ctx, p.ID, over); err != nil {
		return Project{}, wrap("set limits", err)
	}
	p.LimitOverrides = over
	s.quotas.forget(p.ID)
	return p, nil
}

// countFlows counts the project's flows, reading no further than stop.
func (s *ProjectService) countFlows(ctx context.Context, project string, stop int64) (int64, error) {
	var n int64
	q := ListQuery{Limit: MaxPageSize}
	for n < stop {
		page, err := s.store.ListFlows(ctx, project, q)
		if err != nil {
			return 0, wrap("count flows", err)
		}
		n += int64(len(page.Items))
		if page.Next == "" {
			break
		}
		q.After = page.Next
	}
	return n, nil
}

// FlowBounds are the project's quotas a flow write keeps in its own
// atomic write (FlowStore.CreateFlow, PutFlow), so that concurrent
// requests cannot each pass a check made before the write. Never stored
// or read back.
type FlowBounds struct {
	// MaxFlows, on CreateFlow, is the most flows the project may hold:
	// the store counts them in the write and refuses a flow that would
	// exceed it with FlowQuotaExceeded. Nil: no bound.
	MaxFlows *int64
	// KeepVersions, on a write that publishes (VersionWrites.Publish),
	// bounds the versions the flow keeps: see VersionWrites. 0: no bound.
	KeepVersions int64
}

// minKeepVersions is the fewest versions a bound keeps: the live one and
// the one before it, which a run started just before the publish is
// pinned to, so that no run can be pinned to a version while it is
// pruned.
const minKeepVersions = 2

// flowBounds are p's bounds for a flow write.
func flowBounds(p Project) FlowBounds {
	l := p.Limits()
	b := FlowBounds{MaxFlows: l.Flows}
	if l.VersionsPerFlow != nil {
		b.KeepVersions = max(*l.VersionsPerFlow, minKeepVersions)
	}
	return b
}

// FlowQuotaExceeded is a create refused because the project holds max
// flows already: 403 QUOTA_EXCEEDED. Stores return it from CreateFlow.
func FlowQuotaExceeded(max int64) *Error {
	return Forbidden("QUOTA_EXCEEDED", "the project has %d flows, the most its plan allows (limits.flows); delete a flow or ask the operator to raise the limit", max)
}

// AdmitDelivery takes one delivery from the project's webhooksPerSecond
// quota. Past it, it returns a RateLimited error saying how long to wait.
// The bucket is the project's across every instance: with RateBuckets
// (Lambda, whose environments share nothing else: one conditional write
// per admitted delivery, none for an unlimited plan), else this process's
// (flowd, one process). A project over its storedBytes quota is refused
// first, the same way (storage.go).
func (s *ProjectService) AdmitDelivery(ctx context.Context, project string) error {
	now := s.clock()
	pq, err := s.quotas.get(ctx, s.store, project, now)
	if err != nil {
		return err
	}
	if err := s.admitStorage(ctx, project, pq.limits, pq.plan); err != nil { // storage.go
		return err
	}
	if s.buckets == nil {
		return s.quotas.admit(ctx, s.store, project, now)
	}
	l := pq.limits.WebhooksPerSecond
	if l == nil {
		return nil
	}
	if *l <= 0 { // a limit of 0 takes nothing
		return hooksLimited(pq, time.Second)
	}
	wait, err := s.buckets.Take(ctx, "webhooks#"+project, float64(*l), max(1, *l), now)
	if err != nil {
		return wrap("take a delivery from the project's webhooksPerSecond", err)
	}
	if wait > 0 {
		return hooksLimited(pq, wait)
	}
	return nil
}

// hooksLimited is a delivery over the project's webhooksPerSecond.
func hooksLimited(pq *projectQuota, wait time.Duration) error {
	return &RateLimited{Err: &Error{Kind: ErrRateLimited, Code: "RATE_LIMITED", Message: fmt.Sprintf(
		"the project takes at most %d webhooks per second on its %s plan (limits.webhooksPerSecond); retry after the seconds in Retry-After",
		*pq.limits.WebhooksPerSecond, pq.plan)}, RetryAfter: wait}
}

// RateLimited is a delivery over its project's rate: 429 with Retry-After.
type RateLimited struct {
	Err        *Error
	RetryAfter time.Duration
	// Limit names the limit (LimitNames) when it is not webhooksPerSecond.
	Limit string
}

func (e *RateLimited) Error() string { return e.Err.Message }
func (e *RateLimited) Unwrap() error { return e.Err }

// quotas keeps the projects' limits (briefly: an operator's change takes
// effect within limitsTTL) and their delivery buckets.
type quotas struct {
	mu       sync.Mutex
	projects map[string]*projectQuota
	runs     map[string]*runWindow // runquota.go
}

type projectQuota struct {
	limits  Limits
	plan    Plan
	fetched time.Time
	hooks   *xrate.Limiter
}

// limitsTTL is how long a project's limits are used before being read
// again, so that a webhook costs no project read.
const limitsTTL = 10 * time.Second

func (q *quotas) forget(project string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.projects, project)
}

func (q *quotas) get(ctx context.Context, store ProjectStore, project string, now time.Time) (*projectQuota, error) {
	q.mu.Lock()
	pq := q.projects[project]
	q.mu.Unlock()
	if pq != nil && now.Sub(pq.fetched) < limitsTTL {
		return pq, nil
	}
	p, err := store.Project(ctx, project)
	if err != nil {
		return nil, wrap("read the project's limits", err)
	}
	l := p.Limits()
	next := &projectQuota{limits: l, plan: p.Plan, fetched: now, hooks: xrate.NewLimiter(xrate.Inf, 0)}
	if l.WebhooksPerSecond != nil {
		// A burst of one second's worth: a sender may deliver a second's
		// quota at once, not more.
		next.hooks = xrate.NewLimiter(xrate.Limit(*l.WebhooksPerSecond), int(max(1, *l.WebhooksPerSecond)))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.projects == nil {
		q.projects = map[string]*projectQuota{}
	}
	if old := q.projects[project]; old != nil && old.limits.WebhooksPerSecond != nil && l.WebhooksPerSecond != nil &&
		*old.limits.WebhooksPerSecond == *l.WebhooksPerSecond {
		next.hooks = old.hooks // the same limit: keep the bucket's state
	}
	q.projects[project] = next
	return next, nil
}

func (q *quotas) admit(ctx context.Context, store ProjectStore, project string, now time.Time) error {
	pq, err := q.get(ctx, store, project, now)
	if err != nil {
		return err
	}
	if pq.limits.WebhooksPerSecond == nil {
		return nil
	}
	r := pq.hooks.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	if !r.OK() || wait > 0 {
		r.CancelAt(now)
		if !r.OK() { // a limit of 0 takes nothing
			wait = time.Second
		}
		return hooksLimited(pq, wait)
	}
	return nil
}
