package flowdef

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"
)

// A minimal JSON Schema validator for what AI steps and flow tools need:
// an AI step's `output` (the answer is validated against it) and a
// trigger's `inputSchema` (a flow described as a tool). It knows a subset
// of the keywords, and a schema using another one is refused when saved,
// so that what a flow says is what is enforced.

// Bounds of the schemas a flow holds.
const (
	MaxSchemaBytes   = 16 << 10
	MaxAISchemaDepth = 8
)

// aiSchemaKeywords are the keywords the validator knows; the annotations
// among them (title, description, default, examples, format, $schema)
// are kept for the model and not enforced.
var aiSchemaKeywords = []string{"$schema", "title", "description", "default", "examples", "format",
	"type", "properties", "required", "additionalProperties", "items", "enum", "const",
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern",
	"minItems", "maxItems", "anyOf"}

var aiSchemaTypes = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// CheckSchema checks that raw is a JSON Schema object this service can
// validate against. Messages start with at.
func CheckSchema(at string, raw json.RawMessage) error {
	if len(raw) > MaxSchemaBytes {
		return Invalid("%s is %d bytes of JSON; at most %d are allowed", at, len(raw), MaxSchemaBytes)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return Invalid("%s is not valid JSON", at)
	}
	return checkSchemaNode(at, v, 0)
}

func checkSchemaNode(at string, v any, depth int) error {
	if depth > MaxAISchemaDepth {
		return Invalid("%s: the schema nests more than %d levels deep", at, MaxAISchemaDepth)
	}
	if b, ok := v.(bool); ok && depth > 0 {
		_ = b // true and false are schemas (anything, nothing)
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Invalid(`%s must be a JSON Schema object, e.g. {"type": "object", "properties": {"text": {"type": "string"}}}`, at)
	}
	for k := range m {
		if !slices.Contains(aiSchemaKeywords, k) {
			return Invalid("%s.%s: this keyword is not supported; supported are %s", at, k, strings.Join(aiSchemaKeywords, ", "))
		}
	}
	if t, ok := m["type"]; ok {
		var names []any
		switch tt := t.(type) {
		case string:
			names = []any{tt}
		case []any:
			names = tt
		default:
			return Invalid("%s.type must be a type name or a list of them", at)
		}
		for _, n := range names {
			s, _ := n.(string)
			if !slices.Contains(aiSchemaTypes, s) {
				return Invalid("%s.type %v: allowed values are %s", at, n, strings.Join(aiSchemaTypes, ", "))
			}
		}
	}
	if p, ok := m["properties"]; ok {
		props, ok := p.(map[string]any)
		if !ok {
			return Invalid("%s.properties must be an object of schemas", at)
		}
		for k, s := range props {
			if err := checkSchemaNode(at+".properties."+k, s, depth+1); err != nil {
				return err
			}
		}
	}
	if r, ok := m["required"]; ok {
		list, ok := r.([]any)
		if !ok {
			return Invalid("%s.required must be a list of property names", at)
		}
		for _, n := range list {
			if _, ok := n.(string); !ok {
				return Invalid("%s.required must be a list of property names", at)
			}
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if s, ok := m[k]; ok {
			if err := checkSchemaNode(at+"."+k, s, depth+1); err != nil {
				return err
			}
		}
	}
	if a, ok := m["anyOf"]; ok {
		list, ok := a.([]any)
		if !ok || len(list) == 0 {
			return Invalid("%s.anyOf must be a non-empty list of schemas", at)
		}
		for i, s := range list {
			if err := checkSchemaNode(fmt.Sprintf("%s.anyOf[%d]", at, i), s, depth+1); err != nil {
				return err
			}
		}
	}
	if e, ok := m["enum"]; ok {
		if _, ok := e.([]any); !ok {
			return Invalid("%s.enum must be a list of values", at)
		}
	}
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if n, ok := m[k]; ok {
			if _, ok := n.(json.Number); !ok {
				return Invalid("%s.%s must be a number", at, k)
			}
		}
	}
	for _, k := range []string{"minLength", "maxLength", "minItems", "maxItems"} {
		if n, ok := m[k]; ok {
			num, ok := n.(json.Number)
			if i, err := num.Int64(); !ok || err != nil || i < 0 {
				return Invalid("%s.%s must be a non-negative integer", at, k)
			}
		}
	}
	if p, ok := m["pattern"]; ok {
		s, ok := p.(string)
		if !ok {
			return Invalid("%s.pattern must be a regular expression", at)
		}
		if _, err := regexp.Compile(s); err != nil {
			return Invalid("%s.pattern: %v", at, err)
		}
	}
	return nil
}

// ValidateJSON checks value (JSON, as encoding/json decodes it into any)
// against schema, checked by CheckSchema. The error names the first place
// that does not match and why, e.g. `$.priority: "urgent" is not one of
// ["low","high"]`.
func ValidateJSON(schema json.RawMessage, value any) error {
	var s any
	if err := json.Unmarshal(schema, &s); err != nil {
		return fmt.Errorf("the schema is not valid JSON")
	}
	return validateNode("$", s, value)
}

