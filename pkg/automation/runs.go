package automation

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Outcomes of ExecuteRun that a queue acts on.
var (
	// ErrRetry: the attempt failed transiently; run it again after a backoff.
	ErrRetry = errors.New("retry")
	// ErrExhausted: the run failed for good after the last attempt and is
	// FAILED; park the work (embedded) or let it reach the DLQ (AWS).
	ErrExhausted = errors.New("attempts exhausted")
	// ErrMethodNotAllowed: a known webhook path, another method (405).
	ErrMethodNotAllowed = errors.New("method not allowed")
)

// RunPolicy bounds runs. Zero fields take the defaults.
type RunPolicy struct {
	MaxAttempts int           // attempts before a transient failure is final; default 5
	Timeout     time.Duration // one attempt; default 5 minutes
	Retention   time.Duration // how long run records are kept; default 30 days
}

func (p RunPolicy) withDefaults() RunPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 5
	}
	if p.Timeout <= 0 {
		p.Timeout = 5 * time.Minute
	}
	if p.Retention <= 0 {
		p.Retention = 30 * 24 * time.Hour
	}
	return p
}

// Lease is how long a claim holds a run: longer than an attempt may take,
// so a live attempt is never taken over, short enough that the run of a
// crashed process is taken up again soon. Queues lease their entries at
// least as long.
func (p RunPolicy) Lease() time.Duration {
	t := p.withDefaults().Timeout
	return t + min(t/2, 30*time.Second)
}

// RunRuntime is what running flows needs beyond the management API.
type RunRuntime struct {
	Runs     RunStore
	Queue    RunQueue
	Executor Executor
	Policy   RunPolicy
}

// MethodError is a 405: the path exists for other methods.
type MethodError struct {
	Err     *Error
	Allowed []string // for the Allow header
}

func (e *MethodError) Error() string { return e.Err.Message }

// Unwrap exposes the client-facing *Error (kind ErrMethodNotAllowed).
func (e *MethodError) Unwrap() error { return e.Err }

func (s *Service) runtime() (*RunRuntime, error) {
	if s.rt == nil || s.rt.Runs == nil || s.rt.Queue == nil || s.rt.Executor == nil {
		return nil, errors.New("automation: runs are not configured (Config.Runtime)")
	}
	return s.rt, nil
}

// WebhookFlow returns the flow builder flow a webhook addresses by ID, with
// its secrets revealed for the receiver's checks: an ACTIVE flow, or an
// INACTIVE one whose Test Trigger is armed (ReceiveWebhook then lets one
// delivery through). Unknown, other inactive and workflow builder flows are
// all the same 404.
func (s *Service) WebhookFlow(ctx context.Context, flowID string) (Flow, error) {
	f, err := s.store.FlowByID(ctx, flowID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Flow{}, wrap("find webhook flow", err)
	}
	if err != nil || f.Engine != FlowBuilder || f.Trigger.Type != TriggerWebhook {
		return Flow{}, NotFound("flow", flowID)
	}
	if f.Status != FlowActive {
		armed, err := s.armed(ctx, f)
		if err != nil {
			return Flow{}, err
		}
		if !armed {
			return Flow{}, NotFound("flow", flowID)
		}
	}
	return s.RevealFlow(ctx, f)
}

// RouteFlow returns the ACTIVE workflow builder flow registered on path for
// method, secrets revealed. A path no active flow serves is a 404; a path
// served for other methods only is a *MethodError (405).
func (s *Service) RouteFlow(ctx context.Context, path, method string) (Flow, error) {
	return s.routeFlow(ctx, path, method, func(_ context.Context, f Flow) (bool, error) {
		return f.Status == FlowActive, nil
	})
}

// routeFlow finds the flow registered on path for method; usable decides
// whether the flow answers there now (a flow that does not is a 404). For
// each method, a literal path wins over a parameter path (route.go).
func (s *Service) routeFlow(ctx context.Context, path, method string, usable func(context.Context, Flow) (bool, error)) (Flow, error) {
	routes, err := s.routeMethods(ctx, path, method)
	if err != nil {
		return Flow{}, err
	}
	notFound := NotFound("webhook", path)
	var allowed []string
	var target string
	for _, m := range WebhookMethods {
		id, ok := routes[m]
		if !ok {
			continue
		}
		if m == method {
			target = id
		}
		allowed = append(allowed, m)
	}
	if len(allowed) == 0 {
		return Flow{}, notFound
	}
	if target == "" {
		return Flow{}, &MethodError{
			Err:     &Error{Kind: ErrMethodNotAllowed, Code: "METHOD_NOT_ALLOWED", Message: fmt.Sprintf("webhook %q takes %v, not %s", path, allowed, method)},
			Allowed: allowed,
		}
	}
	f, err := s.store.FlowByID(ctx, target)
	if errors.Is(err, ErrNotFound) {
		return Flow{}, notFound
	} else if err != nil {
		return Flow{}, wrap("find route flow", err)
	}
	ok, err := usable(ctx, f)
	if err != nil {
		return Flow{}, err
	}
	if !ok {
		return Flow{}, notFound
	}
	return s.RevealFlow(ctx, f)
}

