package automation

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Engine is the builder kind of a flow.
type Engine string

// The builder kinds.
const (
	FlowBuilder     Engine = "FLOW_BUILDER"     // webhooks at {engine_url}/api/v1/webhooks/{flowId}
	WorkflowBuilder Engine = "WORKFLOW_BUILDER" // webhooks at {workflow_url}/webhook/{path}
)

// FlowStatus says whether a flow's trigger fires.
type FlowStatus string

// Flow states. A new flow is INACTIVE.
const (
	FlowActive   FlowStatus = "ACTIVE"
	FlowInactive FlowStatus = "INACTIVE"
)

// TriggerType is what starts a flow.
type TriggerType string

// Trigger types.
const (
	TriggerWebhook  TriggerType = "WEBHOOK"
	TriggerSchedule TriggerType = "SCHEDULE"
)

// Flow is a trigger and the steps it runs. Secret fields inside Trigger and
// Steps hold SecretMask (or nothing) once stored: the values themselves live
// in the Secrets store under FlowSecretName(ID).
type Flow struct {
	ID          string      `json:"id"`
	Project     string      `json:"-"`
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Status      FlowStatus  `json:"status"`
	Engine      Engine      `json:"engine"`
	TriggerType TriggerType `json:"triggerType"`
	RunCount    int64       `json:"runCount"`
	SuccessRate float64     `json:"successRate"`
	LastRun     *time.Time  `json:"lastRun"`
	Created     time.Time   `json:"created"`
	Updated     time.Time   `json:"updated"`
	Trigger     Trigger     `json:"trigger"`
	Steps       []Step      `json:"steps"`
	// OnError runs once when a run ends FAILED or TIMEOUT (after its
	// retries), with `error` in scope; it does not change the run's status.
	OnError []Step `json:"onError,omitempty"`
	// ManagedBy is ManagedByApply when `flowctl apply` created or last
	// updated the flow: a later apply with --prune may delete it.
	ManagedBy string `json:"managedBy,omitempty"`
	// Concurrency and Throttle bound how many runs execute at once and
	// start per period (flowlimits.go); nil: no bound but the project's.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	Throttle    *Throttle    `json:"throttle,omitempty"`

	// AllowedIPs restricts the webhook receivers to these addresses and
	// CIDR ranges (canonical form); empty means no restriction.
	AllowedIPs []string `json:"-"`
	// Stats are the run counters behind RunCount, SuccessRate and LastRun.
	Stats FlowStats `json:"-"`
	// Version increases by one on every write; stores use it for optimistic
	// concurrency.
	Version int64 `json:"-"`

	// LiveVersion is the number of the published version the flow runs
	// (versions.go); HasDraft says whether a draft is saved beside it.
	LiveVersion int64 `json:"version"`
	HasDraft    bool  `json:"hasDraft"`
	// VersionWrites is what CreateFlow and PutFlow write beside the flow,
	// in the same atomic write (versions.go); never read back.
	VersionWrites `json:"-"`
	// FlowBounds are the quotas the write keeps in its own atomic write
	// (quota.go); never read back.
	FlowBounds `json:"-"`
	// StoppedAt is when the flow was last disabled: its runs created until
	// then stop at their next step (flowstop.go).
	StoppedAt *time.Time `json:"-"`
	// Poll is a POLL flow's polling (poll.go), read beside the flow when it
	// is shown; never stored with it.
	Poll *PollStatus `json:"poll,omitempty"`
}

// FlowStats are a flow's run counters, updated atomically when a run finishes.
type FlowStats struct {
	Finished  int64      // runs that reached a final state
	Succeeded int64      // of those, SUCCEEDED
	LastRun   *time.Time // start of the latest run
}

