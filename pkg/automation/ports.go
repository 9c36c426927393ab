package automation

import (
	"context"
	"encoding/json"
	"time"
)

// ListQuery asks a store for one page of a list in creation order.
type ListQuery struct {
	Limit  int    // 1..MaxPageSize, already checked by the Service
	After  string // a store position from an earlier Page.Next; "" for the first page
	Status string // optional filter (flows: FlowStatus; runs: RunStatus)
}

// RunQuery asks a store for one page of a project's runs, newest first.
type RunQuery struct {
	ListQuery              // Limit, After and Status as for lists
	FlowID       string    // "" for every flow
	Since, Until time.Time // created in [Since, Until); zero: unbounded
}

// Page is one page of a list. Next is the store position after the last item
// when more items exist, and "" when this is the last page: stores read
// Limit+1 rows to know. The Service seals Next into an opaque cursor; stores
// never see or make cursors.
type Page[T any] struct {
	Items []T
	Next  string
}

// Alert events (docs/alerts.md) are domain output, not a store's choice.
// A store that also keeps event subscriptions (an alerts.Store) is given
// the domain's Outbox (alerts.Store.UseOutbox), and the writes that say
// "with its alert event" below hand it the change, as the write reads it,
// and write what it returns in the same atomic write as the change: the
// event and one PENDING delivery per subscription it chose, or nothing.
// The store decides nothing itself: not whether the change is an event
// nor which, not its payload, not its time (the Outbox stamps it with the
// Service's clock), not which subscriptions want it. It reads what the
// Outbox asks for (the project's subscriptions, which it may cache and
// drops on its own subscription writes; the state the change replaces,
// in the write) and nothing when the Outbox asks nothing. A change that
// fails or is refused writes no delivery, and an Outbox or delivery write
// that fails fails the change: both commit, or neither. The waitpoint
// writes (WaitpointStore.UpdateWaitpoint, waitpoint.go) carry theirs the
// same way: an approval requested or decided.

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
	// SetProjectLimits replaces the project's limit overrides; an unknown
	// ID is ErrNotFound.
	SetProjectLimits(ctx context.Context, id string, overrides map[string]int64) error
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
	// with ErrConflict (code ROUTE_CONFLICT). With f.MaxFlows set, the
	// same write counts the project's flows and refuses the flow when it
	// holds that many already (FlowQuotaExceeded, 403 QUOTA_EXCEEDED):
	// of concurrent creates, exactly as many as the quota leaves succeed.
	// With its alert event (flow.published), as said above.
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
	// A write that publishes prunes old versions past f.KeepVersions in
	// the same write (VersionWrites, versions.go). With its alert event,
	// the Outbox given the flow as stored before and f.
	PutFlow(ctx context.Context, f Flow) error
	// DeleteFlow removes a flow, its routes, its runs, its queued work and
	// its Test Trigger capture (SampleStore), with its alert event
	// (flow.deleted).
	DeleteFlow(ctx context.Context, project, id string) error
	// ListFlows pages through a project's flows in creation order; with
	// q.Status set, every page but the last still holds q.Limit items.
	ListFlows(ctx context.Context, project string, q ListQuery) (Page[Flow], error)
	// RouteFlows returns the flow IDs registered on a workflow builder path
	// (a literal path or a shape, see Route), by concrete method; empty if
	// none.
	RouteFlows(ctx context.Context, path string) (map[string]string, error)
	// RouteShapes lists the path shapes with that many segments that flows
	// hold, with the project holding each. CreateFlow and PutFlow refuse a
	// shape that CheckShapeClash refuses against them (ROUTE_CONFLICT).
	RouteShapes(ctx context.Context, segments int) ([]ShapeOwner, error)
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
	// SetConnectionStatus records a state change (ConnectionStatus), with
	// its alert event, the Outbox given the connection as stored before.
	SetConnectionStatus(ctx context.Context, project, id string, s ConnectionStatus, at time.Time) error
}

