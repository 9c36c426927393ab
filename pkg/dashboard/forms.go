package dashboard

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowdef"
)

// The editor's forms are data: one entry per trigger and step type says
// which fields its form has and how each is edited, and static/builder.js
// draws every form from it. A new step type is one more entry in
// stepForms (and its group in the palette); the script needs no change
// unless the type brings a new kind of field.

// Field kinds builder.js knows how to edit.
const (
	kindText       = "text"       // a plain string
	kindNumber     = "number"     // an integer
	kindBool       = "bool"       // true or false (absent: the default)
	kindSelect     = "select"     // one of Options
	kindExpression = "expression" // a bare expression: trigger.body.x > 1
	kindTemplate   = "template"   // a string with {{ expressions }}
	kindBody       = "body"       // a template (text) or any JSON (an object: every string a template)
	kindJSON       = "json"       // any JSON value, written as JSON
	kindKeyValue   = "key-value"  // an object of templates: headers, query, SET values, STORE set
	kindList       = "list"       // a list of strings, one a line
	kindCases      = "cases"      // a SWITCH's conditions; their steps are edited in the picture
	kindSteps      = "steps"      // nested steps, edited in the picture
	kindConnection = "connection" // a connection of the project, by ID
	kindFlow       = "flow"       // a flow of the project, by ID
	// Kinds of the newer step types: every one edits JSON the user never
	// types.
	kindConnName  = "connection-name" // a connection by name, of one of the types in Options
	kindAppAction = "app-action"      // ACTION: app, action, connection and one input per schema property
	kindChecks    = "checkboxes"      // a list of strings, each one of Options
	kindFormBuild = "form-schema"     // APPROVAL's form: a list of fields written as a JSON Schema
	kindValues    = "values"          // a list of values: a string is a template, anything else JSON
	kindTools     = "tools"           // AI's tools: a flow of the project, or an MCP connection's tool
	kindDecimal   = "decimal"         // a number with a fraction (temperature)
	kindMode      = "mode"            // WAIT: what it waits for; fields with Mode show in one mode
)

// formField is one field of a form. Key is its path in the step or
// trigger object ("retry.attempts", "webhook.responseMode").
type formField struct {
	Key     string   `json:"key"`
	Label   string   `json:"label"`
	Kind    string   `json:"kind"`
	Options []string `json:"options,omitempty"`
	Help    string   `json:"help,omitempty"`
	// Engine limits the field to flows of one engine (a workflow builder
	// webhook's path and response mode).
	Engine string `json:"engine,omitempty"`
	// Mode shows the field only while the step's mode (a kindMode field)
	// is this one: a WAIT's duration, until or callback.
	Mode string `json:"mode,omitempty"`
	// Required marks a field the step needs.
	Required bool `json:"required,omitempty"`
}

// formSpec is the form of one trigger or step type.
type formSpec struct {
	Type  string `json:"type"`
	Label string `json:"label"`
	// Group places a step type in the palette (paletteGroups).
	Group string `json:"group,omitempty"`
	Help  string `json:"help,omitempty"`
	// Name is what a new step of this type is called (made unique).
	Name string `json:"name,omitempty"`
	// New is what a step of this type starts as, without its name.
	New    map[string]any `json:"new,omitempty"`
	Fields []formField    `json:"fields"`
	// Output names the fields the step's output always has, offered by the
	// field picker before any run (steps.<name>.<field>).
	Output []string `json:"output,omitempty"`
	// Testable says whether "Test step" may run it alone: a step that
	// changes the flow's state or starts another run is tried with a test
	// event instead.
	Testable bool `json:"testable"`
	// Hidden keeps the type out of the palette while the flow language
	// lacks it; a step of that type still opens its form.
	Hidden bool `json:"hidden,omitempty"`
}

// paletteGroup is a heading of the palette.
type paletteGroup struct {
	ID    string `json:"id"`
	Label string `json:"label"`
}

// paletteGroups are the palette's headings in order. A group with no step
// type yet is shown empty ("none yet"), so that where a type will go is
// visible.
var paletteGroups = []paletteGroup{
	{"flow", "Flow control"}, {"data", "Data"}, {"apps", "Apps"}, {"ai", "AI"}, {"people", "People"},
}

