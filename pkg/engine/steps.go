package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"flowservice/pkg/automation"
)

// execution is the state of one run while its steps execute, as one scope
// sees it: the run's top level, or one item of a FOR_EACH (fork).
type execution struct {
	e     *Engine
	flow  automation.Flow
	run   *automation.Run
	steps map[string]any // step name -> output, as expressions see it
	env   map[string]any
	// stepsText is stepsJSON's encoding, made at most once per attempt.
	stepsText []byte
	// logs are the console lines of the CODE step that just ran.
	logs []string
	// iter is the item path inside FOR_EACH ("3", "3.1"), "" outside.
	iter string
	// cur is the result of the step running in this scope, which an AI
	// step journals its turns into (step_ai.go).
	cur *automation.StepResult
	// sh is what every scope of the run shares.
	sh *shared
}

// shared is the state of a run that its scopes (FOR_EACH items may run at
// once) share, guarded by mu.
type shared struct {
	mu sync.Mutex
	// results are the run's step results, written in place as steps
	// finish, so that a journal entry can be taken at any moment.
	results *[]automation.StepResult
	// onError says the results are the run's onError steps, which
	// cannot park the run (RunOnError).
	onError bool
	// responded is set once a RESPOND step ran: the first one decides the
	// answer, as it would once sent.
	responded bool
	spent     int64 // bytes of outputs recorded so far
	// journal records results before the next step with side effects;
	// jmu keeps its writes in order.
	jmu      sync.Mutex
	journal  automation.Journal
	previous map[string]automation.StepResult // journalIndex of the claimed run
	// varNames are the project's variables when the flow uses them (nil
	// otherwise), and secrets the secret values that records mask.
	varNames  map[string]string
	secrets   []string
	masks     []string // every form of secrets (automation.SecretMasks), longest first
	varChecks sync.Map // step name -> the error of a missing variable, "" for none (checkStepVars)
	// connIDs resolves HTTP steps' connection names (connname.go).
	connIDs map[string][]string
	// calls are the children that CALL_FLOW steps wait for, to be started
	// once the run is parked (callflow.go).
	calls []automation.Call
}

// step runs one step and returns its output. Failures are *stepError; a
// false FILTER is errFiltered.
func (x *execution) step(ctx context.Context, s automation.Step) (out any, err error) {
	// A bug in one step must fail that run, not the runner serving others.
	defer func() {
		if p := recover(); p != nil {
			x.e.log.ErrorContext(ctx, "step panicked", "run", x.run.ID, "step", s.Name, "panic", fmt.Sprint(p))
			out, err = nil, &stepError{msg: "internal error in the step"}
		}
	}()
	// Each step gets its own evaluation budget (budget.go).
	x.env[budgetKey] = newBudget(ctx)
	switch s.Type {
	case automation.StepHTTP:
		return x.http(ctx, s)
	case automation.StepSet:
		return x.set(s)
	case automation.StepFilter:
		return x.filter(s)
	case automation.StepVerifySignature:
		return x.verify(s)
	case automation.StepRespond:
		return x.respond(s)
	case automation.StepCode:
		return x.code(ctx, s)
	case automation.StepStore:
		return x.store(ctx, s)
	case automation.StepWait:
		return x.wait(s)
	case automation.StepCallFlow:
		return x.callFlow(ctx, s)
	case automation.StepAction:
		return x.action(ctx, s)
	case automation.StepSQL:
		return x.sql(ctx, s)
	case automation.StepEmail:
		return x.email(ctx, s)
	case automation.StepAI:
		return x.aiStep(ctx, s)
	case automation.StepMCP:
		return x.mcpStep(ctx, s)
	}
	return nil, &stepError{msg: fmt.Sprintf("unknown step type %q", s.Type)}
}

// decode parses a step's JSON field; empty is nil.
func decode(field string, raw json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON: %w", field, err)
	}
	return v, nil
}

// set outputs its templated values object.
func (x *execution) set(s automation.Step) (any, error) {
	v, err := decode("values", s.Values)
	if err != nil {
		return nil, fail(false, err)
	}
	if v == nil {
		return map[string]any{}, nil
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, &stepError{msg: "values must be a JSON object"}
	}
	out, err := x.e.checker.evalValue(v, x.env)
	if err != nil {
		return nil, fail(false, fmt.Errorf("values.%w", err))
	}
	return out, nil
}

// filter ends the run, successfully, when its condition is false.
func (x *execution) filter(s automation.Step) (any, error) {
	ok, err := x.e.checker.evalBool(s.Condition, x.env)
	if err != nil {
		return nil, fail(false, err)
	}
	out := map[string]any{"passed": ok}
	if !ok {
		return out, errFiltered
	}
	return out, nil
}