// SampleStore keeps each webhook flow's Test Trigger state: until when a
// capture is armed, and the latest captured event. It lives beside the flow,
// never in its versioned definition, so that arming and capturing neither
// bump the flow's version nor race with edits. FlowStore.DeleteFlow removes
// it with the flow.
type SampleStore interface {
	// ArmCapture arms (or re-arms) the flow's capture until the given time,
	// keeping any earlier sample. A flow missing from the project is
	// ErrNotFound (FLOW_NOT_FOUND).
	ArmCapture(ctx context.Context, project, flowID string, until time.Time) error
	// ArmedUntil returns when the flow's armed capture expires, or the zero
	// time when none is armed (also for a flow never armed).
	ArmedUntil(ctx context.Context, project, flowID string) (time.Time, error)
	// TakeCapture disarms the flow's capture if it is armed beyond now, and
	// reports whether it did, atomically: of the events arriving while one
	// arming holds, exactly one gets true.
	TakeCapture(ctx context.Context, project, flowID string, now time.Time) (bool, error)
	// PutSample replaces the flow's sample. It fails with ErrNotFound if
	// the flow was never armed or is gone.
	PutSample(ctx context.Context, project, flowID string, s Sample) error
	// Capture returns the flow's capture state and sample; a flow never
	// armed (or another project's) is ErrNotFound (SAMPLE_NOT_FOUND).
	Capture(ctx context.Context, project, flowID string) (Capture, error)
}

// StateStore keeps each flow's own key-value state, written by STORE steps
// and read by later runs as `state` (at most MaxStateBytes as JSON, which
// the Service checks). It lives beside the flow, outside its versioned
// definition; FlowStore.DeleteFlow removes it with the flow.
type StateStore interface {
	// FlowState returns the flow's state: empty (not an error) when the
	// flow has none or is gone.
	FlowState(ctx context.Context, project, flowID string) (map[string]json.RawMessage, error)
	// UpdateFlowState replaces the flow's state with what change returns
	// for the current one, atomically (a concurrent update makes change
	// run again on the newer state). An error from change is returned as
	// is; a flow missing from the project is ErrNotFound.
	UpdateFlowState(ctx context.Context, project, flowID string, change func(map[string]json.RawMessage) (map[string]json.RawMessage, error)) error
}

// Store is everything the Service persists outside Secrets.
type Store interface {
	ProjectStore
	KeyStore
	FlowStore
	ConnectionStore
	SampleStore
	StateStore
	VariableStore
	AuditStore
	VersionStore
	UsageStore   // storage.go
	InsightStore // insights.go
	SlotStore
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
	// TriggerKey evaluates a bare expression over `trigger` alone (a
	// webhook's idempotencyKey) and returns its value as text; "" when the
	// value is null or empty.
	TriggerKey(ctx context.Context, expr string, td TriggerData) (string, error)
	// ResponseExpression checks a bare expression that may also use
	// `response` (an HTTP answer: status, headers, body), as paginate and
	// POLL expressions do.
	ResponseExpression(src string) error
}

// CodeChecker is a Checker that can also compile a CODE step's script, so
// that a script with a syntax error is refused when the flow is saved.
type CodeChecker interface {
	Code(src string) error
}