// WithStats fills the derived fields RunCount, SuccessRate and LastRun,
// and the live version of a flow stored before versions (1).
func (f Flow) WithStats() Flow {
	f.LiveVersion = f.live()
	f.VersionWrites = VersionWrites{} // written with the flow, not part of what it shows
	f.FlowBounds = FlowBounds{}
	f.RunCount = f.Stats.Finished
	f.SuccessRate = SuccessRate(f.Stats.Succeeded, f.Stats.Finished)
	f.LastRun = f.Stats.LastRun
	return f
}

// SuccessRate is the percentage of finished runs that succeeded, to one
// decimal, and 0 before the first finished run.
func SuccessRate(succeeded, finished int64) float64 {
	if finished == 0 {
		return 0
	}
	return math.Round(float64(succeeded)*1000/float64(finished)) / 10
}

// FlowSummary is the list item form of a flow: every field but description
// and the definition.
type FlowSummary struct {
	ID          string      `json:"id"`
	Name        string      `json:"name"`
	Status      FlowStatus  `json:"status"`
	Engine      Engine      `json:"engine"`
	TriggerType TriggerType `json:"triggerType"`
	RunCount    int64       `json:"runCount"`
	SuccessRate float64     `json:"successRate"`
	LastRun     *time.Time  `json:"lastRun"`
	Created     time.Time   `json:"created"`
	Updated     time.Time   `json:"updated"`
	// Version and HasDraft are the flow's live version number and whether
	// a draft is saved beside it, as on the flow object.
	Version  int64 `json:"version"`
	HasDraft bool  `json:"hasDraft"`
	// ManagedBy is as on the flow object: in the list, so that apply
	// --prune needs no request per flow to find the flows it may delete.
	ManagedBy string `json:"managedBy,omitempty"`
}

// Summary returns the list item form of f.
func (f Flow) Summary() FlowSummary {
	f = f.WithStats()
	return FlowSummary{
		ID: f.ID, Name: f.Name, Status: f.Status, Engine: f.Engine, TriggerType: f.TriggerType,
		RunCount: f.RunCount, SuccessRate: f.SuccessRate, LastRun: f.LastRun,
		Created: f.Created, Updated: f.Updated, Version: f.LiveVersion, HasDraft: f.HasDraft,
		ManagedBy: f.ManagedBy,
	}
}

// Trigger says what starts a flow: exactly one of Webhook and Schedule is set,
// matching Type.
type Trigger struct {
	Type     TriggerType `json:"type"`
	Webhook  *Webhook    `json:"webhook,omitempty"`
	Schedule *Schedule   `json:"schedule,omitempty"`
	Poll     *Poll       `json:"poll,omitempty"`
}

// HTTP methods a workflow builder webhook may take.
const (
	MethodAny = "ANY" // every method of WebhookMethods
)

// WebhookMethods are the concrete methods a workflow builder webhook may
// take, and that ANY stands for.
var WebhookMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}

// ResponseMode says when a workflow builder webhook answers.
type ResponseMode string

// Response modes.
const (
	RespondImmediately  ResponseMode = "IMMEDIATE"
	RespondOnCompletion ResponseMode = "ON_COMPLETION"
)

// Webhook holds the settings of a webhook trigger. HTTPMethod, Path,
// Authentication and ResponseMode apply to the workflow builder only; the
// flow builder always takes POST at its flow ID.
type Webhook struct {
	HTTPMethod        string          `json:"httpMethod"`
	Path              string          `json:"path,omitempty"`
	Authentication    *Authentication `json:"authentication,omitempty"`
	ResponseMode      ResponseMode    `json:"responseMode,omitempty"`
	Signature         *Signature      `json:"signature,omitempty"`
	IdempotencyHeader string          `json:"idempotencyHeader,omitempty"`
	AllowedOrigins    []string        `json:"allowedOrigins,omitempty"`
	// IdempotencyKey is a bare expression over trigger (trigger.body.id for
	// Stripe's evt_ IDs) whose value deduplicates deliveries as the
	// header's does; the header's value wins when both give one.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
}

// AuthType is how a workflow builder webhook authenticates its caller.
type AuthType string

