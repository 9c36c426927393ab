package automation

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Errors of ExecuteRun and HandleMessage that a queue acts on.
var (
	// ErrRetry: the attempt failed transiently; run it again after a backoff.
	ErrRetry = errors.New("retry")
	// ErrExhausted: the run failed for good after the last attempt and is
	// FAILED; park the work (embedded) or let it reach the DLQ (AWS).
	ErrExhausted = errors.New("attempts exhausted")
	// ErrMethodNotAllowed: a known webhook path, another method (405).
	ErrMethodNotAllowed = errors.New("method not allowed")
)

// RunRuntime is what running flows needs beyond the management API.
type RunRuntime struct {
	Runs  RunStore
	Queue RunQueue
	// NewExecutor builds the executor from the credentials it reads
	// connections with. NewService calls it once with the Service itself:
	// the executor needs the Service for credentials and the Service the
	// executor for runs, and a constructor ties that knot inside
	// NewService, so that no caller completes a Service after the fact.
	NewExecutor func(Credentials) Executor
	Policy      RunPolicy // zero fields take the defaults
	// StopInlineAtAnswer cuts an ON_COMPLETION receiver's inline attempt
	// short when the receiver answers without the run's result (AwaitRun's
	// wait passed), for receivers that are frozen once they answer (Lambda):
	// a frozen attempt would hold the run's lease with nobody executing.
	StopInlineAtAnswer bool
	// Inline, when set, is the queue's fast path for ON_COMPLETION runs
	// (InlineQueue, the same queue as Queue): the receiver stores the run
	// claimed for its inline attempt, in one write. nil (the AWS queue):
	// such a run is queued like any other and AwaitRun claims it.
	Inline InlineQueue
	// Finished, when set, is the store's one-commit path for ON_COMPLETION
	// runs of flows without side effects (ReceiveWebhookWithin, pure.go).
	// nil (the AWS store): those runs take the path of every other.
	Finished FinishedRuns
	// PureBudget bounds the in-memory execution of such a run (zero:
	// DefaultPureBudget); past it the result is dropped and the run is
	// stored and executed as any other ON_COMPLETION run.
	PureBudget time.Duration
	// SlotWaker, when set, brings a waiting run's queue entry forward when a
	// slot it waits for frees (admission.go); nil: such runs poll.
	SlotWaker SlotWaker
}

// Credentials reads connection credentials for an executor and records
// the state changes it observes; *Service implements it.
type Credentials interface {
	// ConnectionCredential returns an ACTIVE or ERROR connection and its
	// value, or an error naming a deleted, expired or revoked connection.
	ConnectionCredential(ctx context.Context, project, id string) (Connection, ConnectionValue, error)
	SetConnectionStatus(ctx context.Context, project, id string, s ConnectionStatus) error
}

// MethodError is a 405: the path exists for other methods.
type MethodError struct {
	Err     *Error
	Allowed []string // for the Allow header
}

func (e *MethodError) Error() string { return e.Err.Message }

// Unwrap exposes the client-facing *Error (kind ErrMethodNotAllowed).
func (e *MethodError) Unwrap() error { return e.Err }

func (s *RunService) runtime() (*RunRuntime, error) {
	if s.rt == nil || s.rt.Runs == nil || s.rt.Queue == nil || s.exec == nil {
		return nil, errors.New("automation: runs are not configured (Config.Runtime)")
	}
	return s.rt, nil
}

// WebhookFlow returns the flow builder flow a webhook addresses by ID, with
// its secrets revealed for the receiver's checks: an ACTIVE flow, or an
// INACTIVE one whose Test Trigger is armed (ReceiveWebhook then lets one
// delivery through). Unknown and workflow builder flows are the same 404;
// another inactive flow is a 404 FLOW_INACTIVE that says how to enable it.
func (s *RunService) WebhookFlow(ctx context.Context, flowID string) (Flow, error) {
	f, err := s.store.FlowByID(ctx, flowID)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Flow{}, wrap("find webhook flow", err)
	}
	if err != nil || f.Engine != FlowBuilder || f.Trigger.Type != TriggerWebhook {
		return Flow{}, NotFound("flow", flowID)
	}
	if f.Status != FlowActive {
		armed, err := s.flows.armed(ctx, f)
		if err != nil {
			return Flow{}, err
		}
		if !armed {
			return Flow{}, InactiveFlow(flowID)
		}
	}
	return s.flows.RevealFlow(ctx, f)
}

// RouteFlow returns the ACTIVE workflow builder flow registered on path for
// method, secrets revealed. A path no flow serves is a 404, one an
// INACTIVE flow holds a 404 FLOW_INACTIVE; a path served for other methods
// only is a *MethodError (405).
func (s *RunService) RouteFlow(ctx context.Context, path, method string) (Flow, error) {
	return s.routeFlow(ctx, path, method, func(_ context.Context, f Flow) (bool, error) {
		if f.Status != FlowActive {
			return false, InactiveFlow(f.ID)
		}
		return true, nil
	})
}