// RunStore persists runs. Runs belong to a flow; deleting the flow deletes
// them (FlowStore.DeleteFlow).
type RunStore interface {
	// Run returns an error wrapping ErrNotFound if the project's flow has no
	// such run.
	Run(ctx context.Context, project, flowID, id string) (Run, error)
	// ListRuns pages through a flow's runs, newest first; q.Status filters.
	// Items are summaries (Run.Summary), read without the large parts where
	// the store can; a page ends early, with Next set, once its summaries
	// reach RunPageBudget bytes (always at least one item).
	ListRuns(ctx context.Context, project, flowID string, q ListQuery) (Page[Run], error)
	// SearchRuns pages through a project's runs, newest first, filtered by
	// q, reading one index per page; items are summaries within
	// RunPageBudget, as ListRuns's.
	SearchRuns(ctx context.Context, project string, q RunQuery) (Page[Run], error)
	// ListRunsJSON and SearchRunsJSON are ListRuns and SearchRuns with each
	// summary as the JSON the API returns for it, byte for byte what
	// json.Marshal makes of the Run: the run list endpoints write a page
	// from them. A store that keeps each summary's JSON returns it as
	// stored, without decoding it into a Run for the API to encode again
	// (together most of a page's CPU); one that does not can return
	// SummaryPageJSON of its Page[Run].
	ListRunsJSON(ctx context.Context, project, flowID string, q ListQuery) (Page[json.RawMessage], error)
	SearchRunsJSON(ctx context.Context, project string, q RunQuery) (Page[json.RawMessage], error)
	// ClaimRun takes a RUNNING run for one attempt until now+lease, counting
	// the attempt in Attempts, with a conditional write: a final run is
	// RunFinished, a run another attempt holds (lease not yet expired) is
	// RunClaimed, and a missing run (its flow deleted) is ErrNotFound. The
	// claim gets a new LeaseToken, and Interrupted counts the earlier
	// attempts that were claimed but never released or finished.
	ClaimRun(ctx context.Context, project, id string, now time.Time, lease time.Duration) (Run, error)
	// ReleaseRun records a failed attempt that will be retried: the run stays
	// RUNNING with the attempt's steps and error, and its lease is dropped.
	// Like FinishRun, it writes only while r.LeaseToken is the run's claim:
	// otherwise RunLeaseLost (another attempt claimed it), RunFinished (it
	// is final) or ErrNotFound (it is gone), and nothing changes.
	ReleaseRun(ctx context.Context, r Run) error
	// FinishRun writes the final state of a claimed run and, in the same
	// atomic write, adds it to the flow's stats (Finished, Succeeded when
	// SUCCEEDED, LastRun = max(LastRun, r.Created)). A run already final is
	// RunFinished, one claimed by another attempt RunLeaseLost; neither
	// changes anything. A store that is also the run queue (flowd's) makes
	// the queue entry of the run's waiting caller (Trigger.Caller, Wait)
	// due in the same write (callflow.go); others leave that to Waker.
	// With its alert event (run.succeeded, run.failed, run.timeout): a
	// refused finish writes none, so a finish retried after it committed
	// writes no second event.
	FinishRun(ctx context.Context, r Run) error
	// RecordSteps journals the step results of a claimed run's attempt
	// (r.Steps), keeping it RUNNING and claimed, fenced like ReleaseRun.
	RecordSteps(ctx context.Context, r Run) error
	// AppendSteps journals the changes to a claimed attempt's results
	// since its previous entry (DiffSteps), as entry r.JournalLen+1 of the
	// run's journal, fenced like ReleaseRun, without writing the run's
	// document again: the journal of a long run grows by what each step
	// adds. Every read of the run (Run, the claims) returns it with its
	// entries folded in (ApplyStepPatches) and JournalLen set; RecordSteps,
	// ReleaseRun and FinishRun write the whole run and empty the journal
	// (FinishRun may leave the entries of a run whose JournalLen is 0 to
	// go with the run: a final run's journal is never read). A run created
	// at or before its flow's StoppedAt (a PutFlow that disabled the flow)
	// is refused with FlowStopped, and nothing changes (flowstop.go).
	AppendSteps(ctx context.Context, r Run, patches []StepPatch) error
	// DeleteRunsBefore removes at most limit runs created before t (the
	// retention purge), with their waitpoints where the store keeps them
	// (WaitpointStore), in the same write, and returns how many runs it
	// removed.
	DeleteRunsBefore(ctx context.Context, t time.Time, limit int) (int, error)
}

// RunQueue accepts runs for execution.
type RunQueue interface {
	// Enqueue makes a new RUNNING run durable and due: when it returns nil,
	// the run record exists and will be executed even if this process dies
	// the next instant (embedded: run and queue entry in one transaction;
	// AWS: run item written, then the message accepted by SQS). A run ID
	// that exists already is ErrConflict with code RUN_EXISTS and changes
	// nothing: derived IDs deduplicate deliveries that way.
	Enqueue(ctx context.Context, r Run) error
}

// InlineQueue is the embedded queue's fast path for ON_COMPLETION runs
// (RunRuntime.Inline): the receiver that accepts the run also executes it,
// inline, so the run is stored already claimed by that attempt and the
// attempt waits for no claim commit of its own. The queue entry exists from
// the same write, so the run survives the receiver's process, but no worker
// takes it while the attempt's lease holds: one executor, never a race.
// The attempt settles the entry itself (Ack, Retry, Park, as a worker does
// by its Outcome); a process that dies leaves it to a worker once the lease
// runs out (or at once after a restart that drops leases).
type InlineQueue interface {
	// EnqueueClaimed is RunQueue.Enqueue with the run claimed in the same
	// atomic write, for one attempt until now+lease, exactly as
	// RunStore.ClaimRun would claim it (Attempts 1, a new LeaseToken,
	// Interrupted 0), and its queue entry held by the same lease. It returns
	// the claimed run. A run ID that exists already is ErrConflict with code
	// RUN_EXISTS and changes nothing, as for Enqueue.
	EnqueueClaimed(ctx context.Context, r Run, now time.Time, lease time.Duration) (Run, error)
	// Ack, Retry and Park settle the run's queue entry, as WorkQueue's do.
	// The store's RunStore.FinishRun removes the entry of a run that did
	// not fail with it, so that only a FAILED run's entry is acknowledged.
	Ack(ctx context.Context, runID string) error
	Retry(ctx context.Context, runID string, at time.Time) error
	Park(ctx context.Context, runID, reason string) error
}