// Authentication types.
const (
	AuthNone   AuthType = "NONE"
	AuthBasic  AuthType = "BASIC"  // Username, Password
	AuthHeader AuthType = "HEADER" // Name, Value
)

// Authentication is a workflow builder webhook's caller check. Password and
// Value are secrets.
type Authentication struct {
	Type     AuthType `json:"type"`
	Username string   `json:"username,omitempty"`
	Password Secret   `json:"password,omitempty"`
	Name     string   `json:"name,omitempty"`
	Value    Secret   `json:"value,omitempty"`
}

// Signature presets.
const (
	PresetGitHub = "GITHUB"
	PresetStripe = "STRIPE"
	PresetSlack  = "SLACK"
)

// Signature is an HMAC-SHA256 check of the raw body: either a Preset, or a
// Header whose value is Prefix followed by the hex digest.
type Signature struct {
	Preset string `json:"preset,omitempty"`
	Header string `json:"header,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Secret Secret `json:"secret,omitempty"`
}

// Schedule is a cron trigger: five fields, evaluated in Timezone (IANA name,
// default UTC).
type Schedule struct {
	Cron     string `json:"cron"`
	Timezone string `json:"timezone,omitempty"`
}

// StepType is what a step does.
type StepType string

// Step types.
const (
	StepHTTP            StepType = "HTTP"
	StepSet             StepType = "SET"
	StepFilter          StepType = "FILTER"
	StepVerifySignature StepType = "VERIFY_SIGNATURE"
	StepRespond         StepType = "RESPOND"
	StepCode            StepType = "CODE"
	StepSwitch          StepType = "SWITCH"    // runs the steps of the first case whose condition holds
	StepForEach         StepType = "FOR_EACH"  // runs its steps once per item of a list
	StepStore           StepType = "STORE"     // writes the flow's state
	StepWait            StepType = "WAIT"      // pauses the run, durably
	StepCallFlow        StepType = "CALL_FLOW" // starts a run of another flow, and may wait for it
)

// SideEffects reports whether steps of type t act on the world outside the
// run (HTTP requests; CODE, which may call helpers with effects later).
// Their results are journaled before the next step starts, and an attempt
// that resumes a run never executes a journaled one again.
func (t StepType) SideEffects() bool {
	return t == StepHTTP || t == StepCode || t == StepStore || t == StepWait || t == StepCallFlow
}

// StepTypes lists the step types in the order error messages name them.
var StepTypes = []StepType{StepHTTP, StepSet, StepFilter, StepVerifySignature, StepRespond, StepCode,
	StepSwitch, StepForEach, StepStore, StepWait, StepCallFlow}

// Limits of the flow language.
const (
	// MaxForEachItems bounds the items one FOR_EACH step runs over.
	MaxForEachItems = 1000
	// MaxForEachConcurrency bounds how many items of a FOR_EACH run at once.
	MaxForEachConcurrency = 10
	// MaxWait bounds a WAIT step's duration.
	MaxWait = 24 * time.Hour
	// MaxStateBytes bounds a flow's state, as JSON.
	MaxStateBytes = 64 << 10
	// MaxNesting bounds how deep steps nest inside SWITCH and FOR_EACH.
	MaxNesting = 4
)

// Step is one action of a flow. Which fields apply depends on Type; strings
// in URL, Headers, Query, Body and Values may hold {{ expressions }}, and
// Condition is a bare expression.
type Step struct {
	Name string   `json:"name"`
	Type StepType `json:"type"`

	// FILTER
	Condition string `json:"condition,omitempty"`

	// HTTP (Headers also RESPOND: the answer's headers)
	ConnectionID   string            `json:"connectionId,omitempty"`
	Method         string            `json:"method,omitempty"`
	URL            string            `json:"url,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	Query          map[string]string `json:"query,omitempty"`
	TimeoutMs      int               `json:"timeoutMs,omitempty"`
	ContinueOnFail bool              `json:"continueOnFail,omitempty"`
	// IdempotencyKey false turns off the Idempotency-Key header the step
	// otherwise sends on methods other than GET and HEAD.
	IdempotencyKey *bool `json:"idempotencyKey,omitempty"`

	// HTTP: the connection by name instead of ConnectionID, so that a flow
	// file works on every installation (docs/environments.md); the name is
	// resolved to an ID when the run starts.
	Connection string `json:"connection,omitempty"`

	// HTTP and CODE: retry this step alone on transient failures.
	Retry *StepRetry `json:"retry,omitempty"`

	// HTTP and RESPOND: any JSON. A RESPOND body that is a JSON string is a
	// template rendered to text; any other value is sent as JSON, with
	// every string inside it a template.
	Body json.RawMessage `json:"body,omitempty"`

	// SET: the object the step outputs.
	Values json.RawMessage `json:"values,omitempty"`

	// RESPOND (and Headers, Body above). ContentType defaults to
	// application/json for a JSON body and text/plain for a string body.
	StatusCode  int    `json:"statusCode,omitempty"`
	ContentType string `json:"contentType,omitempty"`

	// VERIFY_SIGNATURE
	Signature *Signature `json:"signature,omitempty"`

	// CODE: the body of a JavaScript function whose return value is the
	// output, and its wall-clock limit ("1s" by default, at most "10s").
	Code    string `json:"code,omitempty"`
	Timeout string `json:"timeout,omitempty"`

	// SWITCH: the cases in order, and the steps run when none holds.
	Cases   []Case `json:"cases,omitempty"`
	Default []Step `json:"default,omitempty"`

	// FOR_EACH: the list (an expression, or a literal JSON array), the
	// steps run per item with `item` and `index` in scope, and how many
	// items run at once (1 by default).
	Items       json.RawMessage `json:"items,omitempty"`
	Steps       []Step          `json:"steps,omitempty"`
	Concurrency int             `json:"concurrency,omitempty"`

	// STORE: keys to set (templates) and keys to delete in the flow's state.
	Set    json.RawMessage `json:"set,omitempty"`
	Delete []string        `json:"delete,omitempty"`

	// WAIT: how long to pause ("10m"), at most MaxWait.
	Duration string `json:"duration,omitempty"`

	// CALL_FLOW: the flow of the same project to run, its trigger body
	// (any JSON, every string inside it a template), and whether the step
	// waits for the child run's end (true when absent; validation fills it).
	FlowID string          `json:"flowId,omitempty"`
	Input  json.RawMessage `json:"input,omitempty"`
	Wait   *bool           `json:"wait,omitempty"`
	// Flow names the called flow in portable documents, whose flowId is
	// another installation's: saving resolves it to this project's flow
	// of that name (portable.go) and keeps only the ID.
	Flow string `json:"flow,omitempty"`

	// Any step: a condition; when false the step is SKIPPED.
	When string `json:"when,omitempty"`

	// HTTP: walk a paginated API (paginate.go).
	Paginate *Paginate `json:"paginate,omitempty"`
}

