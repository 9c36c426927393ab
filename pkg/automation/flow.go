package automation

import (
	"encoding/json"
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

	// AllowedIPs restricts the webhook receivers to these addresses and
	// CIDR ranges (canonical form); empty means no restriction.
	AllowedIPs []string `json:"-"`
	// Stats are the run counters behind RunCount, SuccessRate and LastRun.
	Stats FlowStats `json:"-"`
	// Version increases by one on every write; stores use it for optimistic
	// concurrency.
	Version int64 `json:"-"`
}

// FlowStats are a flow's run counters, updated atomically when a run finishes.
type FlowStats struct {
	Finished  int64      // runs that reached a final state
	Succeeded int64      // of those, SUCCEEDED
	LastRun   *time.Time // start of the latest run
}

// WithStats fills the derived fields RunCount, SuccessRate and LastRun.
func (f Flow) WithStats() Flow {
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
}

// Summary returns the list item form of f.
func (f Flow) Summary() FlowSummary {
	f = f.WithStats()
	return FlowSummary{
		ID: f.ID, Name: f.Name, Status: f.Status, Engine: f.Engine, TriggerType: f.TriggerType,
		RunCount: f.RunCount, SuccessRate: f.SuccessRate, LastRun: f.LastRun,
		Created: f.Created, Updated: f.Updated,
	}
}

// Trigger says what starts a flow: exactly one of Webhook and Schedule is set,
// matching Type.
type Trigger struct {
	Type     TriggerType `json:"type"`
	Webhook  *Webhook    `json:"webhook,omitempty"`
	Schedule *Schedule   `json:"schedule,omitempty"`
}

// HTTP methods a workflow builder webhook may take.
const (
	MethodAny = "ANY" // GET, POST, PUT and DELETE
)

// WebhookMethods are the concrete methods ANY stands for.
var WebhookMethods = []string{"GET", "POST", "PUT", "DELETE"}

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
)

// SideEffects reports whether steps of type t act on the world outside the
// run (HTTP requests; CODE, which may call helpers with effects later).
// Their results are journaled before the next step starts, and an attempt
// that resumes a run never executes a journaled one again.
func (t StepType) SideEffects() bool { return t == StepHTTP || t == StepCode }

// StepTypes lists the step types in the order error messages name them.
var StepTypes = []StepType{StepHTTP, StepSet, StepFilter, StepVerifySignature, StepRespond, StepCode}

// Step is one action of a flow. Which fields apply depends on Type; strings
// in URL, Headers, Query, Body and Values may hold {{ expressions }}, and
// Condition is a bare expression.
type Step struct {
	Name string   `json:"name"`
	Type StepType `json:"type"`

	// FILTER
	Condition string `json:"condition,omitempty"`

	// HTTP
	ConnectionID   string            `json:"connectionId,omitempty"`
	Method         string            `json:"method,omitempty"`
	URL            string            `json:"url,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	Query          map[string]string `json:"query,omitempty"`
	TimeoutMs      int               `json:"timeoutMs,omitempty"`
	ContinueOnFail bool              `json:"continueOnFail,omitempty"`

	// HTTP and RESPOND: any JSON; RESPOND's is a flat object of strings.
	Body json.RawMessage `json:"body,omitempty"`

	// SET: the object the step outputs.
	Values json.RawMessage `json:"values,omitempty"`

	// RESPOND
	StatusCode int `json:"statusCode,omitempty"`

	// VERIFY_SIGNATURE
	Signature *Signature `json:"signature,omitempty"`

	// CODE: the body of a JavaScript function whose return value is the
	// output, and its wall-clock limit ("1s" by default, at most "10s").
	Code    string `json:"code,omitempty"`
	Timeout string `json:"timeout,omitempty"`
}

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