// FinishedRuns is the embedded store's one-commit path for ON_COMPLETION
// runs of flows without side effects (RunRuntime.Finished, PureFlow): such
// a run is executed in memory first and stored once, final. Nothing
// outside the store saw the run, so a crash before that write loses
// nothing but the answer, which the sender, not answered, sends again.
type FinishedRuns interface {
	// InsertFinishedRun stores a new run that is final already, as
	// RunStore.FinishRun leaves a run finished by its first attempt
	// (Attempts 1, no lease), with no queue entry, and adds it to its
	// flow's stats as FinishRun does, with its alert event as FinishRun
	// writes it, in one atomic write. A run ID that
	// exists already is ErrConflict with code RUN_EXISTS, and a flow that
	// is gone ErrNotFound; both change nothing.
	InsertFinishedRun(ctx context.Context, r Run) error
}

// Delayer is implemented by a RunQueue whose consumer cannot be told to
// look again later (SQS, where each receipt counts towards the dead-letter
// queue): the message of a run paused by a WAIT step is sent again, due at
// until, and the message that ran the attempt is settled. A queue that
// cannot delay that long delivers early with QueueMessage.NotBefore set,
// and HandleMessage sends it on again without claiming the run.
type Delayer interface {
	EnqueueAfter(ctx context.Context, r Run, until time.Time) error
}

// RunDueReader reads when a run is due without the run: what an early
// delivery of a parked run's message (QueueMessage.NotBefore, every
// 15 minutes on SQS) looks at before it is sent on, so that a run made due
// meanwhile (an approval decided, a callback received) whose own wake-up
// message was lost resumes at this delivery rather than at its
// waitpoint's expiry.
type RunDueReader interface {
	// RunDue returns the project's run's status and nextAttemptAt (nil
	// when it has none), or an error wrapping ErrNotFound for a run that
	// is gone or another project's. It may lag the run's latest write (an
	// eventually consistent read): the next delivery looks again.
	RunDue(ctx context.Context, project, id string) (RunStatus, *time.Time, error)
}

// QueueEntry is one entry of the embedded run queue, named by its run.
type QueueEntry struct {
	RunID   string
	Project string
	Claims  int // claims of the entry so far, this one included
	// Run, when set, is the entry's run, claimed for this attempt in the
	// same write as the entry, exactly as RunStore.ClaimRun claims it (the
	// attempt counted, a new LeaseToken, Interrupted): the worker executes
	// it with Service.ExecuteClaimed and waits for one commit less. Nil when
	// the store does not claim runs with entries, or the run could not be
	// claimed (final, held by another attempt, gone): the worker then calls
	// ExecuteRun, whose own claim says why.
	Run *Run
	// Bytes is the size of the run's stored document, as the claim found
	// it (0 when the store does not say): what the attempt will hold in
	// memory, about, which the worker pool budgets (pkg/runworker).
	Bytes int64
}

