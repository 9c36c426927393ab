package automation

import (
	"encoding/json"
	"fmt"
	"time"
)

// RunStatus is where a run is. RUNNING covers queued and executing.
type RunStatus string

// Run states; all but RUNNING are final.
const (
	RunRunning   RunStatus = "RUNNING"
	RunSucceeded RunStatus = "SUCCEEDED"
	RunFailed    RunStatus = "FAILED"
	RunTimeout   RunStatus = "TIMEOUT"
)

// Final reports whether s is a final state.
func (s RunStatus) Final() bool { return s != RunRunning && s != "" }

// Run is one execution of a flow.
type Run struct {
	ID         string       `json:"id"`
	Project    string       `json:"-"`
	FlowID     string       `json:"flowId"`
	Status     RunStatus    `json:"status"`
	Trigger    TriggerData  `json:"trigger"`
	Steps      []StepResult `json:"steps"`
	Error      string       `json:"error,omitempty"`
	Created    time.Time    `json:"created"`
	Started    *time.Time   `json:"started"`
	Finished   *time.Time   `json:"finished"`
	DurationMs *int64       `json:"durationMs"`
	Attempts   int          `json:"attempts"`
	// NextAttemptAt is when a RUNNING run waiting between attempts will be
	// tried again; null while it executes and once it is final.
	NextAttemptAt *time.Time `json:"nextAttemptAt"`
	// WaitingFor says why a RUNNING run is not executing: a bound of its
	// flow or project (CONCURRENCY, THROTTLE, QUOTA), a WAIT step, or the
	// backoff before a RETRY. Empty while it executes and once it is final.
	WaitingFor WaitReason `json:"waitingFor,omitempty"`
	// Deferred counts the claims that found no slot for the run
	// (runstate_admission.go): they are not attempts at it, so MaxAttempts
	// does not count them. Internal, like OnErrorOf.
	Deferred int `json:"deferred,omitempty"`
	// ResumedFrom is the run this one resumed (a retry from the failed
	// step), which lent it the outputs of its finished steps.
	ResumedFrom string `json:"resumedFrom,omitempty"`
	// RetryOf is the run this one retries from START or replays: a replay
	// skips such runs when their origin is in its window too, so replaying
	// a window twice does not replay the replays.
	RetryOf string `json:"retryOf,omitempty"`
	// StoppedAt names the FILTER step that ended the run, if one did.
	StoppedAt string `json:"stoppedAt,omitempty"`
	// Interrupted counts the attempts before the current one that ended
	// without a result: claimed, then neither released nor finished,
	// because their process died or lost the lease. RunStore.ClaimRun
	// fills it; it is not part of the run's JSON.
	Interrupted int `json:"-"`
	// LeaseToken names the claim an attempt holds (RunStore.ClaimRun
	// makes a new one per claim). Every write of the attempt is
	// conditional on it still being the run's claim: an attempt that lost
	// its lease can write nothing (fencing). Not part of the run's JSON.
	LeaseToken string `json:"-"`
	// JournalLen counts the entries the store holds in the run's step
	// journal beside its document (RunStore.AppendSteps), folded into
	// Steps and OnErrorSteps already: a claim fills it, and the attempt's
	// next entry is number JournalLen+1. Not part of the run's JSON.
	JournalLen int `json:"-"`
	// Response is what a synchronous (ON_COMPLETION) webhook answers: the
	// RESPOND step's, or the last step's output.
	Response *RunResponse `json:"response,omitempty"`
	// Usage is the model tokens the run's AI steps used, summed over them
	// (aitokens.go); absent for a run without AI steps.
	Usage *RunUsage `json:"usage,omitempty"`
	// OnErrorSteps are the results of the flow's onError steps, run once
	// when the run ended FAILED or TIMEOUT.
	OnErrorSteps []StepResult `json:"onErrorSteps,omitempty"`
	// OnErrorOf is the status (FAILED or TIMEOUT) a RUNNING run whose
	// onError steps are executing will end with: stored with their journal,
	// so that an attempt resuming them runs neither the run's steps nor the
	// onError steps that finished again. Internal: the stored document
	// holds it, API answers never (Public, Summary), and a final run has
	// none.
	OnErrorOf RunStatus `json:"onErrorOf,omitempty"`
	// FlowVersion is the version of its flow the run executes, fixed when
	// it starts: every attempt, resume and onError of the run executes
	// that version's definition (pinning, versions.go). Null for a run of
	// the flow's draft (Draft) and for runs from before versions.
	FlowVersion *int64 `json:"flowVersion"`
	// Draft marks a test run of the flow's draft, which executes
	// DraftDefinition: the draft as it was when the run started.
	Draft bool `json:"draft,omitempty"`
	// DraftDefinition is internal, as OnErrorOf: the stored document
	// holds it, API answers never (Public, Summary).
	DraftDefinition *Definition `json:"draftDefinition,omitempty"`
	// Trace is the trace context of the request that started the run
	// (tracing.go), kept so that every attempt joins the caller's trace;
	// nil without one or with tracing off. Internal, as OnErrorOf.
	Trace *RunTrace `json:"trace,omitempty"`
}

