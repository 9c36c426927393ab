package flowdef

import (
	"cmp"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// TriggerChecks are the Checks a trigger needs: a SCHEDULE's cron too.
type TriggerChecks interface {
	Checks
	// Cron checks a five-field cron spec in an IANA time zone.
	Cron(spec, timezone string) error
}

var (
	// Webhook paths: slash-separated segments of URL-safe characters, or
	// :name parameters.
	webhookPathRE = regexp.MustCompile(`^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$`)
	paramRE       = regexp.MustCompile(`^:[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	hookMethods   = append(slices.Clone(WebhookMethods), MethodAny)
)

// CheckTrigger checks a flow's trigger, filling defaults in place (a
// WEBHOOK trigger when none is given; a workflow builder path from newPath
// when none is). A POLL trigger's own fields need the project (its
// request's connection) and are the domain's to check.
func CheckTrigger(c TriggerChecks, engine Engine, t *Trigger, newPath func() string) error {
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
		return checkWebhook(c, engine, t.Webhook, newPath)
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
		if err := c.Cron(t.Schedule.Cron, t.Schedule.Timezone); err != nil {
			return Invalid("trigger.schedule: %v", err)
		}
		return nil
	case TriggerPoll:
		return nil // the domain checks poll, which needs the project
	default:
		return Invalid("trigger.type %q: allowed values are %s, %s, %s", t.Type, TriggerWebhook, TriggerSchedule, TriggerPoll)
	}
}

func checkWebhook(c TriggerChecks, engine Engine, w *Webhook, newPath func() string) error {
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
			w.Path = newPath()
		}
		if err := validPathPattern(w.Path); err != nil {
			return err
		}
		if w.Authentication == nil {
			w.Authentication = &Authentication{Type: AuthNone}
		}
		if err := checkAuth(w.Authentication); err != nil {
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
		if err := CheckSignature("trigger.webhook.signature", w.Signature); err != nil {
			return err
		}
	}
	if w.IdempotencyHeader != "" && !IsToken(w.IdempotencyHeader) {
		return Invalid("trigger.webhook.idempotencyHeader %q is not a valid HTTP header name", w.IdempotencyHeader)
	}
	if w.IdempotencyKey != "" {
		if err := c.Expression(w.IdempotencyKey); err != nil {
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

func checkAuth(a *Authentication) error {
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
		if !IsToken(a.Name) {
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

// CheckLimits checks a flow's concurrency and throttle. Messages name the
// field.
func CheckLimits(ch Checks, conc *Concurrency, thr *Throttle) error {
	if c := conc; c != nil {
		if c.Limit < 1 || c.Limit > MaxFlowLimit {
			return Invalid("concurrency.limit %d: from 1 to %d", c.Limit, MaxFlowLimit)
		}
		if err := checkLimitKey(ch, "concurrency.key", c.Key); err != nil {
			return err
		}
	}
	if t := thr; t != nil {
		if t.Limit < 1 || t.Limit > MaxFlowLimit {
			return Invalid("throttle.limit %d: from 1 to %d", t.Limit, MaxFlowLimit)
		}
		if t.Period == "" {
			return Invalid("throttle.period is required, such as \"1m\"")
		}
		if _, err := t.PeriodDuration(); err != nil {
			return Invalid("throttle.%v", err)
		}
		if err := checkLimitKey(ch, "throttle.key", t.Key); err != nil {
			return err
		}
	}
	return nil
}

func checkLimitKey(c Checks, field, key string) error {
	if key == "" {
		return nil
	}
	if len(key) > 1000 {
		return Invalid("%s is longer than 1000 characters", field)
	}
	if c == nil {
		return nil
	}
	if err := c.Expression(key); err != nil {
		return Invalid("%s: %v", field, err)
	}
	return nil
}