var (
	whenField  = formField{Key: "when", Label: "Only when", Kind: kindExpression, Help: "A condition; when false the step is skipped. Empty: always."}
	retryField = []formField{
		{Key: "retry.attempts", Label: "Retry: attempts in all", Kind: kindNumber, Help: "1 to 10; transient failures only."},
		{Key: "retry.backoff", Label: "Retry: first delay", Kind: kindText, Help: "A duration such as 1s (the default)."},
		{Key: "retry.maxBackoff", Label: "Retry: longest delay", Kind: kindText, Help: "At most 5m; 1m by default."},
	}
	signatureFields = func(prefix string) []formField {
		return []formField{
			{Key: prefix + "preset", Label: "Signature preset", Kind: kindSelect, Options: []string{"", automation.PresetGitHub, automation.PresetStripe, automation.PresetSlack, "STANDARD"}, Help: "The sender's scheme; empty with a header for your own."},
			{Key: prefix + "header", Label: "Signature header", Kind: kindText},
			{Key: prefix + "prefix", Label: "Digest prefix", Kind: kindText, Help: "Before the hex digest in the header, such as sha256="},
			{Key: prefix + "secret", Label: "Signing secret", Kind: kindText, Help: "Stored as a secret; shown as ******** once saved."},
		}
	}
	httpFields = func(prefix string) []formField {
		return []formField{
			{Key: prefix + "method", Label: "Method", Kind: kindSelect, Options: []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}},
			{Key: prefix + "url", Label: "URL", Kind: kindTemplate, Help: "May hold {{ expressions }}."},
			{Key: prefix + "connectionId", Label: "Connection", Kind: kindConnection, Help: "Its credentials are added to the request."},
			{Key: prefix + "headers", Label: "Headers", Kind: kindKeyValue},
			{Key: prefix + "query", Label: "Query parameters", Kind: kindKeyValue},
			{Key: prefix + "body", Label: "Body", Kind: kindBody, Help: "Text with {{ expressions }}, or JSON whose strings are templates."},
			{Key: prefix + "timeoutMs", Label: "Timeout (ms)", Kind: kindNumber},
		}
	}
)

// triggerForms are the triggers' forms; the engine is chosen beside them.
var triggerForms = []formSpec{
	{Type: string(automation.TriggerWebhook), Label: "Webhook", Help: "An HTTP request starts a run.",
		New: map[string]any{"webhook": map[string]any{"httpMethod": "POST", "path": "my-webhook", "responseMode": "ON_COMPLETION"}},
		Fields: append([]formField{
			{Key: "webhook.httpMethod", Label: "Method", Kind: kindSelect, Options: append(slices.Clone(automation.WebhookMethods), automation.MethodAny), Engine: string(automation.WorkflowBuilder)},
			{Key: "webhook.path", Label: "Path", Kind: kindText, Engine: string(automation.WorkflowBuilder), Help: "The URL is {workflow_url}/webhook/<path>."},
			{Key: "webhook.responseMode", Label: "Answer", Kind: kindSelect, Options: []string{string(automation.RespondOnCompletion), string(automation.RespondImmediately)}, Engine: string(automation.WorkflowBuilder),
				Help: "ON_COMPLETION answers with the RESPOND step (or the last output) once the run ends; IMMEDIATE answers 202 at once."},
			{Key: "webhook.authentication.type", Label: "Caller authentication", Kind: kindSelect, Options: []string{"", string(automation.AuthNone), string(automation.AuthBasic), string(automation.AuthHeader)}, Engine: string(automation.WorkflowBuilder)},
			{Key: "webhook.authentication.username", Label: "Basic: user name", Kind: kindText, Engine: string(automation.WorkflowBuilder)},
			{Key: "webhook.authentication.password", Label: "Basic: password", Kind: kindText, Engine: string(automation.WorkflowBuilder)},
			{Key: "webhook.authentication.name", Label: "Header: name", Kind: kindText, Engine: string(automation.WorkflowBuilder)},
			{Key: "webhook.authentication.value", Label: "Header: value", Kind: kindText, Engine: string(automation.WorkflowBuilder)},
			{Key: "webhook.idempotencyHeader", Label: "Deduplicate by header", Kind: kindText},
			{Key: "webhook.idempotencyKey", Label: "Deduplicate by expression", Kind: kindExpression, Help: "Such as trigger.body.id."},
			{Key: "webhook.allowedOrigins", Label: "Browser origins allowed (CORS)", Kind: kindList},
			{Key: "inputSchema", Label: "Input schema", Kind: kindJSON, Help: "Optional JSON Schema of trigger.body: describes the flow as a tool to AI steps and MCP clients."},
		}, signatureFields("webhook.signature.")...)},
	{Type: string(automation.TriggerSchedule), Label: "Schedule",
		New: map[string]any{"schedule": map[string]any{"cron": "0 9 * * 1-5"}},
		Fields: []formField{
			{Key: "schedule.cron", Label: "Cron", Kind: kindText, Help: "Five fields: minute hour day month weekday."},
			{Key: "schedule.timezone", Label: "Time zone", Kind: kindText, Help: "An IANA name such as Europe/Paris; UTC by default."},
		}},
	{Type: string(automation.TriggerPoll), Label: "Poll", Help: "Each new item of an API's list starts a run.",
		New: map[string]any{"poll": map[string]any{"every": "5m", "request": map[string]any{"method": "GET", "url": "https://api.example.com/items"}, "items": "response.body.items", "key": "item.id"}},
		Fields: append(append([]formField{{Key: "poll.every", Label: "Every", Kind: kindText, Help: "A duration such as 5m."}},
			httpFields("poll.request.")...),
			formField{Key: "poll.items", Label: "Items", Kind: kindExpression, Help: "The list in the answer: response.body.items"},
			formField{Key: "poll.key", Label: "Item key", Kind: kindExpression, Help: "What identifies an item: item.id"}),
	},
}