// routeMethods is method -> flow ID for a request path: the literal path's
// routes, completed by those of the parameter shape that matches it (the
// most literal one, should two). The shapes are read only when the literal
// path lacks the method asked for.
func (s *Service) routeMethods(ctx context.Context, path, method string) (map[string]string, error) {
	routes, err := s.store.RouteFlows(ctx, path)
	if err != nil {
		return nil, wrap("find route", err)
	}
	if _, ok := routes[method]; ok && method != "" {
		return routes, nil
	}
	held, err := s.store.RouteShapes(ctx, Segments(path))
	if err != nil {
		return nil, wrap("find route shapes", err)
	}
	best := ""
	for _, h := range held {
		if IsPattern(h.Shape) && ShapeMatches(h.Shape, path) && (best == "" || moreLiteral(h.Shape, best)) {
			best = h.Shape
		}
	}
	if best == "" {
		return routes, nil
	}
	byShape, err := s.store.RouteFlows(ctx, best)
	if err != nil {
		return nil, wrap("find route", err)
	}
	out := make(map[string]string, len(routes)+len(byShape))
	for m, id := range byShape {
		out[m] = id
	}
	for m, id := range routes {
		out[m] = id // the literal path wins
	}
	return out, nil
}

// moreLiteral reports whether shape a has a literal segment where b, the
// first time they differ, has a parameter.
func moreLiteral(a, b string) bool {
	x, y := strings.Split(a, "/"), strings.Split(b, "/")
	for i := range min(len(x), len(y)) {
		if x[i] != y[i] {
			return y[i] == ":"
		}
	}
	return false
}

// IdempotencyWindow is how long a repeated delivery (same idempotency
// header value) gets the first run back instead of a new run.
const IdempotencyWindow = 24 * time.Hour

// StartRun makes a run of f for the trigger data durable and queued, and
// returns it RUNNING. Only then may a receiver answer 200. When the flow
// names an idempotency header and the delivery carries it, a repeat within
// IdempotencyWindow returns the first run and starts none.
func (s *Service) StartRun(ctx context.Context, f Flow, td TriggerData) (Run, error) {
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	r := Run{
		ID: s.newID(PrefixRun), Project: f.Project, FlowID: f.ID, Status: RunRunning,
		Trigger: td, Steps: []StepResult{}, Created: s.clock(),
	}
	key := s.idempotencyKey(ctx, f, td)
	if key == "" {
		if err := rt.Queue.Enqueue(ctx, r); err != nil {
			return Run{}, wrap("enqueue run", err)
		}
		return r, nil
	}
	// The first delivery's run has the ID derived from the key. Past the
	// window, a repeat is a new delivery: its run ID also carries the time.
	r.ID = derivedRunID(f.ID, key)
	err = rt.Queue.Enqueue(ctx, r)
	var e *Error
	if errors.As(err, &e) && e.Code == "RUN_EXISTS" {
		first, ferr := rt.Runs.Run(ctx, f.Project, f.ID, r.ID)
		if ferr != nil || r.Created.Sub(first.Created) < IdempotencyWindow {
			return first, wrap("find first delivery", ferr)
		}
		r.ID = derivedRunID(f.ID, key+"\x00"+r.Created.Format(time.RFC3339Nano))
		err = rt.Queue.Enqueue(ctx, r)
	}
	if err != nil {
		return Run{}, wrap("enqueue run", err)
	}
	return r, nil
}

// idempotencyKey is the value of the flow's idempotency header in the
// delivery, else that of its idempotencyKey expression (triggers.go), or
// "" when there is none.
func (s *Service) idempotencyKey(ctx context.Context, f Flow, td TriggerData) string {
	w := f.Trigger.Webhook
	if w == nil {
		return ""
	}
	if k := td.Headers[strings.ToLower(w.IdempotencyHeader)]; w.IdempotencyHeader != "" && k != "" {
		return k
	}
	return s.expressionKey(ctx, f, td)
}

