package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/expr-lang/expr/vm"

	"flowservice/pkg/automation"
)

// template is a parsed string: literal text and {{ expression }} parts.
type template struct {
	parts []part
	// single is set when the whole string is one expression: it then
	// evaluates to the expression's typed value rather than to text.
	single bool
}

type part struct {
	text string      // literal text, when prog is nil
	src  string      // the expression source
	prog *vm.Program // the compiled expression
}

// template returns the cached parse of s.
func (c Checker) template(s string) (template, error) {
	if t, ok := templates.get(s); ok {
		return t, nil
	}
	t, err := c.parseTemplate(s)
	if err != nil {
		return template{}, err
	}
	templates.put(s, t)
	return t, nil
}

func (c Checker) parseTemplate(s string) (template, error) {
	return parseTemplateWith(s, c.compile)
}

// parseTemplateWith parses s, compiling each expression with compile (the
// names a template may use differ: an action's request sees only input).
func parseTemplateWith(s string, compile func(string) (*vm.Program, error)) (template, error) {
	var t template
	i, exprs := 0, 0
	for i < len(s) {
		open := strings.Index(s[i:], "{{")
		closing := strings.Index(s[i:], "}}")
		if closing >= 0 && (open < 0 || closing < open) {
			return template{}, automation.Invalid(`template %q: "}}" at position %d has no opening "{{"`, quoteClip(s), i+closing+1)
		}
		if open < 0 {
			t.parts = append(t.parts, part{text: s[i:]})
			break
		}
		if open > 0 {
			t.parts = append(t.parts, part{text: s[i : i+open]})
		}
		start := i + open + 2
		end := exprEnd(s, start)
		if end < 0 {
			return template{}, automation.Invalid(`template %q: "{{" at position %d is not closed with "}}"`, quoteClip(s), i+open+1)
		}
		src := strings.TrimSpace(s[start:end])
		if src == "" {
			return template{}, automation.Invalid(`template %q: empty "{{ }}" at position %d`, quoteClip(s), i+open+1)
		}
		p, err := compile(src)
		if err != nil {
			return template{}, automation.Invalid("template %q: %s", quoteClip(s), err.Error())
		}
		if exprs++; exprs > MaxTemplateParts {
			return template{}, automation.Invalid("template %q: more than %d {{ }} parts", quoteClip(s), MaxTemplateParts)
		}
		t.parts = append(t.parts, part{src: src, prog: p})
		i = end + 2
	}
	t.single = len(t.parts) == 1 && t.parts[0].prog != nil
	return t, nil
}

// exprEnd finds the "}}" that closes an expression starting at start,
// skipping string literals and map literals, so that {{ {"a": {"b": 1}} }}
// and {{ "}}" }} work. It returns -1 when there is none.
func exprEnd(s string, start int) int {
	depth := 0
	for i := start; i < len(s); i++ {
		switch c := s[i]; c {
		case '\'', '"', '`':
			i = stringEnd(s, i)
			if i < 0 {
				return -1
			}
		case '{':
			depth++
		case '}':
			if depth == 0 {
				if i+1 < len(s) && s[i+1] == '}' {
					return i
				}
				continue
			}
			depth--
		}
	}
	return -1
}

// stringEnd returns the index of the quote closing the literal at i.
func stringEnd(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if q != '`' {
				j++
			}
		case q:
			return j
		}
	}
	return -1
}

// evalString evaluates a template: the typed value of a lone expression,
// otherwise the text with every part interpolated.
func (c Checker) evalString(s string, env map[string]any) (any, error) {
	t, err := c.template(s)
	if err != nil {
		return nil, err
	}
	return evalTemplate(t, s, env)
}

// evalTemplate evaluates a parsed template s.
func evalTemplate(t template, s string, env map[string]any) (any, error) {
	if t.single {
		return run(t.parts[0], env)
	}
	if len(t.parts) == 1 { // plain text, the common case
		return t.parts[0].text, nil
	}
	env = withBudget(env)
	bud := budgetOf(env)
	var b strings.Builder
	for _, p := range t.parts {
		if p.prog == nil {
			if err := bud.grow(len(p.text)); err != nil {
				return nil, fmt.Errorf("template %q: %w", quoteClip(s), err)
			}
			b.WriteString(p.text)
			continue
		}
		v, err := run(p, env)
		if err != nil {
			return nil, err
		}
		str, err := boundedText(v, bud)
		if err != nil {
			return nil, fmt.Errorf("%s", describe("expression", p.src, err))
		}
		b.WriteString(str)
	}
	return b.String(), nil
}

// boundedText is text(v), charged to the budget, refused before it is
// built when larger than what is left.
func boundedText(v any, b *budget) (string, error) {
	switch v.(type) {
	case map[string]any, []any:
		if n := jsonSize(v, b.bytes); n > b.bytes {
			return "", b.grow(n)
		}
	}
	s := text(v)
	if err := b.grow(len(s)); err != nil {
		return "", err
	}
	return s, nil
}

// evalText evaluates a template that must produce text, such as a URL or
// a header.
func (c Checker) evalText(s string, env map[string]any) (string, error) {
	if !strings.Contains(s, "{{") && !strings.Contains(s, "}}") {
		return s, nil
	}
	v, err := c.evalString(s, env)
	if err != nil {
		return "", err
	}
	return text(v), nil
}

// evalValue evaluates every string inside a JSON value as a template.
func (c Checker) evalValue(v any, env map[string]any) (any, error) {
	switch v := v.(type) {
	case string:
		if !strings.Contains(v, "{{") && !strings.Contains(v, "}}") {
			return v, nil
		}
		return c.evalString(v, env)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			y, err := c.evalValue(x, env)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = y
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			y, err := c.evalValue(x, env)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = y
		}
		return out, nil
	}
	return v, nil
}

// evalBool evaluates a bare expression that must be true or false.
func (c Checker) evalBool(src string, env map[string]any) (bool, error) {
	p, err := c.compile(src)
	if err != nil {
		return false, err
	}
	v, err := run(part{src: src, prog: p}, env)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("condition %q must be true or false, got %s", src, describeValue(v))
	}
	return b, nil
}

// evalExpr evaluates a bare expression to any value.
func (c Checker) evalExpr(src string, env map[string]any) (any, error) {
	p, err := c.compile(src)
	if err != nil {
		return nil, err
	}
	return run(part{src: src, prog: p}, env)
}

// run evaluates one compiled expression, charged to env's budget (a fresh
// one when env has none).
func run(p part, env map[string]any) (any, error) {
	m := vm.VM{MemoryBudget: MaxEvalElements}
	v, err := m.Run(p.prog, withBudget(env))
	if err != nil {
		return nil, fmt.Errorf("%s", describe("expression", p.src, err))
	}
	return v, nil
}

// text is how a value reads inside a string: JSON for maps and slices,
// nothing for null.
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case fmt.Stringer:
		return v.String()
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func describeValue(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%T %s", v, text(v))
}