// Public is r as API answers show it: without the internal fields a
// stored run document may hold (OnErrorOf, StepResult.ItemsJournal).
func (r Run) Public() Run {
	r.OnErrorOf, r.DraftDefinition, r.Deferred, r.Trace = "", nil, 0, nil
	if sec := r.Trigger.CallerSecrets(); len(sec) > 0 {
		// A child run executes with its input as given, secrets and all;
		// its record shows them masked, as its caller's does.
		masks := SecretMasks(sec)
		r.Trigger.Body = MaskJSON(r.Trigger.Body, masks)
		if r.Trigger.RawBody != "" {
			r.Trigger.RawBody = MaskText(r.Trigger.RawBody, masks)
		}
	}
	r.Trigger.Caller = r.Trigger.Caller.public()
	r.Trigger.BodyDigest = ""
	r.Steps = withoutItemsJournals(r.Steps)
	r.OnErrorSteps = withoutItemsJournals(r.OnErrorSteps)
	if r.Usage == nil && r.Status == RunRunning {
		// Journal entries carry steps only: a run under way shows the
		// usage its AI steps' journals hold so far.
		r.Usage = StepsUsage(r.Steps, r.OnErrorSteps)
	}
	return r
}

// withoutItemsJournals is a copy of steps (at every depth) without their
// ItemsJournal; steps itself is left as it is.
func withoutItemsJournals(steps []StepResult) []StepResult {
	if steps == nil {
		return nil
	}
	out := make([]StepResult, len(steps))
	for i, st := range steps {
		st.ItemsJournal = nil
		st.Steps = withoutItemsJournals(st.Steps)
		if st.Iterations != nil {
			its := make([]Iteration, len(st.Iterations))
			for j, it := range st.Iterations {
				it.Steps = withoutItemsJournals(it.Steps)
				its[j] = it
			}
			st.Iterations = its
		}
		out[i] = st
	}
	return out
}

// TriggerData is the request that started a run, as the steps see it under
// `trigger`. Credentials the receiver checked (Authorization, the HEADER
// authentication header, cookies) are never kept in it.
type TriggerData struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"` // lower-case names, values joined with ", "
	Query   map[string]string `json:"query"`
	// Body: parsed JSON as is; a form as an object of strings; anything else
	// as a JSON string.
	Body json.RawMessage `json:"body"`
	// RawBody is the body exactly as received, kept when it differs from
	// Body (signatures are computed over the wire bytes); empty means Body.
	RawBody string `json:"rawBody,omitempty"`

	// What the body-type and path-parameter rules of the workflow builder
	// receiver add (docs/flows.md, "Triggers").
	// Params holds a workflow builder path's :name values; Files a
	// multipart body's file parts; BodyBase64 a body of any type that is
	// neither JSON, a form, text nor XML, byte for byte (Body is then null).
	Params     map[string]string `json:"params,omitempty"`
	Files      []TriggerFile     `json:"files,omitempty"`
	BodyBase64 string            `json:"bodyBase64,omitempty"`

	// Caller is the run whose CALL_FLOW step started this one (callflow.go).
	Caller *Caller `json:"caller,omitempty"`

	// BodyDigest is the hex SHA-256 of the body's wire bytes, set by the
	// receivers: a repeated idempotency key is compared on it
	// (duplicate.go), since Body and RawBody may come back from a store
	// re-encoded. Internal: API answers never show it (Run.Public).
	BodyDigest string `json:"bodyDigest,omitempty"`
}

// TriggerFile is one file part of a multipart/form-data body.
type TriggerFile struct {
	Field       string `json:"field"`
	Filename    string `json:"filename"`
	ContentType string `json:"contentType"`
	Size        int64  `json:"size"`
	Base64      string `json:"base64"`
}

// StepStatus is the outcome of one step.
type StepStatus string

// Step outcomes. SKIPPED follows a FILTER that was false or a failed step.
// While a run waits (a WAIT, a CALL_FLOW waiting for its child), a SWITCH
// whose branch holds the waiting step is RUNNING and a step not reached yet
// is PENDING; a run that has ended has neither.
const (
	StepSucceeded StepStatus = "SUCCEEDED"
	StepFailed    StepStatus = "FAILED"
	StepSkipped   StepStatus = "SKIPPED"
	StepRunning   StepStatus = "RUNNING"
	StepPending   StepStatus = "PENDING"
)

