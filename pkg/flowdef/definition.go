package flowdef

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Engine is the builder kind of a flow.
type Engine string

// The builder kinds.
const (
	FlowBuilder     Engine = "FLOW_BUILDER"     // webhooks at {engine_url}/api/v1/webhooks/{flowId}
	WorkflowBuilder Engine = "WORKFLOW_BUILDER" // webhooks at {workflow_url}/webhook/{path}
)

// TriggerType is what starts a flow.
type TriggerType string

// Trigger types.
const (
	TriggerWebhook  TriggerType = "WEBHOOK"
	TriggerSchedule TriggerType = "SCHEDULE"
)

// Trigger says what starts a flow: exactly one of Webhook and Schedule is set,
// matching Type.
type Trigger struct {
	Type     TriggerType `json:"type"`
	Webhook  *Webhook    `json:"webhook,omitempty"`
	Schedule *Schedule   `json:"schedule,omitempty"`
	Poll     *Poll       `json:"poll,omitempty"`
	// InputSchema is the JSON Schema of trigger.body (WEBHOOK triggers
	// only): it describes the flow as a tool to models (AI steps) and MCP
	// clients (schemacheck_ai.go).
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
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
	// AI asks a model, which may call tools (flows, MCP tools), in a
	// durable loop (step_ai.go).
	StepAI StepType = "AI"
)

// APPROVAL: a person decides (step_approval.go).
const StepApproval StepType = "APPROVAL" // waits, durably, for people to approve, reject or fill a form

// ACTION, SQL and EMAIL: apps, databases and mail (step_action.go,
// step_sql.go, step_email.go).
const (
	StepAction StepType = "ACTION" // an action of the app catalog, sent as an HTTP step
	StepSQL    StepType = "SQL"    // a parameterised query on a POSTGRES or MYSQL connection
	StepEmail  StepType = "EMAIL"  // a message sent through an SMTP connection
)

// MCP: one tool of an MCP server, called over Streamable HTTP (step_mcp.go).
const StepMCP StepType = "MCP"

// StepTypes lists the step types in the order error messages name them.
var StepTypes = []StepType{StepHTTP, StepSet, StepFilter, StepVerifySignature, StepRespond, StepCode,
	StepSwitch, StepForEach, StepStore, StepWait, StepCallFlow,
	StepApproval, StepAction, StepSQL, StepEmail, StepAI,
	StepMCP}

