package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/types"
	"github.com/expr-lang/expr/vm"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowdef"
)

// An ACTION step is an app catalog action (docs/apps.md) sent as an HTTP
// step: its input is rendered with the run's templates, checked against
// the action's schema, and the action's request template, which sees only
// `input`, becomes the request that exchange sends with the step's
// connection, idempotency key, allowedHosts, outbound quota and retries.
// The request is built here, not through an HTTP step's templates: a
// rendered value is data and is never evaluated again.

// actionEnv is what an action's request template may name; outputEnv what
// its output and failWhen may name.
var (
	actionEnv = types.Map{"input": types.TypeOf(map[string]any{})}
	outputEnv = types.Map{"input": types.TypeOf(map[string]any{}), "response": types.Any}
)

// actionFunctions help request templates build bodies: merge(a, b) is a
// copy of map a with b's keys set; put(m, k, v) a copy of m with key k.
var actionFunctions = []expr.Option{
	expr.Function("merge", func(p ...any) (any, error) {
		a, _ := p[0].(map[string]any)
		b, _ := p[1].(map[string]any)
		out := maps.Clone(a)
		if out == nil {
			out = map[string]any{}
		}
		for k, v := range b {
			if v != nil {
				out[k] = v
			}
		}
		return out, nil
	}, new(func(map[string]any, map[string]any) map[string]any)),
	expr.Function("put", func(p ...any) (any, error) {
		m, _ := p[0].(map[string]any)
		k, _ := p[1].(string)
		out := maps.Clone(m)
		if out == nil {
			out = map[string]any{}
		}
		out[k] = p[2]
		return out, nil
	}, new(func(map[string]any, string, any) map[string]any)),
}

var (
	actionPrograms  = newCache[*vm.Program](cacheSize)
	outputPrograms  = newCache[*vm.Program](cacheSize)
	actionTemplates = newCache[template](cacheSize)
)

func compileAction(src string) (*vm.Program, error) {
	return compileWith(src, actionEnv, actionPrograms)
}

func compileOutput(src string) (*vm.Program, error) {
	return compileWith(src, outputEnv, outputPrograms)
}

// compileWith is compileIn with the action functions.
func compileWith(src string, env types.Map, cache *cache[*vm.Program]) (*vm.Program, error) {
	if p, ok := cache.get(src); ok {
		return p, nil
	}
	if strings.TrimSpace(src) == "" {
		return nil, automation.Invalid("expression is empty")
	}
	b := &bounder{}
	opts := append([]expr.Option{expr.Env(env), expr.Patch(b)}, boundOptions...)
	opts = append(opts, actionFunctions...)
	p, err := expr.Compile(src, opts...)
	if err == nil && b.err != nil {
		err = b.err
	}
	if err != nil {
		return nil, automation.Invalid("%s", describe("expression", src, err))
	}
	cache.put(src, p)
	return p, nil
}

func actionTemplate(s string) (template, error) {
	if t, ok := actionTemplates.get(s); ok {
		return t, nil
	}
	t, err := parseTemplateWith(s, compileAction)
	if err != nil {
		return template{}, err
	}
	actionTemplates.put(s, t)
	return t, nil
}

// CheckAction checks a catalog action as the executor will run it: its
// input schema, its request's method, URL, templates and expressions
// (pkg/apps's tests run it on every action).
func CheckAction(a automation.Action) error {
	if _, err := flowdef.ParseSchema(a.Input); err != nil {
		return fmt.Errorf("%s: input: %w", a.Key, err)
	}
	r := a.Request
	if !strings.Contains(" GET POST PUT PATCH DELETE ", " "+r.Method+" ") {
		return fmt.Errorf("%s: request.method %q", a.Key, r.Method)
	}
	if _, err := actionOrigin(r.URL); err != nil {
		return fmt.Errorf("%s: %w", a.Key, err)
	}
	strs := []string{r.URL}
	for _, m := range []map[string]string{r.Headers, r.Query, r.Form} {
		for _, v := range m {
			strs = append(strs, v)
		}
	}
	if len(r.Body) > 0 {
		v, err := flowdef.DecodeJSON(r.Body)
		if err != nil {
			return fmt.Errorf("%s: request.body is not JSON", a.Key)
		}
		walkStrings(v, func(s string) { strs = append(strs, s) })
	}
	if len(r.Body) > 0 && len(r.Form) > 0 {
		return fmt.Errorf("%s: request has both body and form", a.Key)
	}
	for _, s := range strs {
		if _, err := actionTemplate(s); err != nil {
			return fmt.Errorf("%s: %w", a.Key, err)
		}
	}
	for _, e := range []string{a.Output, a.FailWhen} {
		if e == "" {
			continue
		}
		if _, err := compileOutput(e); err != nil {
			return fmt.Errorf("%s: %w", a.Key, err)
		}
	}
	if p := r.Paginate; p != nil {
		for _, e := range []string{p.Next, p.Items} {
			if err := (Checker{}).ResponseExpression(e); err != nil {
				return fmt.Errorf("%s: paginate: %w", a.Key, err)
			}
		}
	}
	return nil
}