// ExecuteRun makes one attempt at a queued run. It returns nil when the run
// is final (now, or already: a redelivered run never executes twice), an
// error wrapping ErrRetry when the attempt failed transiently and the run
// stays RUNNING, and one wrapping ErrExhausted when the last attempt failed
// and the run is now FAILED. Any other error (a store outage) is worth a
// retry too.
func (s *Service) ExecuteRun(ctx context.Context, project, runID string) (Run, error) {
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	p := rt.Policy.withDefaults()
	r, err := rt.Runs.ClaimRun(ctx, project, runID, s.clock(), p.Lease())
	var e *Error
	switch {
	case errors.As(err, &e) && e.Code == "RUN_FINISHED":
		return Run{}, nil
	case errors.Is(err, ErrNotFound):
		return Run{}, nil // its flow was deleted, and the run with it
	case err != nil:
		return Run{}, fmt.Errorf("%w: claim run %s: %w", ErrRetry, runID, err)
	}
	f, err := s.store.Flow(ctx, project, r.FlowID)
	if errors.Is(err, ErrNotFound) {
		r.Status, r.Error = RunFailed, "flow "+r.FlowID+" was deleted"
		return r, s.finish(ctx, rt, r)
	} else if err == nil {
		f, err = s.RevealFlow(ctx, f)
	}
	if err != nil {
		return Run{}, s.release(ctx, rt, r, fmt.Errorf("load flow: %w", err))
	}
	actx, cancel := context.WithTimeout(ctx, p.Timeout)
	ex := rt.Executor.Execute(actx, f, r)
	cancel()
	out := ex.Run
	switch {
	case out.Status == RunFailed && ex.Retryable && r.Attempts < p.MaxAttempts:
		return out, s.release(ctx, rt, out, errors.New(out.Error))
	case out.Status == RunFailed && ex.Retryable:
		out.Error = fmt.Sprintf("gave up after %d attempts: %s", r.Attempts, out.Error)
		if err := s.finish(ctx, rt, out); err != nil {
			return out, err
		}
		return out, fmt.Errorf("%w: run %s: %s", ErrExhausted, runID, out.Error)
	}
	return out, s.finish(ctx, rt, out)
}

func (s *Service) finish(ctx context.Context, rt *RunRuntime, r Run) error {
	now := s.clock()
	if r.Started == nil {
		r.Started = &now
	}
	if r.Finished == nil {
		r.Finished = &now
	}
	if r.DurationMs == nil {
		d := r.Finished.Sub(*r.Started).Milliseconds()
		r.DurationMs = &d
	}
	err := rt.Runs.FinishRun(ctx, r)
	var e *Error
	if errors.As(err, &e) && e.Code == "RUN_FINISHED" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: finish run %s: %w", ErrRetry, r.ID, err)
	}
	return nil
}

func (s *Service) release(ctx context.Context, rt *RunRuntime, r Run, cause error) error {
	if err := rt.Runs.ReleaseRun(ctx, r); err != nil {
		return fmt.Errorf("%w: release run %s after %v: %w", ErrRetry, r.ID, cause, err)
	}
	return fmt.Errorf("%w: run %s attempt %d: %w", ErrRetry, r.ID, r.Attempts, cause)
}