func validateNode(at string, schema, v any) error {
	switch s := schema.(type) {
	case bool:
		if !s {
			return fmt.Errorf("%s: no value is allowed here", at)
		}
		return nil
	case map[string]any:
		return validateObject(at, s, v)
	}
	return nil
}

func validateObject(at string, s map[string]any, v any) error {
	if t, ok := s["type"]; ok {
		var names []string
		switch tt := t.(type) {
		case string:
			names = []string{tt}
		case []any:
			for _, n := range tt {
				if str, ok := n.(string); ok {
					names = append(names, str)
				}
			}
		}
		if !slices.ContainsFunc(names, func(n string) bool { return hasType(n, v) }) {
			return fmt.Errorf("%s: %s is not of type %s", at, describe(v), strings.Join(names, " or "))
		}
	}
	if e, ok := s["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return jsonEqual(x, v) }) {
		b, _ := json.Marshal(e)
		return fmt.Errorf("%s: %s is not one of %s", at, describe(v), b)
	}
	if c, ok := s["const"]; ok && !jsonEqual(c, v) {
		b, _ := json.Marshal(c)
		return fmt.Errorf("%s: %s is not %s", at, describe(v), b)
	}
	if a, ok := s["anyOf"].([]any); ok {
		var first error
		matched := false
		for _, sub := range a {
			err := validateNode(at, sub, v)
			if err == nil {
				matched = true
				break
			}
			if first == nil {
				first = err
			}
		}
		if !matched {
			return fmt.Errorf("%s: matches none of anyOf (first: %v)", at, first)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				name, _ := r.(string)
				if _, ok := x[name]; !ok {
					return fmt.Errorf("%s: the required property %q is missing", at, name)
				}
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if sub, ok := props[k]; ok {
				if err := validateNode(at+"."+k, sub, x[k]); err != nil {
					return err
				}
				continue
			}
			if ap, ok := s["additionalProperties"]; ok {
				if b, isBool := ap.(bool); isBool && !b {
					return fmt.Errorf("%s: property %q is not allowed", at, k)
				}
				if err := validateNode(at+"."+k, ap, x[k]); err != nil {
					return err
				}
			}
		}
	case []any:
		if n, ok := number(s["minItems"]); ok && float64(len(x)) < n {
			return fmt.Errorf("%s: %d items, at least %v are required", at, len(x), n)
		}
		if n, ok := number(s["maxItems"]); ok && float64(len(x)) > n {
			return fmt.Errorf("%s: %d items, at most %v are allowed", at, len(x), n)
		}
		if it, ok := s["items"]; ok {
			for i, e := range x {
				if err := validateNode(fmt.Sprintf("%s[%d]", at, i), it, e); err != nil {
					return err
				}
			}
		}
	case string:
		n := float64(utf8.RuneCountInString(x))
		if m, ok := number(s["minLength"]); ok && n < m {
			return fmt.Errorf("%s: %v characters, at least %v are required", at, n, m)
		}
		if m, ok := number(s["maxLength"]); ok && n > m {
			return fmt.Errorf("%s: %v characters, at most %v are allowed", at, n, m)
		}
		if p, ok := s["pattern"].(string); ok {
			if re, err := regexp.Compile(p); err == nil && !re.MatchString(x) {
				return fmt.Errorf("%s: %q does not match the pattern %s", at, x, p)
			}
		}
	case float64, json.Number:
		f, _ := number(x)
		if m, ok := number(s["minimum"]); ok && f < m {
			return fmt.Errorf("%s: %v is less than the minimum %v", at, f, m)
		}
		if m, ok := number(s["maximum"]); ok && f > m {
			return fmt.Errorf("%s: %v is more than the maximum %v", at, f, m)
		}
		if m, ok := number(s["exclusiveMinimum"]); ok && f <= m {
			return fmt.Errorf("%s: %v is not more than %v", at, f, m)
		}
		if m, ok := number(s["exclusiveMaximum"]); ok && f >= m {
			return fmt.Errorf("%s: %v is not less than %v", at, f, m)
		}
	}
	return nil
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case int:
		return float64(n), true
	}
	return 0, false
}

func hasType(name string, v any) bool {
	switch name {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "number":
		_, ok := number(v)
		return ok
	case "integer":
		f, ok := number(v)
		return ok && f == math.Trunc(f)
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "null":
		return v == nil
	}
	return false
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// describe is a value as a message shows it: short.
func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	if len(b) > 80 {
		return strings.ToValidUTF8(string(b[:77]), "") + "…"
	}
	return string(b)
}

// CheckInputSchema checks a trigger's inputSchema: WEBHOOK triggers only,
// a schema of an object (trigger.body is what a tool's arguments become).
func CheckInputSchema(t *Trigger) error {
	if len(t.InputSchema) == 0 {
		return nil
	}
	if t.Type != TriggerWebhook {
		return Invalid("trigger.inputSchema is for WEBHOOK triggers; this trigger is %s", t.Type)
	}
	if err := CheckSchema("trigger.inputSchema", t.InputSchema); err != nil {
		return err
	}
	var top struct {
		Type any `json:"type"`
	}
	_ = json.Unmarshal(t.InputSchema, &top)
	if top.Type != "object" {
		return Invalid(`trigger.inputSchema must describe an object (the body is a tool's arguments): {"type": "object", "properties": {…}}`)
	}
	return nil
}