// WorkQueue is the embedded run queue that flowd's worker pool
// (pkg/runworker) takes due runs from; sqlitestore implements it beside
// RunQueue, in the same database. On AWS, SQS and the runner Lambda play
// this part.
type WorkQueue interface {
	// ClaimDue takes the oldest due entry that no live lease holds, leasing
	// it until now+lease and counting the claim; ok is false when none is
	// due. It may claim the entry's run in the same write (QueueEntry.Run).
	ClaimDue(ctx context.Context, now time.Time, lease time.Duration) (e QueueEntry, ok bool, err error)
	// ClaimDueBatch is ClaimDue for up to max entries, oldest first, in one
	// write: the worker pool claims for all its idle workers at once, so
	// that one commit serves them all. None due is an empty slice.
	ClaimDueBatch(ctx context.Context, now time.Time, lease time.Duration, max int) ([]QueueEntry, error)
	// Ack removes a settled entry. The store's RunStore.FinishRun removes
	// the entry of a run it finishes other than FAILED in the same write,
	// so that the attempt that finished it need not (should another attempt
	// have finished it FAILED meanwhile, the entry comes back after its
	// lease and is acknowledged then).
	Ack(ctx context.Context, runID string) error
	// Retry makes the entry due again at the given time.
	Retry(ctx context.Context, runID string, at time.Time) error
	// Park sets an entry aside for good, with the reason, for inspection.
	Park(ctx context.Context, runID, reason string) error
}

// Execution is the outcome of one attempt at a run.
type Execution struct {
	Run       Run  // with Status, Steps, Error, timing and Response filled
	Retryable bool // the failure was transient: another attempt may succeed
	// WaitUntil is set when a WAIT step paused the run (Status RUNNING):
	// the attempt ends, and the run resumes after the WAIT at this time.
	WaitUntil *time.Time
	// Calls are the child runs that CALL_FLOW steps of a run paused with
	// WaitUntil wait for, to be started once the run is parked.
	Calls []Call
	// WaitFor says why the run is paused ("" is a WAIT or a CALL_FLOW:
	// WaitingWait), and Waitpoints name the steps (journal keys) whose
	// waitpoints it waits for, looked at again once it is parked.
	WaitFor    WaitReason
	Waitpoints []string
}

// Journal makes an attempt's step results durable while it runs. An
// executor calls it after each step with side effects (SideEffects), with
// the results so far, before the next step starts. An error (the store is
// down, or the attempt lost its lease) ends the attempt: later steps must
// not run unrecorded.
type Journal func(ctx context.Context, steps []StepResult) error

// Executor runs a flow's steps; pkg/engine implements it.
type Executor interface {
	// ExecuteJournaled runs f (secrets revealed) for r and returns the
	// attempt's outcome; it persists nothing itself but calls journal (nil:
	// none). A step with side effects that r.Steps records as SUCCEEDED, at
	// its place in the flow, was journaled by an earlier attempt of this
	// run: it is not executed again, and its recorded output stands.
	ExecuteJournaled(ctx context.Context, f Flow, r Run, journal Journal) Execution
	// RunOnError runs a flow's onError steps: it returns r (ended FAILED
	// or TIMEOUT for good) with OnErrorSteps filled, its status and error
	// unchanged. Like ExecuteJournaled, it does not execute again an
	// onError step that r.OnErrorSteps records as finished, and calls
	// journal (nil: none) with the onError results so far after each one
	// with side effects.
	RunOnError(ctx context.Context, f Flow, r Run, journal Journal) Run
	// Poller: a POLL trigger's request is sent as an HTTP step is.
	Poller
}

// ExecEnv is what an executor reads and asks of the domain while it runs a
// flow, one field per need. NewService fills every field with the service
// that serves it and hands it to RunRuntime.NewExecutor; Tracer is the
// one capability among them, nil when tracing is off (Config.Tracer).
type ExecEnv struct {
	Credentials     Credentials     // connections and their values (HTTP steps)
	ConnectionNames ConnectionNames // a step's `connection` by name
	State           FlowStates      // STORE steps and `state`
	Variables       VariableLoader  // `vars`
	Calls           Calls           // CALL_FLOW steps
	Outbound        OutboundGate    // the project's outboundPerMinute
	Tracer          Tracer          // spans of steps and requests; nil: off
	Waitpoints      Waitpoints      // APPROVAL steps and WAIT for a callback
	Actions         AppCatalog      // ACTION steps: the catalog's request templates (nil: none)
	ToolFlows       ToolFlows       // AI steps' flow tools (ai.go)
	AITokens        AIMeter         // AI steps' aiTokensPerDay and its count (aitokens.go)
}

// ConnectionNames resolves a project's connection names to IDs, once per
// run whose flow names a connection.
type ConnectionNames interface {
	ConnectionIDsByName(ctx context.Context, project string) (map[string][]string, error)
}