func walkStrings(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
	case map[string]any:
		for _, e := range x {
			walkStrings(e, fn)
		}
	case []any:
		for _, e := range x {
			walkStrings(e, fn)
		}
	}
}

// actionOrigin is the literal scheme://host an action's URL starts with,
// which a connection's baseUrl replaces.
func actionOrigin(raw string) (string, error) {
	rest, ok := strings.CutPrefix(raw, "https://")
	if !ok {
		return "", fmt.Errorf("request.url %q must start with https:// and a literal host", raw)
	}
	host, _, _ := strings.Cut(rest, "/")
	if host == "" || strings.ContainsAny(host, "{}") {
		return "", fmt.Errorf("request.url %q: the host must be literal", raw)
	}
	return "https://" + host, nil
}

// action runs an ACTION step.
func (x *execution) action(ctx context.Context, s automation.Step) (any, error) {
	if x.e.actions == nil {
		return nil, &stepError{msg: "this installation has no app catalog"}
	}
	a, schema, ok := x.e.actions.Action(s.Action)
	if !ok {
		return nil, &stepError{msg: fmt.Sprintf("action %q is not in the app catalog", s.Action)}
	}
	appKey, _, _ := strings.Cut(s.Action, ".")
	app, _ := x.e.actions.App(appKey)

	raw, err := decode("input", s.Input)
	if err != nil {
		return nil, fail(false, err)
	}
	rendered, err := x.e.checker.evalValue(raw, x.env)
	if err != nil {
		return nil, fail(false, fmt.Errorf("input.%w", err))
	}
	in, _ := rendered.(map[string]any)
	if in == nil {
		in = map[string]any{}
	}
	dropNulls(in)
	// The rendered input meets the schema the form promised: a template
	// that gave the wrong type fails here, before anything is sent.
	if b, err := json.Marshal(in); err == nil {
		if v, err := flowdef.DecodeJSON(b); err == nil {
			if err := schema.Validate(v, "input", false); err != nil {
				return nil, &stepError{msg: strings.TrimPrefix(err.Error(), "invalid: ")}
			}
		}
	}

	cred, se := x.credential(ctx, s)
	if se != nil {
		return nil, se
	}
	if cred.conn.ID == "" {
		return nil, &stepError{msg: fmt.Sprintf("action %s needs a connection of app %s: set connection", s.Action, appKey)}
	}
	key := ""
	if app.Connection.KeyIn == "path" {
		// The key travels in the path ({key}), not in a header.
		key, cred.header = cred.key, ""
	}
	env := map[string]any{"input": in, budgetKey: budgetOf(x.env)}
	hs := automation.Step{Name: s.Name, Type: automation.StepHTTP, Method: a.Request.Method,
		TimeoutMs: s.TimeoutMs, IdempotencyKey: s.IdempotencyKey, Paginate: a.Request.Paginate}
	build := func() (*http.Request, error) {
		return x.actionRequest(ctx, a, env, cred.conn.BaseURL, key)
	}
	var out any
	if hs.Paginate != nil {
		if out, err = x.paginateWith(ctx, hs, cred, build); err != nil {
			return nil, err
		}
	} else {
		req, err := build()
		if err != nil {
			return nil, cred.masked(err.Error())
		}
		resp, se := x.exchange(ctx, hs, cred, req, 1)
		if se != nil {
			return nil, se
		}
		out = resp
	}
	// An API that sends JSON under another content type (text/plain)
	// still gives its output expression an object to read.
	if m, ok := out.(map[string]any); ok {
		if b, ok := m["body"].(string); ok && json.Valid([]byte(b)) {
			var v any
			if json.Unmarshal([]byte(b), &v) == nil {
				m["body"] = v
			}
		}
	}
	oenv := map[string]any{"input": in, "response": out, budgetKey: budgetOf(x.env)}
	if a.FailWhen != "" {
		p, err := compileOutput(a.FailWhen)
		if err != nil {
			return nil, fail(false, err)
		}
		v, err := run(part{src: a.FailWhen, prog: p}, oenv)
		if err != nil {
			return nil, cred.masked("failWhen: " + err.Error())
		}
		if v == true {
			body, _ := json.Marshal(responseOf(out))
			e := cred.masked(fmt.Sprintf("%s refused the request: %s", app.Name, clipTo(string(body), 500)))
			e.output = out
			return nil, e
		}
	}
	if a.Output == "" {
		return responseOf(out), nil
	}
	p, err := compileOutput(a.Output)
	if err != nil {
		return nil, fail(false, err)
	}
	v, err := run(part{src: a.Output, prog: p}, oenv)
	if err != nil {
		return nil, cred.masked("output: " + err.Error())
	}
	return v, nil
}

// responseOf is the body of an HTTP output, or the paginated output whole.
func responseOf(out any) any {
	if m, ok := out.(map[string]any); ok {
		if b, ok := m["body"]; ok {
			return b
		}
	}
	return out
}