// StepResult records one step of a run.
type StepResult struct {
	Name       string          `json:"name"`
	Type       StepType        `json:"type"`
	Status     StepStatus      `json:"status"`
	Output     json.RawMessage `json:"output,omitempty"`
	Error      string          `json:"error,omitempty"`
	StartedAt  *time.Time      `json:"startedAt,omitempty"`
	FinishedAt *time.Time      `json:"finishedAt,omitempty"`
	DurationMs int64           `json:"durationMs"`
	// Logs are a CODE step's console lines, capped by the sandbox.
	Logs []string `json:"logs,omitempty"`
	// Steps are the results of the branch a SWITCH took.
	Steps []StepResult `json:"steps,omitempty"`
	// Iterations are a FOR_EACH's items, in item order.
	Iterations []Iteration `json:"iterations,omitempty"`
	// Attempts counts the executions of the step in its run's attempt
	// that recorded it (more than 1 after per-step retries); 0 when it did
	// not run.
	Attempts int `json:"attempts"`
	// ItemsJournal is the list a FOR_EACH that has not succeeded iterates,
	// as the attempt that began it evaluated it: an attempt that resumes
	// the loop iterates the same items, whatever its list expression says
	// now (state, now()). Internal: the stored document holds it, API
	// answers never (Run.Public, Summary).
	ItemsJournal *ItemsJournal `json:"itemsJournal,omitempty"`
}

// ItemsJournal records a FOR_EACH's list: Count items whose JSON has the
// SHA-256 digest SHA256 (hex), and the JSON itself (Items) when it fits
// the run's output budget. Without Items, a resumed loop evaluates its
// list again and goes on only if it is the same list.
type ItemsJournal struct {
	Count  int             `json:"count"`
	SHA256 string          `json:"sha256"`
	Items  json.RawMessage `json:"items,omitempty"`
}

// Iteration records one item of a FOR_EACH: the results of its steps.
type Iteration struct {
	Index  int          `json:"index"`
	Status StepStatus   `json:"status"`
	Error  string       `json:"error,omitempty"`
	Steps  []StepResult `json:"steps"`
}

// RunResponse is the answer a synchronous webhook sends when its run ends.
type RunResponse struct {
	StatusCode int             `json:"statusCode"`
	Body       json.RawMessage `json:"body"`
	// Headers and ContentType are the RESPOND step's, rendered. Text means
	// Body is a JSON string sent as its text rather than as JSON.
	Headers     map[string]string `json:"headers,omitempty"`
	ContentType string            `json:"contentType,omitempty"`
	Text        bool              `json:"text,omitempty"`
}

// RunPageBudget bounds the JSON of one page of run summaries: a page stops
// early, with a cursor, once its summaries reach about this many bytes, so
// that a list costs little whatever the runs hold.
const RunPageBudget = 1 << 20

// Summary is r as run lists show it: without the parts that can be large,
// the trigger's body and raw body, the step outputs and the response body.
// Those are in the single-run GET.
func (r Run) Summary() Run {
	r.Trigger.Body, r.Trigger.RawBody, r.Trigger.BodyDigest = nil, "", ""
	r.Trigger.Caller = r.Trigger.Caller.public()
	steps := make([]StepResult, len(r.Steps))
	for i, st := range r.Steps {
		st.Output, st.Steps, st.Iterations, st.ItemsJournal = nil, nil, nil, nil
		steps[i] = st
	}
	r.Steps = steps
	r.OnErrorSteps, r.OnErrorOf, r.DraftDefinition, r.Deferred, r.Trace = nil, "", nil, 0, nil
	if r.Response != nil {
		resp := *r.Response
		resp.Body = nil
		r.Response = &resp
	}
	return r
}

// SummaryPageJSON is p with each run encoded as the API returns it, for a
// RunStore's ListRunsJSON and SearchRunsJSON when it keeps no summary JSON
// (it takes ListRuns's or SearchRuns's two results as they are).
func SummaryPageJSON(p Page[Run], err error) (Page[json.RawMessage], error) {
	if err != nil {
		return Page[json.RawMessage]{}, err
	}
	out := Page[json.RawMessage]{Items: make([]json.RawMessage, len(p.Items)), Next: p.Next}
	for i, r := range p.Items {
		if out.Items[i], err = json.Marshal(r); err != nil {
			return Page[json.RawMessage]{}, fmt.Errorf("encode run %s: %w", r.ID, err)
		}
	}
	return out, nil
}

// SummaryBytes is the size of r's summary as JSON, for RunPageBudget.
func SummaryBytes(r Run) int {
	b, err := json.Marshal(r.Summary())
	if err != nil {
		return 0
	}
	return len(b)
}