// verify checks the run's raw body against the step's signature settings,
// or the webhook's when the step names none.
func (x *execution) verify(s automation.Step) (any, error) {
	sig := s.Signature
	if sig == nil && x.flow.Trigger.Webhook != nil {
		sig = x.flow.Trigger.Webhook.Signature
	}
	if sig == nil {
		return nil, &stepError{msg: "no signature settings: set the step's signature or the webhook's"}
	}
	t := x.run.Trigger
	body := []byte(t.RawBody)
	switch {
	case t.RawBody != "":
	case t.BodyBase64 != "":
		// A body that is not text is kept only as base64.
		b, err := base64.StdEncoding.DecodeString(t.BodyBase64)
		if err != nil {
			return nil, &stepError{msg: "the trigger's bodyBase64 is not valid base64"}
		}
		body = b
	default:
		body = t.Body
	}
	if err := automation.VerifySignature(*sig, headerLookup(t.Headers), body, x.e.now()); err != nil {
		return nil, fail(false, err)
	}
	return map[string]any{"verified": true}, nil
}

// headerLookup finds a trigger header by name in any case.
func headerLookup(h map[string]string) func(string) string {
	return func(name string) string {
		if v, ok := h[http.CanonicalHeaderKey(name)]; ok {
			return v
		}
		for k, v := range h {
			if strings.EqualFold(k, name) {
				return v
			}
		}
		return ""
	}
}

// maxRespondHeaders bounds the rendered headers of a RESPOND step, names
// and values together.
const maxRespondHeaders = 64 << 10

// respond sets the run's answer: a status code, headers, and a body that is
// any JSON value (every string inside it a template) or, when the body is a
// JSON string, that template rendered to text.
func (x *execution) respond(s automation.Step) (any, error) {
	code := s.StatusCode
	if code == 0 {
		code = http.StatusOK
	}
	if code < 100 || code > 599 {
		return nil, &stepError{msg: fmt.Sprintf("statusCode %d is not an HTTP status (100 to 599)", code)}
	}
	v, err := decode("body", s.Body)
	if err != nil {
		return nil, fail(false, err)
	}
	resp := &automation.RunResponse{StatusCode: code, ContentType: s.ContentType}
	var body any
	switch t := v.(type) {
	case nil:
		body = map[string]any{}
	case string:
		txt, err := x.e.checker.evalText(t, x.env)
		if err != nil {
			return nil, fail(false, fmt.Errorf("body: %w", err))
		}
		body, resp.Text = txt, true
	default:
		if body, err = x.e.checker.evalValue(t, x.env); err != nil {
			return nil, fail(false, fmt.Errorf("body.%w", err))
		}
	}
	if resp.ContentType == "" {
		resp.ContentType = "application/json"
		if resp.Text {
			resp.ContentType = "text/plain; charset=utf-8"
		}
	}
	// The answer is kept with the run, as an output is.
	raw, ok, err := boundedJSON(body, int(x.e.maxOutput))
	if err != nil {
		return nil, fail(false, fmt.Errorf("body is not representable as JSON: %w", err))
	}
	if !ok {
		return nil, &stepError{msg: fmt.Sprintf("body is larger than a RESPOND body may have at most (%d bytes of JSON)", x.e.maxOutput)}
	}
	// Kept with the run: secret variables' values are masked in it, so
	// that no caller is answered one either.
	resp.Body = x.maskJSON(raw)
	size := 0
	for k, tv := range s.Headers {
		hv, err := x.e.checker.evalText(tv, x.env)
		if err != nil {
			return nil, fail(false, fmt.Errorf("headers.%s: %w", k, err))
		}
		if !validFieldValue(hv) {
			return nil, &stepError{msg: fmt.Sprintf("headers.%s: the value contains a control character (CR, LF or another); a header value is one line of text", k)}
		}
		if size += len(k) + len(hv); size > maxRespondHeaders {
			return nil, &stepError{msg: fmt.Sprintf("headers are larger than %d bytes", maxRespondHeaders)}
		}
		if resp.Headers == nil {
			resp.Headers = make(map[string]string, len(s.Headers))
		}
		resp.Headers[k] = x.mask(hv)
	}
	x.sh.mu.Lock()
	if !x.sh.responded {
		x.sh.responded = true
		x.run.Response = resp
	}
	x.sh.mu.Unlock()
	out := map[string]any{"statusCode": code, "contentType": resp.ContentType, "body": body}
	if resp.Headers != nil {
		h := make(map[string]any, len(resp.Headers))
		for k, v := range resp.Headers {
			h[k] = v
		}
		out["headers"] = h
	}
	return out, nil
}
