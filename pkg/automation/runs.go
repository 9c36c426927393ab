package automation

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
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
	NewExecutor func(ExecEnv) Executor
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
	// runs of flows without side effects (runPure, pure.go).
	// nil (the AWS store): those runs take the path of every other.
	Finished FinishedRuns
	// PureBudget bounds the in-memory execution of such a run (zero:
	// DefaultPureBudget); past it the result is dropped and the run is
	// stored and executed as any other ON_COMPLETION run.
	PureBudget time.Duration
	// SlotWaker, when set, brings a waiting run's queue entry forward when a
	// slot it waits for frees (runstate_admission.go); nil: such runs poll.
	SlotWaker SlotWaker
	// The queue's and the run store's optional capabilities, each nil
	// where the backend has none (docs/architecture.md, "Capabilities"):
	//   - Delayer sends a paused run's message again at a later time (SQS);
	//     nil: the queue entry itself is due later (flowd).
	//   - PollDelayer queues the polls of a sub-minute POLL flow (SQS).
	//   - Waker makes a run that waits for a child due when the child ends,
	//     where FinishRun's own write does not (SQS), or wakes idle workers
	//     (flowd's pool).
	//   - StatusReader reads a run's status without the run, for waits that
	//     look every 100 ms (DynamoDB); nil: the whole run is read.
	//   - DueReader reads a parked run's due time without the run, when its
	//     message comes early (DynamoDB); nil: an early message is sent on.
	Delayer     Delayer
	PollDelayer PollDelayer
	// Waitpoints keeps what APPROVAL steps and WAIT for a callback wait
	// for (waitpoint.go); nil: such steps fail with a message.
	Waitpoints   WaitpointStore
	Waker        Waker
	StatusReader RunStatusReader
	DueReader    RunDueReader
}

// Credentials reads connection credentials for an executor and records
// the state changes it observes; ConnectionService implements it (and so
// Service, which NewService hands the executor).
type Credentials interface {
	// ConnectionCredential returns an ACTIVE or ERROR connection and its
	// value, or an error naming a deleted, expired or revoked connection.
	ConnectionCredential(ctx context.Context, project, id string) (Connection, ConnectionValue, error)
	SetConnectionStatus(ctx context.Context, project, id string, s ConnectionStatus) error
}

func (s *RunService) runtime() (*RunRuntime, error) {
	if s.rt == nil || s.rt.Runs == nil || s.rt.Queue == nil || s.exec == nil {
		return nil, errors.New("automation: runs are not configured (Config.Runtime)")
	}
	return s.rt, nil
}

// newRun is a new RUNNING run of f for the trigger data, not yet stored.
func (s *RunService) newRun(f Flow, td TriggerData) Run {
	return Run{
		ID: s.newID(PrefixRun), Project: f.Project, FlowID: f.ID, Status: RunRunning,
		Trigger: td, Steps: []StepResult{}, Created: s.clock(), FlowVersion: pinTo(f),
		Trace: joinTrace(s.tracer, td),
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
	return s.startRunOf(ctx, f, td, false, nil)
}

// startRunOf is StartRun; inline asks for the run claimed by the caller's
// own attempt (RunRuntime.Inline), for a receiver that executes it with
// AwaitRun (without Inline the run is queued as StartRun queues it), and a
// draft makes the run a test run of that definition (drafts.go) instead of
// one pinned to f's live version.
func (s *RunService) startRunOf(ctx context.Context, f Flow, td TriggerData, inline bool, draft *Definition) (Run, error) {
	r := s.newRun(f, td)
	if draft != nil {
		r.FlowVersion, r.Draft, r.DraftDefinition = nil, true, draft
	}
	key := s.idempotencyKey(ctx, f, td)
	if key == "" {
		return s.launch(ctx, r, inline)
	}
	// The first delivery's run has the ID derived from the key. Past the
	// window, a repeat is a new delivery: its run ID also carries the time.
	r.ID = derivedRunID(f.ID, key)
	started, err := s.launch(ctx, r, inline)
	if IsRunExists(err) {
		first, ferr := s.rt.Runs.Run(ctx, f.Project, f.ID, r.ID)
		if ferr == nil && r.Created.Sub(first.Created) < IdempotencyWindow && !sameDelivery(first.Trigger, td) {
			// The key alone is no proof of being the first sender: its
			// run (and answer) go only to a repeat of the same body.
			return Run{}, duplicateDelivery()
		}
		if ferr != nil || r.Created.Sub(first.Created) < IdempotencyWindow {
			return first.Public(), wrap("find first delivery", ferr)
		}
		r.ID = derivedRunID(f.ID, key+"\x00"+r.Created.Format(time.RFC3339Nano))
		// The same start, counted once: only its ID changed.
		started, err = s.enqueue(ctx, s.rt, r, inline)
	}
	if err != nil {
		return Run{}, err
	}
	return started, nil
}

// launch is where every run starts (webhooks and test deliveries, StartRun,
// schedules, polls, retries and replays, CALL_FLOW children): it counts the
// start against the project's runsPerMinute quota and makes r durable and
// queued, claimed by the caller's own attempt when inline and the queue
// offers it (RunRuntime.Inline). A refusal of the quota is a
// *notAdmitted; a run that exists already is the queue's error, unwrapped
// enough for IsRunExists. The one-commit path of runs without side
// effects (runPure) counts its start itself: it stores no queue entry.
func (s *RunService) launch(ctx context.Context, r Run, inline bool) (Run, error) {
	rt, err := s.runtime()
	if err != nil {
		return Run{}, err
	}
	if err := s.admitRun(ctx, r.Project); err != nil {
		return Run{}, &notAdmitted{err}
	}
	return s.enqueue(ctx, rt, r, inline)
}

// enqueue stores r with its queue entry: launch without the count.
func (s *RunService) enqueue(ctx context.Context, rt *RunRuntime, r Run, inline bool) (Run, error) {
	if inline && rt.Inline != nil {
		c, err := rt.Inline.EnqueueClaimed(ctx, r, s.clock(), rt.Policy.Lease())
		if err != nil {
			return Run{}, wrap("enqueue run", err)
		}
		return c, nil
	}
	if err := rt.Queue.Enqueue(ctx, r); err != nil {
		return Run{}, wrap("enqueue run", err)
	}
	return r, nil
}

// notAdmitted is a start launch refused (the runsPerMinute quota, or the
// quota's own read failing): nothing was stored. It shows as the refusal
// itself.
type notAdmitted struct{ err error }

func (e *notAdmitted) Error() string { return e.err.Error() }
func (e *notAdmitted) Unwrap() error { return e.err }

func isNotAdmitted(err error) bool {
	var na *notAdmitted
	return errors.As(err, &na)
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
	// Refused by the quota, the firing is skipped: the next one is another
	// chance.
	started, err := s.launch(ctx, r, false)
	if IsRunExists(err) {
		first, err := rt.Runs.Run(ctx, project, flowID, r.ID)
		return first.Public(), err
	}
	if err != nil {
		return Run{}, wrap("enqueue scheduled run", err)
	}
	return started, nil
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