// routeFlow finds the flow registered on path for method; usable decides
// whether the flow answers there now (a flow that does not is a 404). For
// each method, a literal path wins over a parameter path (route.go).
func (s *RunService) routeFlow(ctx context.Context, path, method string, usable func(context.Context, Flow) (bool, error)) (Flow, error) {
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
	return s.flows.RevealFlow(ctx, f)
}

// routeMethods is method -> flow ID for a request path: the literal path's
// routes, completed by those of the parameter shape that matches it (the
// most literal one, should two). The shapes are read only when the literal
// path lacks the method asked for.
func (s *RunService) routeMethods(ctx context.Context, path, method string) (map[string]string, error) {
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

// newRun is a new RUNNING run of f for the trigger data, not yet stored.
func (s *RunService) newRun(f Flow, td TriggerData) Run {
	return Run{
		ID: s.newID(PrefixRun), Project: f.Project, FlowID: f.ID, Status: RunRunning,
		Trigger: td, Steps: []StepResult{}, Created: s.clock(), FlowVersion: pinTo(f),
	}
}

// IdempotencyWindow is how long a repeated delivery (same idempotency
// header value) gets the first run back instead of a new run.
const IdempotencyWindow = 24 * time.Hour

// StartRun makes a run of f for the trigger data durable and queued, and
// returns it RUNNING. Only then may a receiver answer 200. When the flow
// names an idempotency header and the delivery carries it, a repeat within
// IdempotencyWindow returns the first run and starts none.
func (s *RunService) StartRun(ctx context.Context, f Flow, td TriggerData) (Run, error) {
	return s.startRun(ctx, f, td, false)
}

// startRun is StartRun; inline asks for the run claimed by the caller's
// own attempt (RunRuntime.Inline), for a receiver that executes it with
// AwaitRun. Without Inline the run is queued as StartRun queues it.
func (s *RunService) startRun(ctx context.Context, f Flow, td TriggerData, inline bool) (Run, error) {
	return s.startRunOf(ctx, f, td, inline, nil)
}

// startRunOf is startRun; a draft makes the run a test run of that
// definition (drafts.go) instead of one pinned to f's live version.
func (s *RunService) startRunOf(ctx context.Context, f Flow, td TriggerData, inline bool, draft *Definition) (Run, error) {
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	enqueue := func(r Run) (Run, error) { return r, rt.Queue.Enqueue(ctx, r) }
	if inline && rt.Inline != nil {
		enqueue = func(r Run) (Run, error) {
			c, err := rt.Inline.EnqueueClaimed(ctx, r, s.clock(), rt.Policy.Lease())
			if err != nil {
				return r, err
			}
			return c, nil
		}
	}
	r := s.newRun(f, td)
	if draft != nil {
		r.FlowVersion, r.Draft, r.DraftDefinition = nil, true, draft
	}
	key := s.idempotencyKey(ctx, f, td)
	if key == "" {
		if r, err = enqueue(r); err != nil {
			return Run{}, wrap("enqueue run", err)
		}
		return r, nil
	}
	// The first delivery's run has the ID derived from the key. Past the
	// window, a repeat is a new delivery: its run ID also carries the time.
	r.ID = derivedRunID(f.ID, key)
	started, err := enqueue(r)
	if IsRunExists(err) {
		first, ferr := rt.Runs.Run(ctx, f.Project, f.ID, r.ID)
		if ferr == nil && r.Created.Sub(first.Created) < IdempotencyWindow && !sameDelivery(first.Trigger, td) {
			// The key alone is no proof of being the first sender: its
			// run (and answer) go only to a repeat of the same body.
			return Run{}, duplicateDelivery()
		}
		if ferr != nil || r.Created.Sub(first.Created) < IdempotencyWindow {
			return first.Public(), wrap("find first delivery", ferr)
		}
		r.ID = derivedRunID(f.ID, key+"\x00"+r.Created.Format(time.RFC3339Nano))
		started, err = enqueue(r)
	}
	if err != nil {
		return Run{}, wrap("enqueue run", err)
	}
	return started, nil
}

// executesInline reports whether a receiver answers f's deliveries with
// the run's outcome (ON_COMPLETION), executing the run itself.
func executesInline(f Flow) bool {
	return f.Trigger.Webhook != nil && f.Trigger.Webhook.ResponseMode == RespondOnCompletion
}

// idempotencyKey is the value of the flow's idempotency header in the
// delivery, else that of its idempotencyKey expression (triggers.go), or
// "" when there is none.
func (s *RunService) idempotencyKey(ctx context.Context, f Flow, td TriggerData) string {
	w := f.Trigger.Webhook
	if w == nil {
		return ""
	}
	if k := td.Headers[strings.ToLower(w.IdempotencyHeader)]; w.IdempotencyHeader != "" && k != "" {
		return k
	}
	return s.flows.expressionKey(ctx, f, td)
}

// Who executes a run. Three callers make attempts at runs, all through
// ExecuteRun, and the run record's claim (RunStore.ClaimRun, a conditional
// write with a lease) decides which of them executes at any moment:
//
//   - the worker pool of flowd (pkg/runworker) for every queued run: it
//     takes the run's queue entry and settles the entry by the Outcome;
//   - the runner Lambda (HandleMessage) for every SQS message: an error
//     returns the message to the queue, nil deletes it;
//   - a synchronous (ON_COMPLETION) receiver, inline, through AwaitRun, so
//     that it can answer with the run's response.
//
// An ON_COMPLETION run is queued like any other, so that it survives the
// receiver. Where the queue offers it (RunRuntime.Inline, flowd's embedded
// queue), the run is stored already claimed by the receiver's attempt, its
// queue entry held by the same lease: the receiver executes it and settles
// the entry, and a worker takes it only if the receiver's process died
// (once the lease runs out). Otherwise (AWS) whichever caller claims it
// first executes it, and the other gets OutcomeClaimed: the expected
// hand-over, not a failure. The holder's lease bounds the wait: a worker
// looks at the run again once the lease would have run out, and finds it
// final (OutcomeFinished) or abandoned.

// Outcome is what one call of ExecuteRun came to, for the caller that
// settles the run's queue entry or message.
type Outcome int

// Outcomes of ExecuteRun.
const (
	// OutcomeFinished: the run is final, by this attempt or earlier, or gone
	// with its flow. The queue entry is done with.
	OutcomeFinished Outcome = iota + 1
	// OutcomeClaimed: another attempt holds the run. Not a failure: look
	// again when its lease would run out (Policy.Lease).
	OutcomeClaimed
	// OutcomeRetry: the attempt failed transiently (or the store did); the
	// run stays RUNNING. Try again after Policy.Backoff(attempts).
	OutcomeRetry
	// OutcomeExhausted: the last attempt failed and the run is now FAILED.
	// Park the entry (embedded) or let the message reach the DLQ (AWS).
	OutcomeExhausted
)

var outcomeNames = map[Outcome]string{
	OutcomeFinished: "finished", OutcomeClaimed: "claimed", OutcomeRetry: "retry", OutcomeExhausted: "exhausted",
}

func (o Outcome) String() string { return outcomeNames[o] }

// Attempt is the result of ExecuteRun.
type Attempt struct {
	Outcome Outcome
	// Run is the run as this attempt left it; zero when it did not claim
	// the run.
	Run Run
	// Attempts counts the claims of the run so far, this one included;
	// 0 when it did not claim the run.
	Attempts int
	// RetryAt is when the run should be tried again, for OutcomeRetry
	// (the run's NextAttemptAt): Policy.Backoff after this attempt.
	RetryAt time.Time
}

// crashedMessage is the error of a run finished because its attempts kept
// dying with their process.
const crashedMessage = "stopped after repeated crashes: %d attempts ended without a result (the process executing them died or lost its lease)"

// ExecuteRun makes one attempt at a queued run (see "Who executes a run"
// above). The error is nil for OutcomeFinished and OutcomeClaimed, and
// wraps ErrRetry or ErrExhausted for the other two, with the cause.
//
// The attempt is recorded (ClaimRun counts it) before execution starts. A
// run whose earlier attempts ended without a result Policy.MaxCrashes
// times is not executed again: it is finished FAILED, so that a flow that
// kills its process cannot do so at every restart.
func (s *RunService) ExecuteRun(ctx context.Context, project, runID string) (Attempt, error) {
	rt, err := s.runtime()
	if err != nil {
		return Attempt{Outcome: OutcomeRetry}, fmt.Errorf("%w: %w", ErrRetry, err)
	}
	p := rt.Policy.WithDefaults()
	r, err := rt.Runs.ClaimRun(ctx, project, runID, s.clock(), p.Lease())
	switch {
	case IsRunFinished(err), IsNotFound(err): // not found: its flow was deleted, and the run with it
		return Attempt{Outcome: OutcomeFinished}, nil
	case IsRunClaimed(err):
		return Attempt{Outcome: OutcomeClaimed}, nil
	case err != nil:
		return Attempt{Outcome: OutcomeRetry}, fmt.Errorf("%w: claim run %s: %w", ErrRetry, runID, err)
	}
	return s.execute(ctx, rt, p, r)
}

// ExecuteClaimed makes one attempt at a run its caller has already claimed
// for it, as ExecuteRun does after its claim: the worker pool's queue claims
// the run with its entry, in one write (QueueEntry.Run).
func (s *RunService) ExecuteClaimed(ctx context.Context, r Run) (Attempt, error) {
	rt, err := s.runtime()
	if err != nil {
		return Attempt{Outcome: OutcomeRetry}, fmt.Errorf("%w: %w", ErrRetry, err)
	}
	return s.execute(ctx, rt, rt.Policy.WithDefaults(), r)
}

// execute runs the attempt that holds the claimed run r.
func (s *RunService) execute(ctx context.Context, rt *RunRuntime, p RunPolicy, r Run) (Attempt, error) {
	project := r.Project
	at := Attempt{Run: r, Attempts: r.Attempts}
	if r.Interrupted >= p.MaxCrashes {
		if r.OnErrorOf.Final() {
			// It was its onError steps that kept crashing: the run ends as
			// it had, their results as far as they got.
			r.Status = r.OnErrorOf
		} else {
			r.Status, r.Error = RunFailed, fmt.Sprintf(crashedMessage, r.Interrupted)
		}
		return s.settle(ctx, rt, at, r)
	}
	// By ID: the store may serve it from memory (the receivers' flow
	// cache, dropped on every flow change), which spares each attempt a
	// read; the project check makes it Flow(project, id).
	f, err := s.store.FlowByID(ctx, r.FlowID)
	if err == nil && f.Project != project {
		err = NotFound("flow", r.FlowID)
	}
	if err == nil {
		// The run executes its own version (versions.go): usually the
		// live one, else read once for this attempt, from memory when
		// this process read that version before.
		f, err = s.flows.pinnedFlow(ctx, f, r)
	}
	if IsNotFound(err) {
		r.Status, r.Error = RunFailed, "flow "+r.FlowID+" was deleted"
		return s.settle(ctx, rt, at, r)
	} else if err == nil {
		f, err = s.flows.revealFlow(ctx, f, r.Draft)
	}
	if err != nil {
		return s.release(ctx, rt, at, r, fmt.Errorf("load flow: %w", err))
	}
	if StopsRun(f.StoppedAt, r.Created) { // disabled since the run began: flowstop.go
		if r.OnErrorOf.Final() {
			r.Status = r.OnErrorOf // it had ended; only its onError steps are left undone
		} else {
			r.Status, r.Error = RunFailed, StoppedMessage
		}
		return s.settle(ctx, rt, at, r)
	}
	// Admission: a run over a bound of its flow or project waits, in
	// line, without executing (admission.go). None: nothing to do here.
	bs, err := s.bounds(ctx, f, r, p.Lease())
	if err != nil {
		return s.release(ctx, rt, at, r, fmt.Errorf("read the run's bounds: %w", err))
	}
	if len(bs) > 0 {
		a, err := s.admit(ctx, rt, bs, r)
		if err != nil {
			return s.release(ctx, rt, at, r, err)
		}
		if a.waitFor != "" {
			r.Deferred++
			return s.suspend(ctx, rt, at, r, a.retryAt, a.waitFor, nil)
		}
		defer s.releaseHeld(context.WithoutCancel(ctx), rt, r, a)
	}
	if admissionWait(r.WaitingFor) {
		// It waited for a slot and starts now: say so at once, not at its
		// first step's journal entry, which does not rewrite the run. It
		// has no steps yet, so the write is small.
		r.NextAttemptAt, r.WaitingFor = nil, ""
		if err := rt.Runs.RecordSteps(ctx, r); err != nil {
			if o, ok := settled(err); ok {
				at.Outcome = o
				return at, nil
			}
			return s.release(ctx, rt, at, r, fmt.Errorf("record the run's start: %w", err))
		}
		r.JournalLen = 0 // RecordSteps emptied the journal
	}
	r.NextAttemptAt, r.WaitingFor = nil, "" // executing now
	if r.OnErrorOf.Final() {
		// An earlier attempt ended the run and started its onError steps:
		// resume those, at the first unfinished one.
		out := r
		out.Status, out.OnErrorOf = r.OnErrorOf, ""
		return s.finishFailed(ctx, rt, p, at, f, out, strings.HasPrefix(out.Error, gaveUpPrefix))
	}
	actx, cancel := context.WithTimeout(ctx, p.Timeout)
	// Each entry appends what changed since the last (AppendSteps): a
	// journal that rewrote the whole run would make a FOR_EACH quadratic.
	jr := &journaler{runs: rt.Runs, root: PatchRootSteps, base: r.Steps, n: r.JournalLen}
	var stopped atomic.Bool // the journal refused: the flow was disabled (flowstop.go)
	ex := s.exec.ExecuteJournaled(actx, f, r, func(ctx context.Context, steps []StepResult) error {
		j := r
		j.Steps = steps
		err := jr.append(ctx, j, steps)
		if IsFlowStopped(err) {
			stopped.Store(true)
		}
		return err
	})
	cancel()
	out := acrossAttempts(r, ex.Run)
	out.JournalLen = jr.n // what the store holds beside the document now
	if stopped.Load() {
		out.Status, out.Error, out.Response = RunFailed, StoppedMessage, nil
		return s.settle(ctx, rt, at, out)
	}
	if ex.WaitUntil != nil && out.Status == RunRunning {
		return s.suspend(ctx, rt, at, out, *ex.WaitUntil, WaitingWait, ex.Calls)
	}
	switch {
	case out.Status == RunFailed && ctx.Err() != nil:
		// Cut short by the caller (shutdown, a receiver that answered):
		// not a failure of the run. Give it back for another attempt.
		return s.release(context.WithoutCancel(ctx), rt, at, out, errors.New(out.Error))
	case out.Status == RunFailed && ex.Retryable && failedAttempts(r) < p.MaxAttempts:
		return s.release(ctx, rt, at, out, errors.New(out.Error))
	case out.Status == RunFailed && ex.Retryable:
		out.Error = fmt.Sprintf(gaveUpPrefix+"%d attempts: %s", failedAttempts(r), out.Error)
		return s.finishFailed(ctx, rt, p, at, f, out, true)
	}
	if out.Status == RunFailed || out.Status == RunTimeout {
		return s.finishFailed(ctx, rt, p, at, f, out, false)
	}
	return s.settle(ctx, rt, at, out)
}

// gaveUpPrefix begins the error of a run whose attempts ran out.
const gaveUpPrefix = "gave up after "

// finishFailed ends a run that failed (or timed out) for good: it runs the
// flow's onError steps, then settles the run; exhausted says its attempts
// ran out (OutcomeExhausted, the queue parks it).
func (s *RunService) finishFailed(ctx context.Context, rt *RunRuntime, p RunPolicy, at Attempt, f Flow, out Run, exhausted bool) (Attempt, error) {
	out, err := s.onError(ctx, rt, p, f, out)
	if err == nil && ctx.Err() != nil && out.OnErrorSteps != nil {
		// Cut short by the caller (shutdown) while its onError steps ran:
		// give it back in them, for another attempt to finish them.
		back := out
		back.OnErrorOf, back.Status, back.Finished = out.Status, RunRunning, nil
		return s.release(context.WithoutCancel(ctx), rt, at, back, errors.New("cut short in its onError steps"))
	}
	if err != nil {
		if o, ok := settled(err); ok {
			at.Outcome = o // final already, or another attempt holds it
			return at, nil
		}
		back := out
		back.Status, back.Finished = RunRunning, nil
		return s.release(context.WithoutCancel(ctx), rt, at, back, fmt.Errorf("record the start of the onError steps: %w", err))
	}
	at, err = s.settle(ctx, rt, at, out)
	if err != nil || at.Outcome != OutcomeFinished || !exhausted {
		return at, err
	}
	at.Outcome = OutcomeExhausted
	return at, fmt.Errorf("%w: run %s: %s", ErrExhausted, out.ID, out.Error)
}

// onError runs the flow's onError steps once, for a run that ended FAILED
// or TIMEOUT for good, with a time limit of their own (a TIMEOUT run has
// spent its own). Their results go in OnErrorSteps; the run's status and
// error stay.
//
// They are journaled as the run's steps are (docs/architecture.md, run model):
// before the first one starts, the run is recorded (still RUNNING and
// claimed) with its outcome (OnErrorOf) and the onError results so far,
// and again after each onError step with side effects. An attempt that
// takes the run over after a crash resumes the onError steps (execute)
// without running the run's steps again, and skips those that finished.
// The error is that first record's: the onError steps did not start.
func (s *RunService) onError(ctx context.Context, rt *RunRuntime, p RunPolicy, f Flow, out Run) (Run, error) {
	h, ok := s.exec.(OnErrorRunner)
	if !ok || len(f.OnError) == 0 {
		return out, nil
	}
	soFar := out.OnErrorSteps
	if soFar == nil {
		soFar = []StepResult{}
	}
	// The first record writes the run whole (its outcome, its steps' final
	// results); the onError steps' own entries append to it.
	first := out
	first.Status, first.OnErrorOf, first.OnErrorSteps = RunRunning, out.Status, soFar
	if err := rt.Runs.RecordSteps(ctx, first); err != nil {
		return out, err
	}
	jr := &journaler{runs: rt.Runs, root: PatchRootOnError, base: soFar}
	record := func(ctx context.Context, steps []StepResult) error {
		j := first
		j.OnErrorSteps = steps
		return jr.append(ctx, j, steps)
	}
	done := runOnError(ctx, h, p, f, out, record)
	done.JournalLen = jr.n
	return done, nil
}

// runOnError runs the onError steps of f for out under their own time
// limit, journaled by journal (nil: not at all, for a run that is not
// stored yet: runPure).
func runOnError(ctx context.Context, h OnErrorRunner, p RunPolicy, f Flow, out Run, journal Journal) Run {
	octx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	return h.RunOnError(octx, f, out, journal)
}

// failedAttempts counts the claimed run's attempts that count towards
// RunPolicy.MaxAttempts: a claim that resumed a run after a WAIT step is
// not a retry. Each journaled WAIT stands for exactly one such claim (an
// early delivery does not claim: QueueMessage.NotBefore).
func failedAttempts(r Run) int {
	waits := 0
	var walk func([]StepResult)
	walk = func(steps []StepResult) {
		for _, st := range steps {
			if st.Type == StepWait && st.Status == StepSucceeded {
				waits++
			}
			waits += callResumes(st)
			walk(st.Steps)
		}
	}
	walk(r.Steps)
	return max(r.Attempts-waits-r.Deferred, 1)
}

// acrossAttempts is the outcome of an attempt as the run shows it: started
// when its first attempt started, with durationMs over all its attempts.
func acrossAttempts(claimed, out Run) Run {
	if claimed.Started != nil {
		out.Started = claimed.Started
	}
	if claimed.DurationMs != nil && out.DurationMs != nil {
		d := *claimed.DurationMs + *out.DurationMs
		out.DurationMs = &d
	}
	out.NextAttemptAt, out.WaitingFor = nil, ""
	return out
}

// finishTries and finishPause bound how hard an attempt tries to save its
// final state before it gives the run back: a store that is briefly busy
// (a locked database, a throttled table) should not cost the run a whole
// lease and another execution.
const (
	finishTries = 3
	finishPause = 200 * time.Millisecond
)

// settle finishes a claimed run with r's final state. When the finish
// cannot be saved, the run is given back (ReleaseRun drops the lease) so
// that the retry comes after a short backoff, not after the lease.
func (s *RunService) settle(ctx context.Context, rt *RunRuntime, at Attempt, r Run) (Attempt, error) {
	r = settledRun(r, s.clock())
	at.Run = r
	var err error
	for try := 1; try <= finishTries; try++ {
		err = rt.Runs.FinishRun(ctx, r)
		if o, ok := settled(err); ok {
			if err == nil && r.Trigger.Caller != nil {
				s.wakeCaller(ctx, rt, r)
			}
			at.Outcome = o
			return at, nil
		}
		if try < finishTries {
			select {
			case <-ctx.Done():
				try = finishTries
			case <-time.After(finishPause * time.Duration(try)):
			}
		}
	}
	back := r
	if r.OnErrorSteps != nil && (r.Status == RunFailed || r.Status == RunTimeout) {
		// Its onError steps ran: the next attempt finishes the run as
		// it is, without executing anything again but an onError step
		// that did not finish.
		back.OnErrorOf = r.Status
	}
	back.Status, back.Finished = RunRunning, nil
	return s.release(context.WithoutCancel(ctx), rt, at, back, fmt.Errorf("finish: %w", err))
}

// settledRun is r as it is saved final: a run that never started (its
// flow deleted, say) started and finished now.
func settledRun(r Run, now time.Time) Run {
	r.OnErrorOf = "" // its onError steps are done
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
	return r
}

// release gives a claimed run back after a failed attempt (cause), to be
// retried: OutcomeRetry, unless the run moved on meanwhile.
func (s *RunService) release(ctx context.Context, rt *RunRuntime, at Attempt, r Run, cause error) (Attempt, error) {
	// Waiting for the next attempt: not finished, and says when it will
	// try again. The failed step keeps its error.
	// Whole milliseconds: the precision every surface shows (TimeFormat),
	// so the record, the API and a queue's back-off name the same instant.
	at.RetryAt = s.clock().Add(rt.Policy.Backoff(r.Attempts)).Truncate(time.Millisecond)
	if !r.OnErrorOf.Final() { // a run in its onError steps keeps the error it ended with
		r.Error = ""
	}
	r.Status, r.Finished, r.NextAttemptAt, r.WaitingFor = RunRunning, nil, &at.RetryAt, WaitingRetry
	at.Run = r
	err := rt.Runs.ReleaseRun(ctx, r)
	if o, ok := settled(err); ok && err != nil {
		at.Outcome = o
		return at, nil
	} else if err != nil {
		at.Outcome = OutcomeRetry
		return at, fmt.Errorf("%w: release run %s after %v: %w", ErrRetry, r.ID, cause, err)
	}
	at.Outcome = OutcomeRetry
	return at, fmt.Errorf("%w: run %s attempt %d: %w", ErrRetry, r.ID, r.Attempts, cause)
}

// suspend gives back a run that waits (a WAIT step paused it, or a bound
// of its flow or project let it not start: why), due again at until
// (nextAttemptAt). Where the queue cannot be told to look again later
// (Delayer: SQS), the run's message is sent again with a delay and this
// one settled. The children that CALL_FLOW steps wait for (calls) are
// started once the run is parked, so that a child's end always finds its
// caller parked to wake.
func (s *RunService) suspend(ctx context.Context, rt *RunRuntime, at Attempt, r Run, until time.Time, why WaitReason, calls []Call) (Attempt, error) {
	at.RetryAt = until
	r.Status, r.Error, r.Finished, r.NextAttemptAt, r.WaitingFor = RunRunning, "", nil, &until, why
	at.Run = r
	err := rt.Runs.ReleaseRun(ctx, r)
	if o, ok := settled(err); ok && err != nil {
		at.Outcome = o
		return at, nil
	} else if err != nil {
		at.Outcome = OutcomeRetry
		return at, fmt.Errorf("%w: release waiting run %s: %w", ErrRetry, r.ID, err)
	}
	if err := s.startCalls(ctx, calls); err != nil {
		// Woken again soon, the step asks for the children not started.
		at.RetryAt = s.clock().Add(rt.Policy.Backoff(1))
		at.Outcome = OutcomeRetry
		return at, fmt.Errorf("%w: run %s: %w", ErrRetry, r.ID, err)
	}
	if d, ok := rt.Queue.(Delayer); ok {
		if err := d.EnqueueAfter(ctx, r, until); err != nil {
			at.Outcome = OutcomeRetry // the message comes back; the run is still waiting
			return at, fmt.Errorf("%w: %w", ErrRetry, err)
		}
		at.Outcome = OutcomeFinished // this message is done; the delayed one resumes the run
		return at, nil
	}
	at.Outcome = OutcomeRetry
	return at, fmt.Errorf("%w: run %s waits until %s", ErrRetry, r.ID, until.Format(time.RFC3339))
}

// settled maps the result of a run write to an outcome when it needs no
// retry: written (finished), final already or gone (finished: nothing left
// to do), or claimed by another attempt since this one's lease ran out
// (claimed: that attempt's result stands, this one's is dropped).
func settled(err error) (Outcome, bool) {
	switch {
	case err == nil, IsRunFinished(err), IsNotFound(err):
		return OutcomeFinished, true
	case IsRunLeaseLost(err):
		return OutcomeClaimed, true
	}
	return 0, false
}

// AwaitRun executes a just-started run in the caller's goroutine, for
// synchronous (ON_COMPLETION) webhooks, and returns it final. When a worker
// holds the run already (the hand-over of "Who executes a run"), it waits
// for that worker instead. If wait passes first it returns the run still
// RUNNING. The inline attempt then goes on, on its own context, unless the
// runtime says an attempt must not outlive the answer
// (RunRuntime.StopInlineAtAnswer, the Lambda receiver, which is frozen once
// it answers): then the attempt is cut short and gives the run back
// (journaled steps kept) before AwaitRun returns, and the queue takes over.
func (s *RunService) AwaitRun(ctx context.Context, r Run, wait time.Duration) (Run, error) {
	if r.Status.Final() {
		// Executed before it was stored (ReceiveWebhookWithin), or a
		// repeated delivery's first run that has finished.
		return r, nil
	}
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	type result struct {
		run Run
		err error
	}
	done := make(chan result, 1)
	// Detached: a client that hangs up must not cut the run short.
	// It ends at the attempt's end, or by stop at the answer.
	actx, stop := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer stop()
		var (
			at  Attempt
			err error
		)
		if r.LeaseToken != "" && rt.Inline != nil {
			// Claimed with its queue entry by startRun: this attempt is
			// the run's one executor, and settles the entry as a worker
			// would have.
			at, err = s.execute(actx, rt, rt.Policy.WithDefaults(), r)
			s.settleInline(context.WithoutCancel(actx), rt, r.ID, at, err)
		} else {
			at, err = s.ExecuteRun(actx, r.Project, r.ID)
		}
		done <- result{at.Run, err}
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
			done = nil // to be retried, or claimed by a worker: watch the record
		case <-tick.C:
			cur, final, err := pollRun(ctx, rt.Runs, r)
			if err != nil {
				return Run{}, wrap("await run", err)
			}
			if final {
				return cur, nil
			}
		case <-timer.C:
			if rt.StopInlineAtAnswer && done != nil {
				stop()
				<-done // the attempt has given the run back
			}
			return r, nil
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
}

// settleInline settles the queue entry of a run whose inline attempt (the
// receiver's, claimed with the entry by EnqueueClaimed) ended as at says,
// as the worker pool settles the entries it claims. When the
// entry cannot be settled, its lease runs out and a worker finds the run
// as this attempt left it: nothing is lost.
func (s *RunService) settleInline(ctx context.Context, rt *RunRuntime, runID string, at Attempt, cause error) {
	var err error
	switch at.Outcome {
	case OutcomeFinished:
		if at.Run.Status == RunFailed { // other final runs took their entry with them
			err = rt.Inline.Ack(ctx, runID)
		}
	case OutcomeClaimed:
		// The lease ran out under this attempt and a worker holds the
		// entry and the run now: theirs to settle.
	case OutcomeExhausted:
		err = rt.Inline.Park(ctx, runID, cause.Error())
	default: // OutcomeRetry
		next := at.RetryAt
		if next.IsZero() { // the attempt did not get as far as the run
			next = s.clock().Add(rt.Policy.Backoff(1))
		}
		err = rt.Inline.Retry(ctx, runID, next)
	}
	if err != nil {
		s.log.ErrorContext(ctx, "settle inline run's queue entry", "run", runID, "err", err)
	}
}

// ListRuns returns one page of a flow's run history, newest first.
func (s *RunService) ListRuns(ctx context.Context, p Project, flowID string, pr PageRequest) (List[Run], error) {
	rt, q, scope, err := s.runListQuery(ctx, p, flowID, pr)
	if err != nil {
		return List[Run]{}, err
	}
	page, err := rt.Runs.ListRuns(ctx, p.ID, flowID, q)
	if err != nil {
		return List[Run]{}, wrap("list runs", err)
	}
	return list(s, scope, q, page, Run.Public), nil
}

// ListRunsJSON is ListRuns with each run as its JSON (RunStore.ListRunsJSON),
// for the API, which writes the page from it.
func (s *RunService) ListRunsJSON(ctx context.Context, p Project, flowID string, pr PageRequest) (List[json.RawMessage], error) {
	rt, q, scope, err := s.runListQuery(ctx, p, flowID, pr)
	if err != nil {
		return List[json.RawMessage]{}, err
	}
	page, err := rt.Runs.ListRunsJSON(ctx, p.ID, flowID, q)
	if err != nil {
		return List[json.RawMessage]{}, wrap("list runs", err)
	}
	return list(s, scope, q, page, func(r json.RawMessage) json.RawMessage { return r }), nil
}

// runListQuery checks a request for a page of a flow's runs.
func (s *RunService) runListQuery(ctx context.Context, p Project, flowID string, pr PageRequest) (*RunRuntime, ListQuery, string, error) {
	rt, err := s.runtime()
	if err != nil {
		return nil, ListQuery{}, "", err
	}
	statuses := []string{string(RunRunning), string(RunSucceeded), string(RunFailed), string(RunTimeout)}
	if pr.Status != "" && !slices.Contains(statuses, pr.Status) {
		return nil, ListQuery{}, "", InvalidCode("INVALID_PARAMETER", "status must be one of %v, got %q", statuses, pr.Status)
	}
	if _, err := s.store.Flow(ctx, p.ID, flowID); err != nil {
		return nil, ListQuery{}, "", wrap("list runs", err)
	}
	scope := p.ID + "/runs/" + flowID
	q, err := s.listQuery(scope, pr)
	if err != nil {
		return nil, ListQuery{}, "", err
	}
	return rt, q, scope, nil
}

// Run returns one run of a flow with its step results.
func (s *RunService) Run(ctx context.Context, p Project, flowID, runID string) (Run, error) {
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	r, err := rt.Runs.Run(ctx, p.ID, flowID, runID)
	return r.Public(), wrap("get run", err)
}

// PurgeRuns deletes runs older than the retention period, in batches, and
// returns how many it deleted.
func (s *RunService) PurgeRuns(ctx context.Context) (int, error) {
	rt, err := s.runtime()
	if err != nil {
		return 0, err
	}
	before := s.clock().Add(-rt.Policy.WithDefaults().Retention)
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
func (s *RunService) StartScheduledRun(ctx context.Context, project, flowID string, firedAt time.Time, key string) (Run, error) {
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	f, err := s.store.Flow(ctx, project, flowID)
	if err != nil {
		return Run{}, wrap("start scheduled run", err)
	}
	if f.Status != FlowActive || f.Trigger.Type != TriggerSchedule || f.Trigger.Schedule == nil {
		return Run{}, FlowNotScheduled(flowID)
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
		Steps:   []StepResult{}, Created: s.clock(), FlowVersion: pinTo(f),
	}
	err = rt.Queue.Enqueue(ctx, r)
	if IsRunExists(err) {
		first, err := rt.Runs.Run(ctx, project, flowID, r.ID)
		return first.Public(), err
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

// ScheduledFlows lists every ACTIVE SCHEDULE and POLL flow of every
// project, for a scheduler that keeps its schedules in memory and loads them
// at start.
func (s *RunService) ScheduledFlows(ctx context.Context) ([]Flow, error) {
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
				if f.Trigger.Type == TriggerSchedule && f.Trigger.Schedule != nil || f.Trigger.Type == TriggerPoll && f.Trigger.Poll != nil {
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