// Case is one branch of a SWITCH.
type Case struct {
	When  string `json:"when"`
	Steps []Step `json:"steps"`
}

// Children returns the steps nested directly in s, in order: a SWITCH's
// cases then its default, a FOR_EACH's body.
func (s *Step) Children() [][]Step {
	var out [][]Step
	for _, c := range s.Cases {
		out = append(out, c.Steps)
	}
	if s.Default != nil {
		out = append(out, s.Default)
	}
	if s.Steps != nil {
		out = append(out, s.Steps)
	}
	return out
}

// WalkSteps calls fn on every step of steps and of the steps nested in
// them, depth first, in order.
func WalkSteps(steps []Step, fn func(*Step)) {
	for i := range steps {
		fn(&steps[i])
		for _, c := range steps[i].Children() {
			WalkSteps(c, fn)
		}
	}
}

// CloneSteps copies steps deeply enough that changing a nested step or its
// signature leaves the original alone.
func CloneSteps(steps []Step) []Step {
	if steps == nil {
		return nil
	}
	out := make([]Step, len(steps))
	for i, s := range steps {
		if s.Signature != nil {
			sg := *s.Signature
			s.Signature = &sg
		}
		if s.Cases != nil {
			cases := make([]Case, len(s.Cases))
			for j, c := range s.Cases {
				cases[j] = Case{When: c.When, Steps: CloneSteps(c.Steps)}
			}
			s.Cases = cases
		}
		s.Default = CloneSteps(s.Default)
		s.Steps = CloneSteps(s.Steps)
		out[i] = s
	}
	return out
}