// dropNulls removes keys whose value is null, so that an optional field
// left empty is absent from the request, as the API expects.
func dropNulls(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			dropNulls(x)
		}
	}
}

// actionRequest builds one request of action a for input env: the URL's
// values escaped where they land (path or query), its origin replaced by
// base when the connection has one, {key} replaced by the key of a
// connection that travels in the path.
func (x *execution) actionRequest(ctx context.Context, a automation.Action, env map[string]any, base, key string) (*http.Request, error) {
	r := a.Request
	u, err := actionURL(r.URL, env)
	if err != nil {
		return nil, err
	}
	if key != "" {
		u = strings.ReplaceAll(u, "{key}", url.PathEscape(key))
	}
	if base != "" {
		origin, _ := actionOrigin(r.URL)
		u = base + strings.TrimPrefix(u, origin)
	}
	parsed, err := url.Parse(u)
	if err != nil || parsed.Host == "" {
		return nil, fmt.Errorf("url: the action's URL is not valid with this input")
	}
	if err := automation.CheckSendHost(parsed.Hostname()); err != nil {
		return nil, fmt.Errorf("url: %s", err.Error())
	}
	if len(r.Query) > 0 {
		q := parsed.Query()
		for _, k := range keysOf(r.Query) {
			v, err := actionText(r.Query[k], env)
			if err != nil {
				return nil, fmt.Errorf("query.%s: %w", k, err)
			}
			if v != "" {
				q.Set(k, v)
			}
		}
		parsed.RawQuery = q.Encode()
	}
	var body *strings.Reader
	contentType := ""
	switch {
	case len(r.Form) > 0:
		form := url.Values{}
		for _, k := range keysOf(r.Form) {
			v, err := actionText(r.Form[k], env)
			if err != nil {
				return nil, fmt.Errorf("form.%s: %w", k, err)
			}
			if v != "" {
				form.Set(k, v)
			}
		}
		body, contentType = strings.NewReader(form.Encode()), "application/x-www-form-urlencoded"
	case len(r.Body) > 0:
		var tmpl any
		if err := json.Unmarshal(r.Body, &tmpl); err != nil {
			return nil, fmt.Errorf("body: %w", err)
		}
		v, err := actionValue(tmpl, env)
		if err != nil {
			return nil, fmt.Errorf("body.%w", err)
		}
		bud := budgetOf(env)
		b, ok, err := boundedJSON(v, bud.bytes)
		if err != nil || !ok {
			return nil, fmt.Errorf("body: the request is larger than the evaluation budget")
		}
		body, contentType = strings.NewReader(string(b)), "application/json"
	}
	var req *http.Request
	if body != nil {
		req, err = http.NewRequestWithContext(ctx, r.Method, parsed.String(), body)
	} else {
		req, err = http.NewRequestWithContext(ctx, r.Method, parsed.String(), nil)
	}
	if err != nil {
		return nil, fmt.Errorf("the action's request is not valid: %w", err)
	}
	for _, k := range keysOf(r.Headers) {
		v, err := actionText(r.Headers[k], env)
		if err != nil {
			return nil, fmt.Errorf("headers.%s: %w", k, err)
		}
		if !validFieldValue(v) {
			return nil, fmt.Errorf("headers.%s: the value contains a control character", k)
		}
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", cmpOr(req.Header.Get("Accept"), "application/json"))
	return req, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func keysOf(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// actionURL renders an action's URL template: each value is escaped for
// where it lands, so that an input such as "../admin" or "a?b" stays one
// path segment or one query value.
func actionURL(s string, env map[string]any) (string, error) {
	t, err := actionTemplate(s)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	inQuery := false
	for _, p := range t.parts {
		if p.prog == nil {
			b.WriteString(p.text)
			inQuery = inQuery || strings.Contains(p.text, "?")
			continue
		}
		v, err := run(p, env)
		if err != nil {
			return "", fmt.Errorf("url: %w", err)
		}
		if v == nil {
			return "", fmt.Errorf("url: %s gave nothing; the URL needs it", p.src)
		}
		if inQuery {
			b.WriteString(url.QueryEscape(text(v)))
		} else {
			b.WriteString(url.PathEscape(text(v)))
		}
	}
	return b.String(), nil
}

// actionText renders a template to text; null is "".
func actionText(s string, env map[string]any) (string, error) {
	if !strings.Contains(s, "{{") {
		return s, nil
	}
	t, err := actionTemplate(s)
	if err != nil {
		return "", err
	}
	v, err := evalTemplate(t, s, env)
	if err != nil {
		return "", err
	}
	return text(v), nil
}

// actionValue renders every string of a JSON template; keys whose value
// renders to null are left out.
func actionValue(v any, env map[string]any) (any, error) {
	switch v := v.(type) {
	case string:
		if !strings.Contains(v, "{{") {
			return v, nil
		}
		t, err := actionTemplate(v)
		if err != nil {
			return nil, err
		}
		return evalTemplate(t, v, env)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			y, err := actionValue(e, env)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if y != nil {
				out[k] = y
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			y, err := actionValue(e, env)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = y
		}
		return out, nil
	}
	return v, nil
}