// stepForms are the step types' forms, in palette order within a group.
var stepForms = []formSpec{
	{Type: string(automation.StepHTTP), Name: "call", Label: "HTTP request", Group: "apps", Testable: true,
		New:    map[string]any{"method": "GET", "url": ""},
		Fields: append(append(httpFields(""), formField{Key: "continueOnFail", Label: "Go on when it fails", Kind: kindBool}), retryField...),
		Output: []string{"status", "headers", "body"}},
	{Type: string(automation.StepVerifySignature), Name: "signed", Label: "Verify signature", Group: "apps", Testable: true,
		New: map[string]any{"signature": map[string]any{"preset": automation.PresetGitHub}}, Fields: signatureFields("signature.")},
	{Type: string(automation.StepSet), Name: "set", Label: "Set values", Group: "data", Testable: true,
		New: map[string]any{"values": map[string]any{"value": ""}}, Fields: []formField{{Key: "values", Label: "Values", Kind: kindKeyValue, Help: "Each value is a template; the step outputs the object."}}},
	{Type: string(automation.StepCode), Name: "code", Label: "Code (JavaScript)", Group: "data", Testable: true,
		New: map[string]any{"code": "return {ok: true}"},
		Fields: append([]formField{
			{Key: "code", Label: "Code", Kind: kindJSONText, Help: "The body of a function; its return value is the output. trigger and steps are in scope."},
			{Key: "timeout", Label: "Time limit", Kind: kindText, Help: "1s by default, at most 10s."},
		}, retryField...)},
	{Type: string(automation.StepStore), Name: "remember", Label: "Store state", Group: "data",
		New: map[string]any{"set": map[string]any{"key": ""}},
		Fields: []formField{
			{Key: "set", Label: "Keys to set", Kind: kindKeyValue, Help: "Templates, kept in the flow's state between runs."},
			{Key: "delete", Label: "Keys to delete", Kind: kindList},
		}},
	{Type: string(automation.StepFilter), Name: "only_if", Label: "Filter", Group: "flow", Testable: true,
		New: map[string]any{"condition": "trigger.body != nil"}, Fields: []formField{{Key: "condition", Label: "Go on only if", Kind: kindExpression}}},
	{Type: string(automation.StepSwitch), Name: "route", Label: "Switch", Group: "flow", Testable: true,
		New:    map[string]any{"cases": []any{map[string]any{"when": "trigger.body.type == 'a'", "steps": []any{}}}, "default": []any{}},
		Fields: []formField{{Key: "cases", Label: "Cases", Kind: kindCases, Help: "The first case whose condition holds runs its steps; otherwise the default's. Add steps to a case in the picture."}}},
	{Type: string(automation.StepForEach), Name: "each", Label: "For each", Group: "flow",
		New: map[string]any{"items": "trigger.body.items", "steps": []any{}},
		Fields: []formField{
			{Key: "items", Label: "Items", Kind: kindExpression, Help: "The list; item and index are in scope in its steps."},
			{Key: "concurrency", Label: "Items at once", Kind: kindNumber, Help: "1 to 10."},
			{Key: "steps", Label: "Steps per item", Kind: kindSteps},
		}},
	{Type: string(automation.StepWait), Name: "wait", Label: "Wait", Group: "flow",
		New: map[string]any{"duration": "10m"}, Fields: []formField{
			{Key: "for", Label: "Wait for", Kind: kindMode, Options: []string{"duration", "until", "callback"},
				Help: "A duration, a time (until), or a callback: the first POST to wait.callbackUrl resumes the run."},
			{Key: "duration", Label: "Duration", Kind: kindText, Mode: "duration", Required: true, Help: "Such as 10m; at most 720h (30 days)."},
			{Key: "until", Label: "Until", Kind: kindExpression, Mode: "until", Required: true, Help: "An expression giving an RFC 3339 time, at most 30 days away."},
			{Key: "timeout", Label: "Callback time limit", Kind: kindText, Mode: "callback", Help: "1m to 720h (7 days by default); then the output is {timedOut: true}."},
			{Key: "notify", Label: "Notify steps", Kind: kindSteps, Mode: "callback", Help: "Run when the wait begins, wait.callbackUrl in scope: add them in the notify frame of the picture."},
		}},
	{Type: string(automation.StepCallFlow), Name: "subflow", Label: "Call a flow", Group: "flow",
		New: map[string]any{"flowId": "", "input": map[string]any{}, "wait": true},
		Fields: []formField{
			{Key: "flowId", Label: "Flow", Kind: kindFlow},
			{Key: "input", Label: "Its trigger body", Kind: kindBody},
			{Key: "wait", Label: "Wait for its end", Kind: kindBool},
		}},
	{Type: string(automation.StepRespond), Name: "reply", Label: "Respond", Group: "flow", Testable: true,
		New: map[string]any{"statusCode": 200, "body": ""},
		Fields: []formField{
			{Key: "statusCode", Label: "Status", Kind: kindNumber},
			{Key: "body", Label: "Body", Kind: kindBody, Help: "Text with {{ expressions }}, or JSON whose strings are templates."},
			{Key: "contentType", Label: "Content type", Kind: kindText},
			{Key: "headers", Label: "Headers", Kind: kindKeyValue},
		}},
	{Type: string(automation.StepApproval), Name: "approve", Label: "Ask for approval", Group: "people",
		New:    map[string]any{"title": "Approve?", "approvals": 1, "timeout": "72h"},
		Fields: approvalFields(),
		Output: []string{"decision", "values", "decisions"}},
	{Type: string(automation.StepAction), Name: "action", Label: "App action", Group: "apps", Testable: true,
		New: map[string]any{"action": "slack.post_message", "input": map[string]any{"channel": "#general", "text": "Hello"}},
		Fields: append([]formField{
			{Key: "action", Label: "App", Kind: kindAppAction, Required: true, Help: "An app of the catalog, then one of its actions; its input is one field per property."},
			{Key: "timeoutMs", Label: "Timeout (ms)", Kind: kindNumber},
			{Key: "continueOnFail", Label: "Go on when it fails", Kind: kindBool},
		}, retryField...)},
	{Type: string(automation.StepSQL), Name: "query", Label: "SQL query", Group: "data", Testable: true,
		New: map[string]any{"connection": "db", "query": "select 1", "maxRows": 1000},
		Fields: append([]formField{
			{Key: "connection", Label: "Connection", Kind: kindConnName, Options: []string{string(automation.ConnectionPostgres), string(automation.ConnectionMySQL)}, Required: true, Help: "A POSTGRES or MYSQL connection of the project."},
			{Key: "query", Label: "Query", Kind: kindJSONText, Required: true, Help: "$1, $2 (PostgreSQL) or ? (MySQL); values go in Parameters, never {{ }} here."},
			{Key: "params", Label: "Parameters", Kind: kindValues, Help: "One value a line, in placeholder order: text or {{ templates }}."},
			{Key: "maxRows", Label: "Max rows", Kind: kindNumber, Help: "1 to 10,000 (1,000 by default); the step fails past it."},
			{Key: "timeout", Label: "Time limit", Kind: kindText, Help: "10s by default, at most 60s."},
		}, retryField...),
		Output: []string{"rows", "rowCount", "columns"}},
	{Type: string(automation.StepEmail), Name: "mail", Label: "Send email", Group: "apps",
		New: map[string]any{"connection": "mail", "to": []any{"ada@example.com"}, "subject": "Hello", "text": "Hello"},
		Fields: []formField{
			{Key: "connection", Label: "Connection", Kind: kindConnName, Options: []string{string(automation.ConnectionSMTP)}, Required: true, Help: "An SMTP connection of the project."},
			{Key: "to", Label: "To", Kind: kindList, Required: true, Help: "One address (or template) a line; 1 to 50 with Cc."},
			{Key: "cc", Label: "Cc", Kind: kindList},
			{Key: "replyTo", Label: "Reply to", Kind: kindTemplate},
			{Key: "subject", Label: "Subject", Kind: kindTemplate, Required: true},
			{Key: "text", Label: "Text", Kind: kindJSONText, Help: "Text or HTML (or both) is required; both are templates."},
			{Key: "html", Label: "HTML", Kind: kindJSONText},
		},
		Output: []string{"messageId"}},
	{Type: string(automation.StepAI), Name: "ask", Label: "Ask a model", Group: "ai",
		New: map[string]any{"connection": "openai", "model": "gpt-4o-mini", "prompt": "{{ trigger.body.text }}", "maxTurns": 8},
		Fields: []formField{
			{Key: "connection", Label: "Connection", Kind: kindConnName, Options: []string{string(automation.ConnectionOpenAI), string(automation.ConnectionAnthropic)}, Required: true, Help: "An OPENAI or ANTHROPIC connection of the project."},
			{Key: "model", Label: "Model", Kind: kindText, Required: true, Help: "Such as gpt-4o-mini or claude-sonnet-4-5."},
			{Key: "system", Label: "System", Kind: kindTemplate},
			{Key: "prompt", Label: "Prompt", Kind: kindTemplate, Required: true, Help: "The user's message, e.g. {{ trigger.body.text }}."},
			{Key: "tools", Label: "Tools", Kind: kindTools, Help: "Flows of the project (described by their input schema) and tools of MCP connections the model may call."},
			{Key: "maxTurns", Label: "Max turns", Kind: kindNumber, Help: "1 to 32 (8 by default)."},
			{Key: "maxTokens", Label: "Max tokens", Kind: kindNumber, Help: "4,096 by default."},
			{Key: "temperature", Label: "Temperature", Kind: kindDecimal, Help: "0 to 2; the provider's default when empty."},
			{Key: "output", Label: "Advanced: output schema (JSON Schema)", Kind: kindJSON, Help: "Optional JSON Schema the answer must meet (2 repair turns)."},
		},
		Output: []string{"text", "json", "toolCalls", "turns", "usage", "model", "stopReason"}},
	// MCP calls one tool of an MCP server. Its form is keyed by the type's
	// name: the palette offers it once the flow language has the type.
	{Type: stepMCP, Name: "tool", Label: "MCP tool", Group: "ai", Hidden: !hasStepType(stepMCP),
		// A tool name to replace: the step must save as the palette adds it.
		New: map[string]any{"connection": "mcp", "tool": "tool_name", "arguments": map[string]any{}},
		Fields: []formField{
			{Key: "connection", Label: "Connection", Kind: kindConnName, Options: []string{connectionMCP}, Required: true, Help: "An MCP connection of the project."},
			{Key: "tool", Label: "Tool", Kind: kindText, Required: true, Help: "The tool's name as the server lists it."},
			{Key: "arguments", Label: "Arguments", Kind: kindKeyValue, Help: "Each value is a template."},
		}},
}

