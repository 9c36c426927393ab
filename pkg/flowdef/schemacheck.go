package flowdef

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/mail"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// A subset of JSON Schema, enough for the input of catalog actions and for
// the forms the dashboard renders from them: type, properties, required,
// enum, items, additionalProperties (false), minLength/maxLength,
// minimum/maximum, and the formats email, uri and date-time. Keywords that
// only describe (title, description, default, examples, format hints such
// as "textarea") are allowed and ignored. Any other keyword is refused by
// CheckSchema, so that a schema never promises a check nobody makes.

// jsonSchemaKeywords are the keywords CheckSchema accepts.
var jsonSchemaKeywords = []string{"type", "properties", "required", "enum", "items", "additionalProperties",
	"minLength", "maxLength", "minimum", "maximum", "format",
	"title", "description", "default", "examples", "x-widget"}

// schemaFormats are the string formats Validate checks.
var schemaFormats = []string{"email", "uri", "date-time"}

// Schema is a parsed schema of the subset.
type JSONSchema struct {
	Type                 schemaTypes            `json:"type,omitempty"`
	Properties           map[string]*JSONSchema `json:"properties,omitempty"`
	Required             []string               `json:"required,omitempty"`
	Enum                 []any                  `json:"enum,omitempty"`
	Items                *JSONSchema            `json:"items,omitempty"`
	AdditionalProperties *bool                  `json:"additionalProperties,omitempty"`
	MinLength            *int                   `json:"minLength,omitempty"`
	MaxLength            *int                   `json:"maxLength,omitempty"`
	Minimum              *float64               `json:"minimum,omitempty"`
	Maximum              *float64               `json:"maximum,omitempty"`
	Format               string                 `json:"format,omitempty"`
}

// schemaTypes is "type": one name or a list of them.
type schemaTypes []string

func (t *schemaTypes) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*t = schemaTypes{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("type must be a type name or a list of them")
	}
	*t = many
	return nil
}

var typeNames = []string{"string", "number", "integer", "boolean", "object", "array", "null"}

// ParseSchema reads raw as a schema of the subset, refusing keywords and
// types outside it.
func ParseSchema(raw json.RawMessage) (*JSONSchema, error) {
	if err := checkKeywords(raw, "schema"); err != nil {
		return nil, err
	}
	var s JSONSchema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("schema: %v", err)
	}
	return &s, s.check("schema")
}