// Limits of the flow language.
const (
	// MaxForEachItems bounds the items one FOR_EACH step runs over.
	MaxForEachItems = 1000
	// MaxForEachConcurrency bounds how many items of a FOR_EACH run at once.
	MaxForEachConcurrency = 10
	// MaxWait bounds a WAIT step's duration, and how long a WAIT "until",
	// a WAIT for a callback or an APPROVAL may wait.
	MaxWait = 30 * 24 * time.Hour
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
	ConnectionID string            `json:"connectionId,omitempty"`
	Method       string            `json:"method,omitempty"`
	URL          string            `json:"url,omitempty"`
	Headers      map[string]string `json:"headers,omitempty"`
	// Query is HTTP's query parameters, or SQL's statement (query.go).
	Query          Query `json:"query,omitzero"`
	TimeoutMs      int   `json:"timeoutMs,omitempty"`
	ContinueOnFail bool  `json:"continueOnFail,omitempty"`
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

	// APPROVAL (step_approval.go): the title shown to deciders (a
	// template), the form (a JSON Schema object, schema.go), how many
	// distinct deciders must approve, who may decide, and the steps run
	// when the wait begins (also WAIT "for": "callback"). Timeout above is
	// how long it waits.
	Title     string          `json:"title,omitempty"`
	Form      json.RawMessage `json:"form,omitempty"`
	Approvals int             `json:"approvals,omitempty"`
	Approvers *Approvers      `json:"approvers,omitempty"`
	Notify    []Step          `json:"notify,omitempty"`

	// WAIT (step_control.go): "callback" waits for a POST to a one-time
	// URL instead of a time; Until is an expression giving the RFC 3339
	// time to wait for.
	For   string `json:"for,omitempty"`
	Until string `json:"until,omitempty"`

	// Any step: a condition; when false the step is SKIPPED.
	When string `json:"when,omitempty"`

	// HTTP: walk a paginated API (paginate.go).
	Paginate *Paginate `json:"paginate,omitempty"`

	// ACTION (step_action.go): the catalog action's key; its input is
	// Input, its connection Connection or ConnectionID.
	Action string `json:"action,omitempty"`

	// SQL (step_sql.go): the statement is Query.SQL, its values Params
	// (a JSON array of templates), at most MaxRows rows come back, and
	// Timeout bounds it.
	Params  json.RawMessage `json:"params,omitempty"`
	MaxRows int             `json:"maxRows,omitempty"`

	// EMAIL (step_email.go): addresses and content, every string a
	// template.
	To      []string `json:"to,omitempty"`
	Cc      []string `json:"cc,omitempty"`
	Subject string   `json:"subject,omitempty"`
	Text    string   `json:"text,omitempty"`
	HTML    string   `json:"html,omitempty"`
	ReplyTo string   `json:"replyTo,omitempty"`

	// AI (step_ai.go; Connection above names an OPENAI or ANTHROPIC
	// connection): the model, the system text and the prompt (templates),
	// the JSON Schema the answer must meet, the tools the model may call,
	// and the loop's bounds.
	Model       string          `json:"model,omitempty"`
	System      string          `json:"system,omitempty"`
	Prompt      string          `json:"prompt,omitempty"`
	Output      json.RawMessage `json:"output,omitempty"`
	Tools       []AITool        `json:"tools,omitempty"`
	MaxTurns    int             `json:"maxTurns,omitempty"`
	MaxTokens   int             `json:"maxTokens,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`

	// MCP (step_mcp.go; Connection above names an MCP connection): the
	// tool to call and its arguments (a JSON object, every string in it a
	// template); Timeout above bounds the call.
	Tool      string          `json:"tool,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Case is one branch of a SWITCH.
type Case struct {
	When  string `json:"when"`
	Steps []Step `json:"steps"`
}

// Children returns the steps nested directly in s, in order: a SWITCH's
// cases then its default, a FOR_EACH's body, an APPROVAL's or a WAIT's
// notify steps.
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
	if s.Notify != nil {
		out = append(out, s.Notify)
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
		s.Notify = CloneSteps(s.Notify)
		if s.Approvers != nil {
			a := Approvers{Roles: slices.Clone(s.Approvers.Roles), Emails: slices.Clone(s.Approvers.Emails)}
			s.Approvers = &a
		}
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

// TriggerPoll starts a run per new item of an API polled every so often
// (docs/flows.md, "POLL").
const TriggerPoll TriggerType = "POLL"

// Poll is a POLL trigger: every Every, send Request (the fields of an HTTP
// step), take the list Items gives (an expression over `response`), and
// start one run per item whose Key (an expression over `item`) was not seen
// before, with the item as trigger.body.
type Poll struct {
	Every   string      `json:"every"`
	Request PollRequest `json:"request"`
	Items   string      `json:"items"`
	Key     string      `json:"key"`
}

// PollRequest is an HTTP step without its name and type.
type PollRequest Step

// MarshalJSON leaves out name and type, which a poll's request has not.
func (r PollRequest) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(Step(r))
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	delete(m, "name")
	delete(m, "type")
	return json.Marshal(m)
}

// Step is the request as the HTTP step the engine sends. It sends no
// Idempotency-Key unless the request asks for one: every poll is a new
// request, and a stable key would get the first poll's answer back.
func (r PollRequest) Step() Step {
	s := Step(r)
	s.Name, s.Type = "request", StepHTTP
	if s.IdempotencyKey == nil {
		off := false
		s.IdempotencyKey = &off
	}
	return s
}

// Interval is Every as a duration.
func (p *Poll) Interval() (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(p.Every))
	if err != nil || d < MinPollEvery || d > MaxPollEvery {
		return 0, fmt.Errorf("every %q: use a duration from %s to %s, such as \"5m\"", p.Every, MinPollEvery, "24h")
	}
	return d, nil
}

// validatePoll checks a POLL trigger; the request is checked as an HTTP

// Concurrency bounds the runs of a flow that execute at once: at most
// Limit per value of Key (an expression over `trigger`; none: per flow).
// Runs over it wait, in arrival order (docs/flows.md, "Concurrency and
// throttling").
type Concurrency struct {
	Limit int    `json:"limit"`
	Key   string `json:"key,omitempty"`
}

// Throttle bounds the runs of a flow that start per Period: at most Limit
// per value of Key (none: per flow). Runs over it wait, in arrival order.
type Throttle struct {
	Limit  int    `json:"limit"`
	Period string `json:"period"`
	Key    string `json:"key,omitempty"`
}

// Bounds of a flow's concurrency and throttle. A limit is the number of
// runs one slot document keeps (docs/reliability.md); a period is how long
// a start is remembered.
const (
	MaxFlowLimit      = 1000
	MinThrottlePeriod = time.Second
	MaxThrottlePeriod = 24 * time.Hour
)

// PeriodDuration is the throttle's period, checked.
func (t *Throttle) PeriodDuration() (time.Duration, error) {
	d, err := time.ParseDuration(t.Period)
	if err != nil {
		return 0, fmt.Errorf("period %q: use a Go duration such as \"1s\", \"1m\" or \"1h\"", t.Period)
	}
	if d < MinThrottlePeriod || d > MaxThrottlePeriod {
		return 0, fmt.Errorf("period %q: from %s to %s", t.Period, MinThrottlePeriod, MaxThrottlePeriod)
	}
	return d, nil
}

// Paginate makes an HTTP step walk a paginated API: after each page, Next
// (an expression over `response`) gives the next URL, or a cursor that goes
// into the query parameter Param, or null to stop; Items (an expression
// over `response`) gives the page's items. The step outputs {"items":
// [...], "pages": N} (docs/flows.md).
type Paginate struct {
	Next     string `json:"next"`
	Param    string `json:"param,omitempty"`
	Items    string `json:"items"`
	MaxPages int    `json:"maxPages,omitempty"`
}

// Bounds of Paginate.MaxPages: each page is a request and its items are
// held until the step ends, so the walk is bounded by pages as well as by
// the run's output budget.
const (
	DefaultMaxPages = 10
	MaxPages        = 100
)

// Limits of CODE steps (docs/flows.md, "CODE"). The sandbox enforces them; validation
// refuses definitions outside them.
const (
	DefaultCodeTimeout = time.Second
	MaxCodeTimeout     = 10 * time.Second
	// MaxCodeBytes bounds a step's source, so that definitions stay small.
	MaxCodeBytes = 64 << 10
	// CodeMemoryBytes is the script heap a CODE step may use.
	CodeMemoryBytes = 64 << 20
	// MaxCodeOutputBytes bounds the JSON of a CODE step's return value.
	MaxCodeOutputBytes = 1 << 20
)

// CodeTimeout is a CODE step's time limit: its timeout setting (a Go
// duration such as "1s" or "500ms"), or DefaultCodeTimeout when unset.
func (s Step) CodeTimeout() (time.Duration, error) {
	if s.Timeout == "" {
		return DefaultCodeTimeout, nil
	}
	d, err := time.ParseDuration(s.Timeout)
	if err != nil || d <= 0 || d > MaxCodeTimeout {
		return 0, fmt.Errorf("timeout %q: use a duration above 0 and at most %s, such as \"1s\" or \"500ms\"", s.Timeout, MaxCodeTimeout)
	}
	return d, nil
}

// PresetStandard selects the Standard Webhooks scheme (standardwebhooks.com),
// used by Svix, OpenAI, Clerk, Resend and flowd's own event subscriptions.
const PresetStandard = "STANDARD"

// StandardSecretPrefix starts a Standard Webhooks secret; the rest is the
// base64 of the HMAC key.
const StandardSecretPrefix = "whsec_"

// StandardKey decodes a Standard Webhooks secret: "whsec_" followed by the
// base64 key. The prefix is optional, as in the official libraries.
func StandardKey(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, StandardSecretPrefix))
	if err != nil || len(key) == 0 {
		return nil, errors.New("a Standard Webhooks secret is whsec_ followed by a base64 key")
	}
	return key, nil
}

// Bounds of a definition, so that one flow cannot exhaust a runner.
const (
	MaxSteps         = 50
	MaxStepTimeoutMs = 120_000
)

// Bounds of POLL triggers' interval.
const (
	MinPollEvery = 10 * time.Second
	MaxPollEvery = 24 * time.Hour
)