// kindJSONText is a multi-line plain string (code).
const kindJSONText = "multiline"

// The MCP step and connection type, by name: the flow language may not
// have them yet on this build (hasStepType).
const (
	stepMCP       = "MCP"
	connectionMCP = "MCP"
)

// hasStepType reports whether the flow language knows the step type t.
func hasStepType(t string) bool {
	return slices.Contains(flowdef.StepTypes, flowdef.StepType(t))
}

// approvalFields is APPROVAL's form. Approvers' emails are offered once
// the flow language has them (approvers.emails), so that no form writes a
// field a save refuses.
func approvalFields() []formField {
	out := []formField{
		{Key: "title", Label: "Question", Kind: kindTemplate, Required: true, Help: "What the deciders are asked, e.g. Refund {{ trigger.body.amount }}?"},
		{Key: "approvals", Label: "Approvals needed", Kind: kindNumber, Help: "1 to 10 distinct deciders; one rejection decides."},
		{Key: "approvers.roles", Label: "Roles that may decide", Kind: kindChecks,
			Options: []string{string(automation.RoleAdmin), string(automation.RoleEditor), string(automation.RoleOperator)},
			Help:    "None checked: operator, editor and admin. A link counts as one decider."},
	}
	if jsonField(reflect.TypeFor[flowdef.Approvers](), "emails") {
		out = append(out, formField{Key: "approvers.emails", Label: "People who may decide (emails)", Kind: kindList, Help: "One address a line."})
	}
	return append(out,
		formField{Key: "timeout", Label: "Time limit", Kind: kindText, Help: "1m to 720h (7 days by default); then the decision is timeout."},
		formField{Key: "form", Label: "Form", Kind: kindFormBuild, Help: "The fields deciders fill in; their values are steps.<name>.values."},
		formField{Key: "notify", Label: "Notify steps", Kind: kindSteps, Help: "Run when the wait begins, with approval.url, approveUrl, rejectUrl and expiresAt in scope: add them in the notify frame of the picture."},
	)
}