// checkKeywords walks raw refusing unknown keywords.
func checkKeywords(raw json.RawMessage, at string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("%s must be a JSON object", at)
	}
	for k, v := range m {
		if !slices.Contains(jsonSchemaKeywords, k) {
			return fmt.Errorf("%s: keyword %q is not supported (supported: %s)", at, k, strings.Join(jsonSchemaKeywords, ", "))
		}
		switch k {
		case "properties":
			var props map[string]json.RawMessage
			if err := json.Unmarshal(v, &props); err != nil {
				return fmt.Errorf("%s.properties must be an object of schemas", at)
			}
			for name, p := range props {
				if err := checkKeywords(p, at+".properties."+name); err != nil {
					return err
				}
			}
		case "items":
			if err := checkKeywords(v, at+".items"); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *JSONSchema) check(at string) error {
	for _, t := range s.Type {
		if !slices.Contains(typeNames, t) {
			return fmt.Errorf("%s.type %q: allowed values are %s", at, t, strings.Join(typeNames, ", "))
		}
	}
	if s.Format != "" && !slices.Contains(schemaFormats, s.Format) {
		return fmt.Errorf("%s.format %q: supported formats are %s", at, s.Format, strings.Join(schemaFormats, ", "))
	}
	for _, r := range s.Required {
		if _, ok := s.Properties[r]; !ok {
			return fmt.Errorf("%s.required names %q, which is not among its properties", at, r)
		}
	}
	for name, p := range s.Properties {
		if p == nil {
			return fmt.Errorf("%s.properties.%s is not a schema", at, name)
		}
		if err := p.check(at + ".properties." + name); err != nil {
			return err
		}
	}
	if s.Items != nil {
		return s.Items.check(at + ".items")
	}
	return nil
}

// DecodeJSON decodes raw keeping numbers exact, as Validate expects.
func DecodeJSON(raw json.RawMessage) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// Validate checks v (decoded with numbers as json.Number or float64)
// against s; the message names the field at fault by its path from at.
// With templated set, a string holding "{{" stands for a value known only
// when the step runs and passes for any type: the run checks the rendered
// value again.
func (s *JSONSchema) Validate(v any, at string, templated bool) error {
	if str, ok := v.(string); ok && templated && strings.Contains(str, "{{") {
		return nil
	}
	if len(s.Type) > 0 && !slices.ContainsFunc(s.Type, func(t string) bool { return isType(v, t) }) {
		return Invalid("%s must be %s, got %s", at, strings.Join(s.Type, " or "), kindOf(v))
	}
	if len(s.Enum) > 0 && !slices.ContainsFunc(s.Enum, func(e any) bool { return sameJSON(e, v) }) {
		return Invalid("%s %s: allowed values are %s", at, clipJSON(v), enumList(s.Enum))
	}
	switch x := v.(type) {
	case string:
		n := utf8.RuneCountInString(x)
		if s.MinLength != nil && n < *s.MinLength {
			return Invalid("%s must have at least %d characters", at, *s.MinLength)
		}
		if s.MaxLength != nil && n > *s.MaxLength {
			return Invalid("%s must have at most %d characters", at, *s.MaxLength)
		}
		if err := checkFormat(s.Format, x); err != nil {
			return Invalid("%s: %v", at, err)
		}
	case json.Number, float64:
		f := toFloat(x)
		if s.Minimum != nil && f < *s.Minimum {
			return Invalid("%s must be at least %v", at, *s.Minimum)
		}
		if s.Maximum != nil && f > *s.Maximum {
			return Invalid("%s must be at most %v", at, *s.Maximum)
		}
	case map[string]any:
		for _, r := range s.Required {
			if _, ok := x[r]; !ok {
				return Invalid("%s.%s is required", at, r)
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p, ok := s.Properties[k]
			if !ok {
				if s.AdditionalProperties != nil && !*s.AdditionalProperties {
					names := make([]string, 0, len(s.Properties))
					for n := range s.Properties {
						names = append(names, n)
					}
					sort.Strings(names)
					return Invalid("%s.%s is not a field of this input (fields: %s)", at, clip(k), strings.Join(names, ", "))
				}
				continue
			}
			if err := p.Validate(x[k], at+"."+k, templated); err != nil {
				return err
			}
		}
	case []any:
		if s.Items != nil {
			for i, e := range x {
				if err := s.Items.Validate(e, fmt.Sprintf("%s[%d]", at, i), templated); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func isType(v any, t string) bool {
	switch x := v.(type) {
	case string:
		return t == "string"
	case bool:
		return t == "boolean"
	case nil:
		return t == "null"
	case map[string]any:
		return t == "object"
	case []any:
		return t == "array"
	case json.Number, float64:
		if t == "number" {
			return true
		}
		if t == "integer" {
			f := toFloat(x)
			return f == float64(int64(f))
		}
	}
	return false
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case float64:
		return x
	}
	return 0
}

func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return "a number"
}

func sameJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	if na, ok := a.(json.Number); ok {
		x = []byte(na.String())
	}
	if nb, ok := b.(json.Number); ok {
		y = []byte(nb.String())
	}
	return bytes.Equal(x, y)
}

func enumList(e []any) string {
	s := make([]string, len(e))
	for i, v := range e {
		s[i] = clipJSON(v)
	}
	return strings.Join(s, ", ")
}

func clipJSON(v any) string {
	b, _ := json.Marshal(v)
	return clip(string(b))
}

func clip(s string) string {
	if len(s) > 80 {
		return strings.ToValidUTF8(s[:80], "") + "…"
	}
	return s
}

var dateTimeRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T`)

func checkFormat(format, s string) error {
	switch format {
	case "email":
		a, err := mail.ParseAddress(s)
		if err != nil || a.Name != "" || strings.ContainsAny(s, "\r\n") {
			return fmt.Errorf("%q is not an email address", clip(s))
		}
	case "uri":
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" {
			return fmt.Errorf("%q is not an absolute URI", clip(s))
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, s); err != nil || !dateTimeRE.MatchString(s) {
			return fmt.Errorf("%q is not an RFC 3339 date-time such as 2024-05-01T12:00:00Z", clip(s))
		}
	}
	return nil
}
