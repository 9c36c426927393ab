// Package automation is the domain of the flow service: projects, API keys,
// flows, connections and runs, the rules that govern them, and the ports
// (stores, secrets, queue, scheduler) that adapters implement. It imports only
// the standard library, so the same rules hold on flowd and on Lambda.
package automation

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// Page sizes of the list endpoints.
const (
	DefaultPageSize = 10
	MaxPageSize     = 100
)

// Config wires a Service. Store, Secrets, Checker and CursorKey are required.
type Config struct {
	Store     Store
	Secrets   Secrets
	Checker   Checker
	Scheduler Scheduler // nil: schedules are not kept (no SCHEDULE runner)
	// The optional capabilities of a backend, each nil where it has none
	// (docs/architecture.md, "Capabilities"):
	//   - SecretCache answers secrets read on every delivery or run from a
	//     short cache (the AWS backend); nil reads Secrets each time.
	//   - Polls keeps POLL flows' state; nil: POLL flows show no status and
	//     poll nothing.
	//   - CodeChecker compiles CODE scripts at save time; nil: a script's
	//     syntax error shows when it runs.
	//   - PollChecker refuses POLL intervals the backend's scheduler cannot
	//     keep (EventBridge's whole minutes); nil: every valid interval.
	//   - Tracer records runs, steps and outbound requests as spans
	//     (tracing.go); nil: tracing is off and costs nothing.
	SecretCache CachedSecrets
	//   - RateBuckets counts webhooksPerSecond, outboundPerMinute and
	//     runsPerMinute per project across instances (the AWS backend,
	//     a cluster on PostgreSQL); nil: in this process's memory, exact
	//     where there is one process (flowd on SQLite).
	RateBuckets RateBuckets
	Polls       PollStore
	CodeChecker CodeChecker
	PollChecker PollChecker
	Tracer      Tracer
	// Runtime runs flows; nil for tools that only administer (flowctl).
	Runtime *RunRuntime
	// OAuthApps and OAuth serve OAuth2 connections; nil: no
	// OAuth2 apps can be configured, and OAUTH2 connections cannot refresh.
	OAuthApps OAuthAppStore
	OAuth     OAuthClient
	// Users keeps people (users.go): users, memberships, set-up links,
	// sessions; nil: only API keys sign in (every user operation is a 501
	// USERS_NOT_AVAILABLE). Passwords hashes their passwords; nil: no
	// password sign-in (OpenID Connect only).
	Users     UserStore
	Passwords PasswordHasher
	// Apps is the app catalog (pkg/apps); nil: no apps, ACTION steps are
	// refused.
	Apps AppCatalog
	// CursorKey authenticates page cursors: at least 32 bytes, kept secret
	// and stable across restarts and instances.
	CursorKey []byte
	// EngineURL and WorkflowURL are the public bases of the webhook
	// receivers, used in webhook descriptors.
	EngineURL, WorkflowURL string
	Clock                  func() time.Time // default time.Now
	NewID                  func(prefix string) string
	Log                    *slog.Logger
}

// Service carries out every operation of the management API and the
// receivers. It is the composition root of the domain: one small service
// per aggregate, each holding only the ports it uses, embedded so that
// every operation is a method of Service (svc.CreateFlow, svc.StartRun).
// docs/architecture.md maps each service to its files. It is safe for
// concurrent use.
type Service struct {
	*ProjectService    // projects, API keys and roles, audit, quotas (projectservice.go)
	*FlowService       // flows, drafts, versions, validation (flowservice.go)
	*ConnectionService // connections, OAuth2, credentials (connectionservice.go)
	*VariableService   // project variables (variableservice.go)
	*RunService        // runs and the run state machine (runservice.go)
	*UserService       // people, memberships, sessions, personal keys (users.go)
}