// jsonField reports whether struct type t has a field named name in JSON.
func jsonField(t reflect.Type, name string) bool {
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); tag == name {
			return true
		}
	}
	return false
}

// formsJSON is what the editor's script reads: the groups, the triggers'
// and the steps' forms, and the fields every step has.
func formsJSON() string {
	b, err := json.Marshal(struct {
		Groups   []paletteGroup `json:"groups"`
		Triggers []formSpec     `json:"triggers"`
		Steps    []formSpec     `json:"steps"`
		Common   []formField    `json:"common"`
		Engines  []string       `json:"engines"`
	}{paletteGroups, triggerForms, stepForms, []formField{{Key: "name", Label: "Name", Kind: kindText, Help: "Unique in the flow; later steps read its output as steps.<name>."}, whenField},
		[]string{string(automation.WorkflowBuilder), string(automation.FlowBuilder)}})
	if err != nil {
		panic(err) // a literal table: it always marshals
	}
	return string(b)
}

// formApp is an app of the catalog as ACTION's form needs it: its actions
// and their input schemas, and the connection type its actions use.
type formApp struct {
	Key            string       `json:"key"`
	Name           string       `json:"name"`
	ConnectionType string       `json:"connectionType"`
	Actions        []formAction `json:"actions"`
}

type formAction struct {
	Key         string          `json:"key"`
	Title       string          `json:"title"`
	Description string          `json:"description,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
}

// appsJSON is the catalog for the editor's script (the same data as
// GET /api/v1/apps, without the request templates).
func appsJSON(apps []automation.App) string {
	out := make([]formApp, 0, len(apps))
	for _, a := range apps {
		fa := formApp{Key: a.Key, Name: a.Name, ConnectionType: string(a.Connection.Type)}
		for _, act := range a.Actions {
			fa.Actions = append(fa.Actions, formAction{Key: act.Key, Title: act.Title, Description: act.Description, Input: act.Input})
		}
		out = append(out, fa)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "[]" // raw schemas the catalog parsed: they marshal
	}
	return string(b)
}