// FlowStates reads and writes a flow's own key-value state.
type FlowStates interface {
	FlowState(ctx context.Context, project, flowID string) (map[string]any, error)
	StoreFlowState(ctx context.Context, project, flowID string, set map[string]any, del []string) (map[string]any, error)
}

// VariableLoader reads a project's variables for a run, secrets revealed.
type VariableLoader interface {
	LoadRunVariables(ctx context.Context, project string) (RunVariables, error)
}

// Calls starts and reads the runs CALL_FLOW steps call (docs/flows.md,
// "CALL_FLOW").
type Calls interface {
	// CheckCall reports whether a run of project may call flowID now; an
	// *Error says why not, in words for the step's error.
	CheckCall(ctx context.Context, project, flowID string) error
	// StartCall makes the child run durable and queued; a child that
	// exists already is not an error.
	StartCall(ctx context.Context, c Call) error
	// CalledRun reads a child run; a missing one wraps ErrNotFound.
	CalledRun(ctx context.Context, project, flowID, runID string) (Run, error)
}

var (
	_ Credentials     = (*ConnectionService)(nil)
	_ ConnectionNames = (*ConnectionService)(nil)
	_ FlowStates      = (*FlowService)(nil)
	_ VariableLoader  = (*VariableService)(nil)
	_ Calls           = (*RunService)(nil)
	_ OutboundGate    = (*ProjectService)(nil)
)

// VariableStore keeps each project's variables (docs/environments.md): their
// names, plain values and times, as one record per project, so that a run
// reads them all at once. Secret values live in Secrets.
type VariableStore interface {
	// Variables returns the project's variables by name: empty (not an
	// error) when it has none.
	Variables(ctx context.Context, project string) (map[string]Variable, error)
	// UpdateVariables replaces the project's variables with what change
	// returns for the current ones, atomically (a concurrent update makes
	// change run again on the newer ones). An error from change is
	// returned as is, and nothing is written. The entry of ctx's request
	// (AuditFrom) is written in the same atomic write as the variables.
	UpdateVariables(ctx context.Context, project string, change func(map[string]Variable) (map[string]Variable, error)) error
}

// SlotStore keeps the admission bookkeeping of runs
// (runstate_admission.go): one small Slots document per bound, named by
// scope (a flow's concurrency or throttle for one key value, a project's
// concurrentRuns). The rules live in the RunService; the store only makes
// each change atomic.
type SlotStore interface {
	// UpdateSlots reads the scope's slots (none: empty Slots), calls
	// change and writes what it returns, atomically: when another writer
	// changed the document meanwhile, it reads again and calls change
	// again. Empty slots (Slots.Empty) remove the document.
	UpdateSlots(ctx context.Context, project, scope string, change func(Slots) (Slots, error)) error
}

// SlotWaker is implemented by a queue that can bring the entries of waiting
// runs forward (flowd's): when a run gives back a slot, the runs first in
// line for it are made due at once instead of at their next poll. An entry
// that an attempt holds, or that is due already, is left as it is.
type SlotWaker interface {
	Wake(ctx context.Context, runIDs []string, now time.Time) error
}

// Share is how a worker pool shares its workers among projects: a project
// holding PerProject attempts already (Held, by project) gets no more
// from a shared claim, so that one project's backlog leaves workers to the
// others.
type Share struct {
	Held       map[string]int
	PerProject int
}

// Capped reports whether a project holds its whole share now (a nil Share:
// no).
func (s *Share) Capped() bool {
	if s == nil {
		return false
	}
	for _, n := range s.Held {
		if n >= s.PerProject {
			return true
		}
	}
	return false
}

// SharedWorkQueue is a WorkQueue that can share a claim among projects
// (flowd's): ClaimDueShared is ClaimDueBatch reading further (up to a bound
// the store names) past the due entries of projects at their share, and
// taking none of theirs, so that one project's backlog does not hide
// another project's entry behind it. It costs more than ClaimDueBatch;
// the pool asks for it while a project holds its share.
type SharedWorkQueue interface {
	ClaimDueShared(ctx context.Context, now time.Time, lease time.Duration, max int, share Share) ([]QueueEntry, error)
}