// NewService checks cfg, builds the services and wires them together.
func NewService(cfg Config) (*Service, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("automation: Config.Store is required")
	case cfg.Secrets == nil:
		return nil, errors.New("automation: Config.Secrets is required")
	case cfg.Checker == nil:
		return nil, errors.New("automation: Config.Checker is required")
	case len(cfg.CursorKey) < 32:
		return nil, errors.New("automation: Config.CursorKey needs at least 32 bytes")
	}
	b := newBase(cfg)
	projects := &ProjectService{base: b, store: cfg.Store, buckets: cfg.RateBuckets, users: cfg.Users}
	secrets := secretStore{Secrets: cfg.Secrets, cache: cfg.SecretCache}
	variables := &VariableService{base: b, store: cfg.Store, secrets: secrets}
	flows := &FlowService{
		base:          b,
		flowValidator: &flowValidator{base: b, checker: cfg.Checker, code: cfg.CodeChecker, polls: cfg.PollChecker, apps: cfg.Apps, store: cfg.Store},
		store:         cfg.Store,
		pollStore:     cfg.Polls,
		secrets:       secrets,
		checker:       cfg.Checker,
		scheduler:     cfg.Scheduler,
		engineURL:     trimSlash(cfg.EngineURL),
		workflowURL:   trimSlash(cfg.WorkflowURL),
		projects:      projects,
		variables:     variables,
	}
	s := &Service{
		ProjectService: projects,
		FlowService:    flows,
		ConnectionService: &ConnectionService{base: b, store: cfg.Store, secrets: secrets,
			oauthApps: cfg.OAuthApps, oauth: cfg.OAuth, apps: cfg.Apps},
		VariableService: variables,
		RunService: &RunService{base: b, store: cfg.Store, checker: cfg.Checker, rt: cfg.Runtime,
			flows: flows, projects: projects, tracer: cfg.Tracer},
		UserService: newUserService(b, cfg),
	}
	if cfg.Runtime != nil && cfg.Runtime.NewExecutor != nil {
		// The executor reads credentials, variables, state and calls
		// through the services, and the RunService executes with it.
		s.RunService.exec = cfg.Runtime.NewExecutor(ExecEnv{
			Credentials: s.ConnectionService, ConnectionNames: s.ConnectionService,
			State: s.FlowService, Variables: s.VariableService,
			Calls: s.RunService, Outbound: s.ProjectService, Tracer: cfg.Tracer,
			Waitpoints: s.RunService,
			Actions:    cfg.Apps,
			ToolFlows:  s.FlowService, // AI steps' flow tools (ai.go)
			AITokens:   s.ProjectService,
		})
	}
	return s, nil
}

// base is what every service of the package shares: the clock, the ID
// maker, the log and the key that seals page cursors.
type base struct {
	now     func() time.Time
	newID   func(prefix string) string
	log     *slog.Logger
	cursors cursors
}

func newBase(cfg Config) *base {
	b := &base{now: cfg.Clock, newID: cfg.NewID, log: cfg.Log, cursors: cursors{key: cfg.CursorKey}}
	if b.now == nil {
		b.now = time.Now
	}
	if b.newID == nil {
		b.newID = NewID
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b
}

// clock returns the current time as stored and shown: UTC, milliseconds.
func (b *base) clock() time.Time { return b.now().UTC().Truncate(time.Millisecond) }

func trimSlash(u string) string {
	for len(u) > 0 && u[len(u)-1] == '/' {
		u = u[:len(u)-1]
	}
	return u
}

// List is one page of a list endpoint, in the interface document's envelope.
type List[T any] struct {
	Data    []T     `json:"data"`
	Cursor  *string `json:"cursor"`
	HasMore bool    `json:"hasMore"`
}

// PageRequest is what a client asks of a list endpoint, unparsed, so that the
// rules for limits and cursors live here once.
type PageRequest struct {
	Limit  string // "" for the default
	Cursor string
	Status string
}

// listQuery checks a PageRequest for the list named scope.
func (s *base) listQuery(scope string, pr PageRequest) (ListQuery, error) {
	q := ListQuery{Limit: DefaultPageSize, Status: pr.Status}
	if pr.Limit != "" {
		n, err := strconv.Atoi(pr.Limit)
		if err != nil || n < 1 || n > MaxPageSize {
			return q, InvalidCode("INVALID_PARAMETER", "limit must be an integer from 1 to %d, got %q", MaxPageSize, pr.Limit)
		}
		q.Limit = n
	}
	if pr.Cursor != "" {
		pos, err := s.cursors.open(scope+"\x00"+pr.Status, pr.Cursor)
		if err != nil {
			return q, err
		}
		q.After = pos
	}
	return q, nil
}

// sealCursor seals a list's next position for the list named scope.
func (b *base) sealCursor(scope, next string) string { return b.cursors.seal(scope, next) }

// cursorSealer is every service: each embeds *base.
type cursorSealer interface {
	sealCursor(scope, next string) string
}

// list turns a store page into the envelope, sealing its next position.
func list[T, U any](s cursorSealer, scope string, q ListQuery, p Page[T], view func(T) U) List[U] {
	out := List[U]{Data: make([]U, 0, len(p.Items)), HasMore: p.Next != ""}
	for _, it := range p.Items {
		out.Data = append(out.Data, view(it))
	}
	if p.Next != "" {
		c := s.sealCursor(scope+"\x00"+q.Status, p.Next)
		out.Cursor = &c
	}
	return out
}

func wrap(op string, err error) error {
	// Callers return wrap(op, err) on success paths too.
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("automation: %s: %w", op, err)
}