// AwaitRun executes a just-started run in the caller's goroutine, for
// synchronous (ON_COMPLETION) webhooks, and returns it final. When a worker
// holds the run already, it waits for that worker instead. If wait passes
// first it returns the run still RUNNING; the attempt goes on regardless,
// since it runs on its own context.
func (s *Service) AwaitRun(ctx context.Context, r Run, wait time.Duration) (Run, error) {
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	type result struct {
		run Run
		err error
	}
	done := make(chan result, 1)
	go func() {
		// Detached: a client that hangs up must not cut the run short.
		out, err := s.ExecuteRun(context.WithoutCancel(ctx), r.Project, r.ID)
		done <- result{out, err}
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case res := <-done:
			if res.err == nil && res.run.Status.Final() {
				return res.run, nil
			}
			done = nil // retried or claimed elsewhere: watch the record
		case <-tick.C:
			cur, err := rt.Runs.Run(ctx, r.Project, r.FlowID, r.ID)
			if err != nil {
				return Run{}, wrap("await run", err)
			}
			if cur.Status.Final() {
				return cur, nil
			}
		case <-timer.C:
			return r, nil
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
}

// ListRuns returns one page of a flow's run history, newest first.
func (s *Service) ListRuns(ctx context.Context, p Project, flowID string, pr PageRequest) (List[Run], error) {
	rt, err := s.runtime()
	if err != nil {
		return List[Run]{}, err
	}
	statuses := []string{string(RunRunning), string(RunSucceeded), string(RunFailed), string(RunTimeout)}
	if pr.Status != "" && !slices.Contains(statuses, pr.Status) {
		return List[Run]{}, InvalidCode("INVALID_PARAMETER", "status must be one of %v, got %q", statuses, pr.Status)
	}
	if _, err := s.store.Flow(ctx, p.ID, flowID); err != nil {
		return List[Run]{}, wrap("list runs", err)
	}
	scope := p.ID + "/runs/" + flowID
	q, err := s.listQuery(scope, pr)
	if err != nil {
		return List[Run]{}, err
	}
	page, err := rt.Runs.ListRuns(ctx, p.ID, flowID, q)
	if err != nil {
		return List[Run]{}, wrap("list runs", err)
	}
	return list(s, scope, q, page, func(r Run) Run { return r }), nil
}

// Run returns one run of a flow with its step results.
func (s *Service) Run(ctx context.Context, p Project, flowID, runID string) (Run, error) {
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	r, err := rt.Runs.Run(ctx, p.ID, flowID, runID)
	return r, wrap("get run", err)
}

// RetryRun starts a new run of the flow with the trigger data of an earlier
// one, whatever the flow's status: a retry is a deliberate act.
func (s *Service) RetryRun(ctx context.Context, p Project, flowID, runID string) (Run, error) {
	old, err := s.Run(ctx, p, flowID, runID)
	if err != nil {
		return Run{}, err
	}
	f, err := s.store.Flow(ctx, p.ID, flowID)
	if err != nil {
		return Run{}, wrap("retry run", err)
	}
	return s.StartRun(ctx, f, old.Trigger)
}

// PurgeRuns deletes runs older than the retention period, in batches, and
// returns how many it deleted.
func (s *Service) PurgeRuns(ctx context.Context) (int, error) {
	rt, err := s.runtime()
	if err != nil {
		return 0, err
	}
	before := s.clock().Add(-rt.Policy.withDefaults().Retention)
	total := 0
	for {
		n, err := rt.Runs.DeleteRunsBefore(ctx, before, 500)
		total += n
		if err != nil {
			return total, wrap("purge runs", err)
		}
		if n < 500 {
			return total, nil
		}
	}
}

// StartScheduledRun starts the run of an ACTIVE SCHEDULE flow for one firing
// of its schedule. key names the firing (the scheduler's execution ID, or the
// fire time) and fixes the run's ID, so a firing delivered twice starts one
// run: the second gets the first run back.
func (s *Service) StartScheduledRun(ctx context.Context, project, flowID string, firedAt time.Time, key string) (Run, error) {
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	f, err := s.store.Flow(ctx, project, flowID)
	if err != nil {
		return Run{}, wrap("start scheduled run", err)
	}
	if f.Status != FlowActive || f.Trigger.Type != TriggerSchedule || f.Trigger.Schedule == nil {
		return Run{}, Conflict("FLOW_NOT_SCHEDULED", "flow %q is not an active schedule flow", flowID)
	}
	body, err := json.Marshal(map[string]string{
		"firedAt":  firedAt.UTC().Format(time.RFC3339),
		"cron":     f.Trigger.Schedule.Cron,
		"timezone": f.Trigger.Schedule.Timezone,
	})
	if err != nil {
		return Run{}, wrap("start scheduled run", err)
	}
	r := Run{
		ID: derivedRunID(flowID, key), Project: project, FlowID: flowID, Status: RunRunning,
		Trigger: TriggerData{Method: "SCHEDULE", Headers: map[string]string{}, Query: map[string]string{}, Body: body},
		Steps:   []StepResult{}, Created: s.clock(),
	}
	err = rt.Queue.Enqueue(ctx, r)
	var e *Error
	if errors.As(err, &e) && e.Code == "RUN_EXISTS" {
		return rt.Runs.Run(ctx, project, flowID, r.ID)
	}
	if err != nil {
		return Run{}, wrap("enqueue scheduled run", err)
	}
	return r, nil
}

// derivedRunID is the run ID of a deduplicated trigger: unguessable without
// the flow ID, and the same for the same flow and key.
func derivedRunID(flowID, key string) string {
	sum := sha256.Sum256([]byte(flowID + "\x00" + key))
	return PrefixRun + idEncoding.EncodeToString(sum[:16])
}

// ScheduledFlows lists every ACTIVE SCHEDULE flow of every project, for a
// scheduler that keeps its schedules in memory and loads them at start.
func (s *Service) ScheduledFlows(ctx context.Context) ([]Flow, error) {
	projects, err := s.store.Projects(ctx)
	if err != nil {
		return nil, wrap("scheduled flows", err)
	}
	var out []Flow
	for _, p := range projects {
		q := ListQuery{Limit: MaxPageSize, Status: string(FlowActive)}
		for {
			page, err := s.store.ListFlows(ctx, p.ID, q)
			if err != nil {
				return nil, wrap("scheduled flows", err)
			}
			for _, f := range page.Items {
				if f.Trigger.Type == TriggerSchedule && f.Trigger.Schedule != nil {
					out = append(out, f)
				}
			}
			if page.Next == "" {
				break
			}
			q.After = page.Next
		}
	}
	return out, nil
}