// RateBuckets are token buckets every instance of the service shares, so
// that a project's webhooksPerSecond, outboundPerMinute and runsPerMinute
// bound the project and not one process: the AWS backend's Lambda
// environments each hold their own memory (dynamostore's buckets are
// DynamoDB items), and so do the nodes of a cluster on PostgreSQL
// (pgstore's are rows). Nil (flowd on SQLite, one process): the
// ProjectService's in-memory buckets and counts.
type RateBuckets interface {
	// Take takes one token from the bucket named key, which refills rate
	// tokens a second up to burst. It answers 0 when a token was taken,
	// or, taking nothing, how long until one will be there.
	Take(ctx context.Context, key string, rate float64, burst int64, now time.Time) (wait time.Duration, err error)
	// Peek reports, taking nothing, the tokens of the bucket in use (0 to
	// burst: what was taken and not yet refilled) and how long until one
	// will be there (0: now).
	Peek(ctx context.Context, key string, rate float64, burst int64, now time.Time) (inUse int64, wait time.Duration, err error)
}

// UserStore keeps people (users.go): users, their memberships in projects
// (a role in each), the one-time set-up links of invitations and dashboard
// sessions. Secrets are kept only as SHA-256 hashes (set-up tokens,
// session tokens) or as the PasswordHasher's encoding (passwords). It is
// a port of its own, not part of Store, so that a store without people
// still serves API keys (Config.Users nil).
type UserStore interface {
	// CreateUser stores a new user; an email another user has is
	// ErrConflict (code USER_EXISTS). Emails arrive lower-cased.
	CreateUser(ctx context.Context, u User) error
	// User returns an error wrapping ErrNotFound if there is no such user.
	User(ctx context.Context, id string) (User, error)
	// UserByEmail returns an error wrapping ErrNotFound if no user has it.
	UserByEmail(ctx context.Context, email string) (User, error)
	// SetPassword replaces the user's password hash; an unknown ID is
	// ErrNotFound.
	SetPassword(ctx context.Context, id, hash string) error
	// EndSessions increments the user's SessionEpoch, which ends every
	// session made before (a session carries the epoch it was made in);
	// an unknown ID is ErrNotFound.
	EndSessions(ctx context.Context, id string) error

	// PutMembership creates or replaces the user's role in a project,
	// with the audit entry of ctx (AuditFrom) in the same atomic write.
	PutMembership(ctx context.Context, m Membership) error
	// Membership returns an error wrapping ErrNotFound if the user is not
	// a member of the project.
	Membership(ctx context.Context, project, user string) (Membership, error)
	// Memberships lists a user's projects, oldest membership first.
	Memberships(ctx context.Context, user string) ([]Membership, error)
	// Members lists a project's memberships, oldest first.
	Members(ctx context.Context, project string) ([]Membership, error)
	// DeleteMembership removes the user from the project and revokes
	// (KeyStore's Revoked, at at) every API key the user made in it, in one
	// atomic write with the audit entry of ctx: no key of a removed user outlives the removal. A user
	// who is not a member is ErrNotFound.
	DeleteMembership(ctx context.Context, project, user string, at time.Time) error

	// CreateInvitation stores a set-up link (by its token's hash).
	CreateInvitation(ctx context.Context, inv Invitation) error
	// Invitation returns the invitation with that token hash, used or not,
	// or an error wrapping ErrNotFound.
	Invitation(ctx context.Context, hash string) (Invitation, error)
	// UseInvitation sets Used on the invitation with that hash, once:
	// of concurrent uses exactly one succeeds, the others (and every later
	// one) get ErrConflict (code SETUP_LINK_USED); an unknown hash is
	// ErrNotFound.
	UseInvitation(ctx context.Context, hash string, at time.Time) error

	// CreateSession stores a dashboard session (by its token's hash).
	CreateSession(ctx context.Context, s Session) error
	// Session returns the session with that hash or an error wrapping
	// ErrNotFound.
	Session(ctx context.Context, hash string) (Session, error)
	// DeleteSession removes a session; a missing one is not an error.
	DeleteSession(ctx context.Context, hash string) error
}

// PasswordHasher makes and checks the stored form of a password: a slow,
// salted hash (pkg/passwords: argon2id). The domain only asks it, so that
// pkg/automation needs no cryptography module.
type PasswordHasher interface {
	// HashPassword returns the encoded hash of pw, with its own salt and
	// parameters.
	HashPassword(pw string) (string, error)
	// CheckPassword reports whether pw matches the encoded hash; an
	// encoding it cannot read is an error.
	CheckPassword(hash, pw string) (bool, error)
}