// WaitDuration parses a WAIT step's duration.
func (s *Step) WaitDuration() (time.Duration, error) {
	d, err := time.ParseDuration(s.Duration)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("duration %q: use a positive Go duration such as \"30s\", \"10m\" or \"2h\"", s.Duration)
	}
	if d > MaxWait {
		return 0, fmt.Errorf("duration %q: at most %s", s.Duration, MaxWait)
	}
	return d, nil
}

// StepRetry retries one step on transient failures (network errors, 408,
// 429, 5xx), exponentially with jitter, honouring Retry-After; other 4xx
// answers are permanent.
type StepRetry struct {
	Attempts   int    `json:"attempts"`             // executions in all, 1 to MaxStepAttempts
	Backoff    string `json:"backoff,omitempty"`    // first delay, default 1s
	MaxBackoff string `json:"maxBackoff,omitempty"` // longest delay, default 1m (at most 5m)
}

// Limits of StepRetry.
const (
	MaxStepAttempts       = 10
	DefaultStepBackoff    = time.Second
	DefaultStepMaxBackoff = time.Minute
	MaxStepBackoff        = 5 * time.Minute
	// MinStepBackoff is the shortest wait between two executions of a step,
	// whatever the flow says: a retry loop at 1 ms would make one webhook
	// thousands of requests to a third party.
	MinStepBackoff = 100 * time.Millisecond
)

// Delays parses r's backoff settings, defaults applied.
func (r StepRetry) Delays() (first, most time.Duration, err error) {
	first, most = DefaultStepBackoff, DefaultStepMaxBackoff
	if r.Backoff != "" {
		if first, err = time.ParseDuration(r.Backoff); err != nil || first <= 0 || first > MaxStepBackoff {
			return 0, 0, fmt.Errorf("backoff %q: use a duration from 1ms to %s, e.g. \"2s\"", r.Backoff, MaxStepBackoff)
		}
	}
	if r.MaxBackoff != "" {
		if most, err = time.ParseDuration(r.MaxBackoff); err != nil || most <= 0 || most > MaxStepBackoff {
			return 0, 0, fmt.Errorf("maxBackoff %q: use a duration from 1ms to %s, e.g. \"1m\"", r.MaxBackoff, MaxStepBackoff)
		}
	}
	return first, max(first, most), nil
}

// IdempotencyKeyFor is the Idempotency-Key an HTTP step sends: the run it
// belongs to (originRunID: the run a retry resumed, if any, so that a
// resumed run keeps the keys of its origin) and the step's name, stable
// across every retry and resume.
func IdempotencyKeyFor(originRunID, stepName string) string { return originRunID + "." + stepName }

// WebhookDescriptor is the answer of the webhook lookup.
type WebhookDescriptor struct {
	FlowID     string `json:"flowId"`
	WebhookURL string `json:"webhookUrl"`
	Method     string `json:"method"`
	Enabled    bool   `json:"enabled"`
}

// WebhookSecurity is a flow's IP allowlist.
type WebhookSecurity struct {
	FlowID     string   `json:"flowId"`
	AllowedIPs []string `json:"allowedIPs"`
}
