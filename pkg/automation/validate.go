package automation

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Bounds of a definition, so that one flow cannot exhaust a runner.
const (
	MaxSteps         = 50
	MaxStepTimeoutMs = 120_000
)

var (
	// Step names are identifiers so that `steps.<name>` works in expressions.
	stepNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	// Webhook paths: slash-separated segments of URL-safe characters, or
	// :name parameters.
	webhookPathRE = regexp.MustCompile(`^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$`)
	paramRE       = regexp.MustCompile(`^:[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	httpMethods   = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}
	hookMethods   = append(slices.Clone(WebhookMethods), MethodAny)
	presets       = []string{PresetGitHub, PresetStripe, PresetSlack, PresetStandard}
)

// validateMeta checks the fields of a flow that need no definition.
func validateMeta(f *Flow) error {
	if err := checkText("name", f.Name, 200); err != nil {
		return err
	}
	if utf8.RuneCountInString(f.Description) > 2000 {
		return Invalid("description is longer than 2000 characters")
	}
	return nil
}

// validateFlow checks a whole flow, filling defaults in place. Messages name
// the field and what is allowed.
func (s *flowValidator) validateFlow(ctx context.Context, f *Flow) error {
	if f.Engine != FlowBuilder && f.Engine != WorkflowBuilder {
		return Invalid("engine %q: allowed values are %s, %s", f.Engine, FlowBuilder, WorkflowBuilder)
	}
	if err := validateMeta(f); err != nil {
		return err
	}
	if err := s.validateTrigger(f); err != nil {
		return err
	}
	if err := s.validateFlowLimits(f); err != nil {
		return err
	}
	f.TriggerType = f.Trigger.Type
	if f.TriggerType == TriggerPoll {
		if err := s.validatePoll(ctx, f); err != nil {
			return err
		}
	}
	if f.Steps == nil {
		f.Steps = []Step{}
	}
	if n := countSteps(f.Steps) + countSteps(f.OnError); n > MaxSteps {
		return Invalid("steps: %d steps (nested steps and onError included); at most %d are allowed", n, MaxSteps)
	}
	v := stepsValidation{s: s, f: f, seen: map[string]bool{}}
	if err := v.steps(ctx, f.Steps, "steps", 0, false); err != nil {
		return err
	}
	if err := v.steps(ctx, f.OnError, "onError", 0, false); err != nil {
		return err
	}
	waits := false
	WalkSteps(f.OnError, func(st *Step) { waits = waits || st.Type == StepWait })
	if waits {
		return Invalid("onError: WAIT cannot run in onError steps; they run once the run has ended")
	}
	WalkSteps(f.OnError, func(st *Step) { waits = waits || st.Type == StepCallFlow && *st.Wait })
	if waits {
		return Invalid(`onError: a CALL_FLOW that waits cannot run in onError steps; they run once the run has ended (set "wait": false)`)
	}
	return nil
}

// countSteps counts steps and the steps nested in them.
func countSteps(steps []Step) int {
	n := 0
	WalkSteps(steps, func(*Step) { n++ })
	return n
}

// stepsValidation checks the steps of one flow, nested ones included, with
// names unique in the whole flow.
type stepsValidation struct {
	s    *flowValidator
	f    *Flow
	seen map[string]bool
}

// steps checks a list of steps at path at (such as "steps" or
// "steps[0].cases[1].steps"), depth levels deep, inLoop inside a FOR_EACH.
// A message names the path of the bad field and the step's name.
func (v *stepsValidation) steps(ctx context.Context, steps []Step, at string, depth int, inLoop bool) error {
	if depth > MaxNesting {
		return Invalid("%s: steps nest more than %d levels deep", at, MaxNesting)
	}
	for i := range steps {
		st := &steps[i]
		here := fmt.Sprintf("%s[%d]", at, i)
		if !stepNameRE.MatchString(st.Name) {
			return Invalid("%s.name %q: use a letter or underscore, then letters, digits or underscores (at most 64), so that expressions can say steps.<name>", here, st.Name)
		}
		if v.seen[st.Name] {
			return Invalid("%s.name %q: step names must be unique in the whole flow, nested steps included", here, st.Name)
		}
		v.seen[st.Name] = true
		if err := v.step(ctx, st, here, depth, inLoop); err != nil {
			return err
		}
	}
	return nil
}

// named adds the name of step st to a validation message about its own
// fields.
func named(st *Step, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Kind == ErrInvalid {
		return Invalid("%s (step %q)", e.Message, st.Name)
	}
	return err
}

// step checks one step: the fields of every step, its type's, then the
// steps nested in it.
func (v *stepsValidation) step(ctx context.Context, st *Step, at string, depth int, inLoop bool) error {
	if st.When != "" {
		if err := v.s.checker.Expression(st.When); err != nil {
			return named(st, Invalid("%s.when: %v", at, err))
		}
	}
	if err := v.s.validateStep(ctx, v.f, st, at); err != nil {
		return named(st, err)
	}
	switch st.Type {
	case StepSwitch:
		if len(st.Cases) == 0 {
			return named(st, Invalid(`%s.cases is required for SWITCH, e.g. [{"when": "trigger.body.type == 'invoice.paid'", "steps": [...]}]`, at))
		}
		for j, c := range st.Cases {
			cat := fmt.Sprintf("%s.cases[%d]", at, j)
			if strings.TrimSpace(c.When) == "" {
				return named(st, Invalid("%s.when is required: the condition that selects this case", cat))
			}
			if err := v.s.checker.Expression(c.When); err != nil {
				return named(st, Invalid("%s.when: %v", cat, err))
			}
			if err := v.steps(ctx, c.Steps, cat+".steps", depth+1, inLoop); err != nil {
				return err
			}
		}
		return v.steps(ctx, st.Default, at+".default", depth+1, inLoop)
	case StepForEach:
		return v.steps(ctx, st.Steps, at+".steps", depth+1, true)
	case StepWait:
		if inLoop {
			return named(st, Invalid("%s: WAIT cannot run inside FOR_EACH; wait before or after the loop", at))
		}
	case StepCallFlow:
		if inLoop && *st.Wait {
			return named(st, Invalid(`%s: a CALL_FLOW that waits cannot run inside FOR_EACH; set "wait": false, or call before or after the loop`, at))
		}
	}
	return nil
}

func (s *flowValidator) validateTrigger(f *Flow) error {
	t := &f.Trigger
	if t.Poll != nil && t.Type != TriggerPoll {
		return Invalid("trigger.poll is for POLL triggers; this trigger is %s", cmp.Or(t.Type, TriggerWebhook))
	}
	if t.Type == "" && t.Webhook == nil && t.Schedule == nil && t.Poll == nil {
		t.Type = TriggerWebhook // the default trigger
	}
	switch t.Type {
	case TriggerWebhook:
		if t.Schedule != nil {
			return Invalid("trigger.schedule is for SCHEDULE triggers; this trigger is WEBHOOK")
		}
		if t.Webhook == nil {
			t.Webhook = &Webhook{}
		}
		return s.validateWebhook(f.Engine, t.Webhook)
	case TriggerSchedule:
		if t.Webhook != nil {
			return Invalid("trigger.webhook is for WEBHOOK triggers; this trigger is SCHEDULE")
		}
		if t.Schedule == nil || strings.TrimSpace(t.Schedule.Cron) == "" {
			return Invalid(`trigger.schedule.cron is required for SCHEDULE triggers, e.g. {"cron": "*/5 * * * *", "timezone": "UTC"}`)
		}
		if t.Schedule.Timezone == "" {
			t.Schedule.Timezone = "UTC"
		}
		if err := s.checker.Cron(t.Schedule.Cron, t.Schedule.Timezone); err != nil {
			return Invalid("trigger.schedule: %v", err)
		}
		return nil
	case TriggerPoll:
		return nil // validatePoll, which needs the context
	default:
		return Invalid("trigger.type %q: allowed values are %s, %s, %s", t.Type, TriggerWebhook, TriggerSchedule, TriggerPoll)
	}
}

func (s *flowValidator) validateWebhook(engine Engine, w *Webhook) error {
	if engine == FlowBuilder {
		switch {
		case w.HTTPMethod != "" && w.HTTPMethod != "POST":
			return Invalid("trigger.webhook.httpMethod %q: flow builder webhooks take POST only", w.HTTPMethod)
		case w.Path != "":
			return Invalid("trigger.webhook.path applies to WORKFLOW_BUILDER flows; flow builder webhooks are addressed by flow ID")
		case w.Authentication != nil:
			return Invalid("trigger.webhook.authentication applies to WORKFLOW_BUILDER flows; use signature or an IP allowlist")
		case w.ResponseMode != "":
			return Invalid("trigger.webhook.responseMode applies to WORKFLOW_BUILDER flows; flow builder webhooks answer at once")
		}
		w.HTTPMethod = "POST"
	} else {
		if w.HTTPMethod == "" {
			w.HTTPMethod = "POST"
		}
		if !slices.Contains(hookMethods, w.HTTPMethod) {
			return Invalid("trigger.webhook.httpMethod %q: allowed values are %s", w.HTTPMethod, strings.Join(hookMethods, ", "))
		}
		w.Path = strings.Trim(w.Path, "/")
		if w.Path == "" {
			w.Path = randomToken(10)
		}
		if err := validPathPattern(w.Path); err != nil {
			return err
		}
		if w.Authentication == nil {
			w.Authentication = &Authentication{Type: AuthNone}
		}
		if err := validateAuth(w.Authentication); err != nil {
			return err
		}
		switch w.ResponseMode {
		case "":
			w.ResponseMode = RespondImmediately
		case RespondImmediately, RespondOnCompletion:
		default:
			return Invalid("trigger.webhook.responseMode %q: allowed values are %s, %s", w.ResponseMode, RespondImmediately, RespondOnCompletion)
		}
	}
	if w.Signature != nil {
		if err := validateSignature("trigger.webhook.signature", w.Signature); err != nil {
			return err
		}
	}
	if w.IdempotencyHeader != "" && !isToken(w.IdempotencyHeader) {
		return Invalid("trigger.webhook.idempotencyHeader %q is not a valid HTTP header name", w.IdempotencyHeader)
	}
	if w.IdempotencyKey != "" {
		if err := s.checker.Expression(w.IdempotencyKey); err != nil {
			return Invalid("trigger.webhook.idempotencyKey: %v", err)
		}
	}
	for i, o := range w.AllowedOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return Invalid("trigger.webhook.allowedOrigins[%d] %q: use \"*\" or an origin such as https://app.example.com", i, o)
		}
	}
	return nil
}

func validateAuth(a *Authentication) error {
	const at = "trigger.webhook.authentication"
	switch a.Type {
	case "", AuthNone:
		if a.Username != "" || a.Password != "" || a.Name != "" || a.Value != "" {
			return Invalid("%s: type NONE takes no credentials; use BASIC (username, password) or HEADER (name, value)", at)
		}
		a.Type = AuthNone
	case AuthBasic:
		if a.Name != "" || a.Value != "" {
			return Invalid("%s: name and value belong to type HEADER; BASIC takes username and password", at)
		}
		if a.Username == "" || strings.Contains(a.Username, ":") {
			return Invalid("%s.username is required for BASIC and must not contain ':'", at)
		}
		if a.Password == "" {
			return Invalid("%s.password is required for BASIC", at)
		}
	case AuthHeader:
		if a.Username != "" || a.Password != "" {
			return Invalid("%s: username and password belong to type BASIC; HEADER takes name and value", at)
		}
		if !isToken(a.Name) {
			return Invalid("%s.name %q must be an HTTP header name, such as X-Webhook-Secret", at, a.Name)
		}
		if a.Value == "" {
			return Invalid("%s.value is required for HEADER", at)
		}
	default:
		return Invalid("%s.type %q: allowed values are %s, %s, %s", at, a.Type, AuthNone, AuthBasic, AuthHeader)
	}
	return nil
}

func validateSignature(at string, sg *Signature) error {
	if sg.Secret == "" {
		return Invalid("%s.secret is required", at)
	}
	if sg.Preset != "" {
		if !slices.Contains(presets, sg.Preset) {
			return Invalid("%s.preset %q: allowed values are %s", at, sg.Preset, strings.Join(presets, ", "))
		}
		if sg.Header != "" || sg.Prefix != "" {
			return Invalid("%s: a preset fixes the header and prefix; send either preset or header (with an optional prefix)", at)
		}
		if sg.Preset == PresetStandard && !sg.Secret.Masked() && !strings.Contains(string(sg.Secret), "{{") {
			if _, err := StandardKey(string(sg.Secret)); err != nil {
				return Invalid("%s.secret: %v", at, err)
			}
		}
		return nil
	}
	if !isToken(sg.Header) {
		return Invalid("%s.header %q must be an HTTP header name, such as x-hub-signature-256 (or set preset to one of %s)", at, sg.Header, strings.Join(presets, ", "))
	}
	return nil
}

func (s *flowValidator) validateStep(ctx context.Context, f *Flow, st *Step, at string) error {
	if !slices.Contains(StepTypes, st.Type) {
		return Invalid("%s.type %q: allowed values are %s", at, st.Type, join(StepTypes))
	}
	// Fields of other step types are refused, so a misplaced field is seen.
	if err := onlyFields(st, at); err != nil {
		return err
	}
	if st.Retry != nil {
		if st.Retry.Attempts < 1 || st.Retry.Attempts > MaxStepAttempts {
			return Invalid(`%s.retry.attempts %d: use 1 to %d, e.g. {"attempts": 3, "backoff": "2s", "maxBackoff": "1m"}`, at, st.Retry.Attempts, MaxStepAttempts)
		}
		if _, _, err := st.Retry.Delays(); err != nil {
			return Invalid("%s.retry.%v", at, err)
		}
	}
	switch st.Type {
	case StepFilter:
		if strings.TrimSpace(st.Condition) == "" {
			return Invalid("%s.condition is required for FILTER, e.g. \"trigger.body.event == 'push'\"", at)
		}
		if err := s.checker.Expression(st.Condition); err != nil {
			return Invalid("%s.condition: %v", at, err)
		}
	case StepHTTP:
		return s.validateHTTPStep(ctx, f, st, at)
	case StepSet:
		if !isJSONObject(st.Values) {
			return Invalid(`%s.values is required for SET and must be an object, e.g. {"ref": "{{ trigger.body.ref }}"}`, at)
		}
		return s.checkTemplates(at+".values", st.Values)
	case StepVerifySignature:
		if st.Signature == nil {
			return Invalid(`%s.signature is required for VERIFY_SIGNATURE, e.g. {"header": "x-hub-signature-256", "prefix": "sha256=", "secret": "…"}`, at)
		}
		return validateSignature(at+".signature", st.Signature)
	case StepRespond:
		return s.validateRespond(st, at)
	case StepCode:
		return s.validateCode(st, at)
	case StepForEach:
		return s.validateForEach(st, at)
	case StepStore:
		return s.validateStore(st, at)
	case StepWait:
		if _, err := st.WaitDuration(); err != nil {
			return Invalid("%s.%v", at, err)
		}
	case StepCallFlow:
		return s.validateCallFlow(ctx, f, st, at)
	}
	return nil
}

// validateForEach checks a FOR_EACH's list and concurrency; its steps are
// checked by the caller.
func (s *flowValidator) validateForEach(st *Step, at string) error {
	items := bytes.TrimSpace(st.Items)
	switch {
	case len(items) == 0:
		return Invalid(`%s.items is required for FOR_EACH: an expression such as "trigger.body.items", or a JSON array`, at)
	case items[0] == '"':
		var src string
		if err := json.Unmarshal(items, &src); err != nil || strings.TrimSpace(src) == "" {
			return Invalid("%s.items: use an expression such as \"trigger.body.items\", or a JSON array", at)
		}
		if err := s.checker.Expression(src); err != nil {
			return Invalid("%s.items: %v", at, err)
		}
	case items[0] == '[':
		var list []json.RawMessage
		if err := json.Unmarshal(items, &list); err != nil {
			return Invalid("%s.items is not valid JSON", at)
		}
		if len(list) > MaxForEachItems {
			return Invalid("%s.items: %d items; FOR_EACH runs over at most %d", at, len(list), MaxForEachItems)
		}
		if err := s.checkTemplates(at+".items", items); err != nil {
			return err
		}
	default:
		return Invalid("%s.items: use an expression string such as \"trigger.body.items\", or a JSON array", at)
	}
	if st.Concurrency == 0 {
		st.Concurrency = 1
	}
	if st.Concurrency < 1 || st.Concurrency > MaxForEachConcurrency {
		return Invalid("%s.concurrency %d: use 1 to %d (1 runs the items one after another)", at, st.Concurrency, MaxForEachConcurrency)
	}
	if len(st.Steps) == 0 {
		return Invalid("%s.steps is required for FOR_EACH: the steps run for each item, with item and index in scope", at)
	}
	return nil
}

// validateStore checks a STORE step's keys and templates.
func (s *flowValidator) validateStore(st *Step, at string) error {
	if len(st.Set) == 0 && len(st.Delete) == 0 {
		return Invalid(`%s: STORE needs set (an object of keys to values, e.g. {"lastSha": "{{ trigger.body.after }}"}) or delete (a list of keys)`, at)
	}
	if len(st.Set) > 0 {
		if !isJSONObject(st.Set) {
			return Invalid(`%s.set must be an object, e.g. {"lastSha": "{{ trigger.body.after }}"}`, at)
		}
		if err := s.checkTemplates(at+".set", st.Set); err != nil {
			return err
		}
	}
	for i, k := range st.Delete {
		if k == "" || len(k) > 256 {
			return Invalid("%s.delete[%d]: a key of 1 to 256 characters", at, i)
		}
	}
	return nil
}

// validateCode checks what can be checked without a JavaScript engine,
// which the management API does not carry: the code is there and not too
// long, and the timeout is in range. Syntax errors show at run time, as the
// step's error ("SyntaxError: … line N").
func (s *flowValidator) validateCode(st *Step, at string) error {
	if strings.TrimSpace(st.Code) == "" {
		return Invalid(`%s.code is required for CODE: the body of a JavaScript function, e.g. "return {total: trigger.body.items.length}"`, at)
	}
	if len(st.Code) > MaxCodeBytes {
		return Invalid("%s.code is %d bytes; at most %d are allowed", at, len(st.Code), MaxCodeBytes)
	}
	if _, err := st.CodeTimeout(); err != nil {
		return Invalid("%s.%v", at, err)
	}
	// A script that does not compile would fail every run; say so now.
	if s.code != nil {
		if err := s.code.Code(st.Code); err != nil {
			return Invalid("%s.code: %v", at, err)
		}
	}
	return nil
}

func (s *flowValidator) validateHTTPStep(ctx context.Context, f *Flow, st *Step, at string) error {
	if st.Method == "" {
		st.Method = "GET"
		if len(st.Body) > 0 {
			st.Method = "POST"
		}
	}
	st.Method = strings.ToUpper(st.Method)
	if !slices.Contains(httpMethods, st.Method) {
		return Invalid("%s.method %q: allowed values are %s", at, st.Method, strings.Join(httpMethods, ", "))
	}
	if strings.TrimSpace(st.URL) == "" {
		return Invalid("%s.url is required for HTTP", at)
	}
	if err := s.checker.Template(st.URL); err != nil {
		return Invalid("%s.url: %v", at, err)
	}
	if !strings.Contains(st.URL, "{{") {
		u, err := url.Parse(st.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return Invalid("%s.url %q: use an absolute http or https URL", at, st.URL)
		}
	}
	for k, v := range st.Headers {
		if !isToken(k) {
			return Invalid("%s.headers: %q is not a valid HTTP header name", at, k)
		}
		if hasControl(v) {
			return Invalid("%s.headers.%s contains a control character (CR, LF or another): a header value is one line of text", at, k)
		}
		if err := s.checker.Template(v); err != nil {
			return Invalid("%s.headers.%s: %v", at, k, err)
		}
	}
	for k, v := range st.Query {
		if err := s.checker.Template(v); err != nil {
			return Invalid("%s.query.%s: %v", at, k, err)
		}
	}
	if len(st.Body) > 0 {
		if err := s.checkTemplates(at+".body", st.Body); err != nil {
			return err
		}
	}
	if st.TimeoutMs < 0 || st.TimeoutMs > MaxStepTimeoutMs {
		return Invalid("%s.timeoutMs %d: use 1 to %d (0 takes the default)", at, st.TimeoutMs, MaxStepTimeoutMs)
	}
	if st.Connection != "" {
		if st.ConnectionID != "" {
			return Invalid("%s: connection and connectionId both name a connection; keep one", at)
		}
		if err := checkText(at+".connection", st.Connection, 200); err != nil {
			return err
		}
	}
	if st.Paginate != nil {
		if err := s.validatePaginate(st.Paginate, at+".paginate"); err != nil {
			return err
		}
	}
	if st.ConnectionID != "" {
		_, err := s.store.Connection(ctx, f.Project, st.ConnectionID)
		if errors.Is(err, ErrNotFound) {
			return Invalid("%s.connectionId %q: no such connection in this project", at, st.ConnectionID)
		} else if err != nil {
			return wrap("check connection", err)
		}
	}
	return nil
}

// onlyFields refuses fields that belong to another step type.
func onlyFields(st *Step, at string) error {
	type field struct {
		name  string
		set   bool
		types []StepType
	}
	fields := []field{
		{"condition", st.Condition != "", []StepType{StepFilter}},
		{"connectionId", st.ConnectionID != "", []StepType{StepHTTP}},
		{"connection", st.Connection != "", []StepType{StepHTTP}},
		{"method", st.Method != "", []StepType{StepHTTP}},
		{"url", st.URL != "", []StepType{StepHTTP}},
		{"headers", st.Headers != nil, []StepType{StepHTTP, StepRespond}},
		{"query", st.Query != nil, []StepType{StepHTTP}},
		{"timeoutMs", st.TimeoutMs != 0, []StepType{StepHTTP}},
		{"continueOnFail", st.ContinueOnFail, []StepType{StepHTTP}},
		{"idempotencyKey", st.IdempotencyKey != nil, []StepType{StepHTTP}},
		{"retry", st.Retry != nil, []StepType{StepHTTP, StepCode}},
		{"body", len(st.Body) > 0, []StepType{StepHTTP, StepRespond}},
		{"values", len(st.Values) > 0, []StepType{StepSet}},
		{"statusCode", st.StatusCode != 0, []StepType{StepRespond}},
		{"contentType", st.ContentType != "", []StepType{StepRespond}},
		{"signature", st.Signature != nil, []StepType{StepVerifySignature}},
		{"code", st.Code != "", []StepType{StepCode}},
		{"timeout", st.Timeout != "", []StepType{StepCode}},
		{"cases", st.Cases != nil, []StepType{StepSwitch}},
		{"default", st.Default != nil, []StepType{StepSwitch}},
		{"items", len(st.Items) > 0, []StepType{StepForEach}},
		{"steps", st.Steps != nil, []StepType{StepForEach}},
		{"concurrency", st.Concurrency != 0, []StepType{StepForEach}},
		{"set", len(st.Set) > 0, []StepType{StepStore}},
		{"delete", st.Delete != nil, []StepType{StepStore}},
		{"duration", st.Duration != "", []StepType{StepWait}},
		{"flowId", st.FlowID != "", []StepType{StepCallFlow}},
		{"input", len(st.Input) > 0, []StepType{StepCallFlow}},
		{"wait", st.Wait != nil, []StepType{StepCallFlow}},
		{"paginate", st.Paginate != nil, []StepType{StepHTTP}},
		{"flow", st.Flow != "", []StepType{StepCallFlow}},
	}
	for _, fd := range fields {
		if fd.set && !slices.Contains(fd.types, st.Type) {
			return Invalid("%s.%s does not apply to %s steps (it belongs to %s)", at, fd.name, st.Type, join(fd.types))
		}
	}
	return nil
}

// checkTemplates checks every string inside a JSON value as a template.
func (s *flowValidator) checkTemplates(at string, raw json.RawMessage) error {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return Invalid("%s is not valid JSON", at)
	}
	return s.walkTemplates(at, v)
}

func (s *flowValidator) walkTemplates(at string, v any) error {
	switch x := v.(type) {
	case string:
		if err := s.checker.Template(x); err != nil {
			return Invalid("%s: %v", at, err)
		}
	case map[string]any:
		for k, e := range x {
			if err := s.walkTemplates(at+"."+k, e); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := s.walkTemplates(fmt.Sprintf("%s[%d]", at, i), e); err != nil {
				return err
			}
		}
	}
	return nil
}

func isJSONObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

func checkText(field, v string, max int) error {
	if strings.TrimSpace(v) == "" {
		return Invalid("%s is required and must not be blank", field)
	}
	if utf8.RuneCountInString(v) > max {
		return Invalid("%s is longer than %d characters", field, max)
	}
	return nil
}

// hasControl reports whether s holds a control character other than a tab,
// which no HTTP field value may carry (CR and LF would split the header).
func hasControl(s string) bool {
	for _, c := range s {
		if c < 0x20 && c != '\t' || c == 0x7f {
			return true
		}
	}
	return false
}

// isToken reports whether s is an HTTP header name (RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return true
}

// MaxWebhookPath bounds a workflow builder path.
const MaxWebhookPath = 200

// ValidWebhookPath checks a workflow builder path (without the leading
// /webhook/): at most MaxWebhookPath characters of letters, digits and
// . _ ~ -, in non-empty segments separated by single slashes, and no "." or
// ".." segment, which clients and proxies normalise away ("hooks/../admin"
// would reach another flow's path). Percent signs, backslashes and control
// characters are outside the alphabet. The receivers apply the same rule
// to the paths they are asked for.
func ValidWebhookPath(p string) error {
	bad := func(why string) error {
		return Invalid("trigger.webhook.path %q: %s", ClipID(p), why)
	}
	if len(p) > MaxWebhookPath {
		return bad(fmt.Sprintf("at most %d characters", MaxWebhookPath))
	}
	if !webhookPathRE.MatchString(p) {
		return bad("use letters, digits and . _ ~ -, in segments separated by single slashes (no %-escapes, backslashes or control characters)")
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return bad(`"." and ".." segments are not allowed`)
		}
	}
	return nil
}

// validPathPattern checks a flow's path: ValidWebhookPath, where a whole
// segment may also be a :name parameter (an identifier, unique in the
// path), read by the steps as trigger.params.name. A path that is all
// parameters would take every URL of its length from everyone: at least
// one segment must be literal.
func validPathPattern(p string) error {
	segs := strings.Split(p, "/")
	lit := make([]string, len(segs))
	seen := map[string]bool{}
	literal := false
	for i, seg := range segs {
		lit[i] = seg
		if !strings.HasPrefix(seg, ":") {
			literal = true
			continue
		}
		if !paramRE.MatchString(seg) {
			return Invalid("trigger.webhook.path %q: parameter %q: use a colon, then a letter or underscore, then letters, digits or underscores", ClipID(p), ClipID(seg))
		}
		if seen[seg] {
			return Invalid("trigger.webhook.path %q: parameter %s appears twice", ClipID(p), seg)
		}
		seen[seg] = true
		lit[i] = "x"
	}
	if len(p) > MaxWebhookPath {
		return Invalid("trigger.webhook.path %q: at most %d characters", ClipID(p), MaxWebhookPath)
	}
	if err := ValidWebhookPath(strings.Join(lit, "/")); err != nil {
		return Invalid("trigger.webhook.path %q: use letters, digits and . _ ~ -, or :name parameters, in segments separated by single slashes (no %%-escapes, backslashes, control characters, \".\" or \"..\" segments)", ClipID(p))
	}
	if !literal {
		return Invalid("trigger.webhook.path %q: at least one segment must be literal text, not a parameter", ClipID(p))
	}
	return nil
}
