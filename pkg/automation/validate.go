package automation

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flowservice/pkg/flowdef"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

var (
	// Webhook paths: slash-separated segments of URL-safe characters, or
	// :name parameters.
	webhookPathRE = regexp.MustCompile(`^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$`)
	paramRE       = regexp.MustCompile(`^:[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	hookMethods   = append(slices.Clone(WebhookMethods), MethodAny)
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
	if err := fromDef(flowdef.CheckInputSchema(&f.Trigger)); err != nil {
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
	v := flowdef.Validator{
		Checks: s.checker,
		Before: func(st *Step, at string) error { return asDef(s.resolveStep(ctx, f, st, at)) },
		After:  func(st *Step, at string) error { return asDef(s.stepRefs(ctx, f, st, at)) },
	}
	return fromDef(v.Steps(f.Steps, f.OnError))
}

// asDef turns a domain validation error of a hook into the language's,
// so that the walker names the step in it; other errors pass unchanged.
func asDef(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Kind == ErrInvalid {
		return flowdef.Invalid("%s", e.Message)
	}
	return err
}

// fromDef turns a rule the definition breaks into the domain's 400.
func fromDef(err error) error {
	var e *flowdef.Error
	if errors.As(err, &e) {
		return Invalid("%s", e.Message)
	}
	return err
}

// resolveStep turns the names a portable document gives into this
// project's IDs, before the step's rules run.
func (s *flowValidator) resolveStep(ctx context.Context, f *Flow, st *Step, at string) error {
	if st.Type == StepCallFlow {
		return s.resolveCalledFlow(ctx, f, st, at) // portable.go
	}
	return nil
}

// stepRefs checks what a step's rules cannot: that the connection or flow
// it names is the project's, and that a script compiles where the backend
// can say.
func (s *flowValidator) stepRefs(ctx context.Context, f *Flow, st *Step, at string) error {
	switch st.Type {
	case StepHTTP:
		return s.connectionRef(ctx, f, st, at)
	case StepCode:
		// A script that does not compile would fail every run; say so now.
		if s.code != nil {
			if err := s.code.Code(st.Code); err != nil {
				return Invalid("%s.code: %v", at, err)
			}
		}
	case StepAI:
		return s.aiRefs(ctx, f, st, at) // ai.go
	case StepCallFlow:
		if st.FlowID != f.ID {
			if _, err := s.store.Flow(ctx, f.Project, st.FlowID); IsNotFound(err) {
				return Invalid("%s.flowId %q: this project has no flow with this ID", at, ClipID(st.FlowID))
			} else if err != nil {
				return wrap("check called flow", err)
			}
		}
	}
	return nil
}

// connectionRef checks that the connection an HTTP step names by ID is the
// project's.
func (s *flowValidator) connectionRef(ctx context.Context, f *Flow, st *Step, at string) error {
	if st.ConnectionID == "" {
		return nil
	}
	_, err := s.store.Connection(ctx, f.Project, st.ConnectionID)
	if errors.Is(err, ErrNotFound) {
		return Invalid("%s.connectionId %q: no such connection in this project", at, st.ConnectionID)
	} else if err != nil {
		return wrap("check connection", err)
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
	return fromDef(flowdef.CheckSignature(at, sg))
}

// checkTemplates checks every string inside a JSON value as a template.
func (s *flowValidator) checkTemplates(at string, raw json.RawMessage) error {
	return fromDef(flowdef.CheckTemplates(s.checker, at, raw))
}

func isJSONObject(raw json.RawMessage) bool { return flowdef.IsJSONObject(raw) }

func checkText(field, v string, max int) error { return fromDef(flowdef.CheckText(field, v, max)) }

func hasControl(s string) bool { return flowdef.HasControl(s) }

func isToken(s string) bool { return flowdef.IsToken(s) }

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
