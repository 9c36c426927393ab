package flowdef

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The JSON Schema subset of forms (an APPROVAL's form; meant too for a
// flow's input schema and an AI step's output): an object whose properties
// are flat fields of type string, number, integer or boolean, or an enum,
// with title, description, default, required, minimum/maximum and
// minLength/maxLength/pattern-free length bounds. It is small on purpose:
// every field renders as one HTML input without JavaScript, and the same
// rules validate a form post, a JSON answer and an API call.

// FormSchema is a parsed form schema.
type FormSchema struct {
	Fields   []FormField // in the order of the schema's properties
	Required []string
}

// FormField is one property of a FormSchema.
type FormField struct {
	Name        string
	Type        string // string, number, integer, boolean
	Title       string
	Description string
	Enum        []any
	Default     any
	Minimum     *float64
	Maximum     *float64
	MinLength   *int
	MaxLength   *int
	Required    bool
}

// Bounds of a form schema.
const (
	MaxFormFields    = 50
	MaxFormEnum      = 100
	MaxFormBytes     = 16 << 10
	MaxFormTextBytes = 10 << 10 // a string value when the schema sets no maxLength
)

type rawSchema struct {
	Type                 string                     `json:"type"`
	Title                string                     `json:"title"`
	Description          string                     `json:"description"`
	Properties           map[string]json.RawMessage `json:"properties"`
	Required             []string                   `json:"required"`
	Enum                 []any                      `json:"enum"`
	Default              any                        `json:"default"`
	Minimum              *float64                   `json:"minimum"`
	Maximum              *float64                   `json:"maximum"`
	MinLength            *int                       `json:"minLength"`
	MaxLength            *int                       `json:"maxLength"`
	AdditionalProperties *bool                      `json:"additionalProperties"`
}

var schemaKeywords = []string{"type", "title", "description", "properties", "required", "enum", "default",
	"minimum", "maximum", "minLength", "maxLength", "additionalProperties", "$schema"}

// ParseFormSchema checks raw as a form schema and parses it. Messages name
// the property at fault.
func ParseFormSchema(raw json.RawMessage) (*FormSchema, error) {
	if len(raw) > MaxFormBytes {
		return nil, fmt.Errorf("%d bytes; at most %d", len(raw), MaxFormBytes)
	}
	var top rawSchema
	if err := strictSchema(raw, &top); err != nil {
		return nil, err
	}
	if top.Type != "object" {
		return nil, fmt.Errorf(`type must be "object", with the fields under properties`)
	}
	if len(top.Properties) > MaxFormFields {
		return nil, fmt.Errorf("%d properties; at most %d", len(top.Properties), MaxFormFields)
	}
	order, err := propertyOrder(raw)
	if err != nil {
		return nil, err
	}
	fs := &FormSchema{Required: top.Required}
	for _, name := range order {
		f, err := parseField(name, top.Properties[name])
		if err != nil {
			return nil, err
		}
		f.Required = slices.Contains(top.Required, name)
		fs.Fields = append(fs.Fields, f)
	}
	for _, r := range top.Required {
		if _, ok := top.Properties[r]; !ok {
			return nil, fmt.Errorf("required names %q, which is not a property", ClipID(r))
		}
	}
	return fs, nil
}

func strictSchema(raw json.RawMessage, into *rawSchema) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw, &keys); err != nil {
		return fmt.Errorf("not a JSON object")
	}
	for k := range keys {
		if !slices.Contains(schemaKeywords, k) {
			return fmt.Errorf("keyword %q is not supported (use %s)", ClipID(k), strings.Join(schemaKeywords[:len(schemaKeywords)-1], ", "))
		}
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return fmt.Errorf("not a valid schema: %v", err)
	}
	return nil
}

// propertyOrder is the names of raw's properties in the order written, so
// that a form shows its fields as the author listed them.
func propertyOrder(raw json.RawMessage) ([]string, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, err
	}
	props, ok := top["properties"]
	if !ok {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(props))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("properties must be an object")
	}
	var names []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		names = append(names, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return names, nil
}

func parseField(name string, raw json.RawMessage) (FormField, error) {
	at := "properties." + ClipID(name)
	if !stepNameRE.MatchString(name) {
		return FormField{}, fmt.Errorf("%s: use a letter or underscore, then letters, digits or underscores", at)
	}
	var p rawSchema
	if err := strictSchema(raw, &p); err != nil {
		return FormField{}, fmt.Errorf("%s: %v", at, err)
	}
	if p.Properties != nil || p.Required != nil || p.AdditionalProperties != nil {
		return FormField{}, fmt.Errorf("%s: fields are flat (string, number, integer, boolean or enum), not objects", at)
	}
	f := FormField{Name: name, Type: p.Type, Title: p.Title, Description: p.Description, Enum: p.Enum,
		Default: p.Default, Minimum: p.Minimum, Maximum: p.Maximum, MinLength: p.MinLength, MaxLength: p.MaxLength}
	switch {
	case f.Type == "" && len(f.Enum) > 0:
		f.Type = "string"
		for _, e := range f.Enum {
			if _, ok := e.(string); !ok {
				f.Type = "" // mixed: kept as the values are
				break
			}
		}
	case slices.Contains([]string{"string", "number", "integer", "boolean"}, f.Type):
	default:
		return FormField{}, fmt.Errorf(`%s.type %q: use "string", "number", "integer" or "boolean" (or an enum)`, at, ClipID(f.Type))
	}
	if p.Enum != nil {
		if len(p.Enum) == 0 || len(p.Enum) > MaxFormEnum {
			return FormField{}, fmt.Errorf("%s.enum: 1 to %d values", at, MaxFormEnum)
		}
		for i, e := range p.Enum {
			switch e.(type) {
			case string, float64, bool:
			default:
				return FormField{}, fmt.Errorf("%s.enum[%d]: a string, number or boolean", at, i)
			}
			if f.Type != "" {
				if err := f.check(e); err != nil {
					return FormField{}, fmt.Errorf("%s.enum[%d]: %v", at, i, err)
				}
			}
		}
	}
	if (f.Minimum != nil || f.Maximum != nil) && f.Type != "number" && f.Type != "integer" {
		return FormField{}, fmt.Errorf("%s: minimum and maximum apply to number and integer fields", at)
	}
	if (f.MinLength != nil || f.MaxLength != nil) && f.Type != "string" {
		return FormField{}, fmt.Errorf("%s: minLength and maxLength apply to string fields", at)
	}
	if f.Default != nil {
		if err := f.Check(f.Default); err != nil {
			return FormField{}, fmt.Errorf("%s.default: %v", at, err)
		}
	}
	return f, nil
}

// FieldError is a value that breaks a form schema: Field names it.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Validate checks values (decoded JSON) against the schema: required
// fields present, no unknown field, each value of its field's type and
// within its bounds. The error is a *FieldError.
func (s *FormSchema) Validate(values map[string]any) error {
	names := make([]string, 0, len(values))
	for k := range values {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if s.field(k) == nil {
			return &FieldError{Field: ClipID(k), Message: "is not a field of this form"}
		}
	}
	for _, f := range s.Fields {
		v, ok := values[f.Name]
		if !ok || v == nil {
			if f.Required {
				return &FieldError{Field: f.Name, Message: "is required"}
			}
			continue
		}
		if err := f.Check(v); err != nil {
			return &FieldError{Field: f.Name, Message: err.Error()}
		}
	}
	return nil
}

func (s *FormSchema) field(name string) *FormField {
	for i := range s.Fields {
		if s.Fields[i].Name == name {
			return &s.Fields[i]
		}
	}
	return nil
}

// Check checks one value against the field's type, enum and bounds.
func (f *FormField) Check(v any) error {
	if len(f.Enum) > 0 && !slices.ContainsFunc(f.Enum, func(e any) bool { return e == v }) {
		return fmt.Errorf("must be one of %s", enumText(f.Enum))
	}
	return f.check(v)
}

func (f *FormField) check(v any) error {
	switch f.Type {
	case "string":
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("must be a string")
		}
		n := utf8.RuneCountInString(s)
		if f.MinLength != nil && n < *f.MinLength {
			return fmt.Errorf("must be at least %d characters", *f.MinLength)
		}
		limit := MaxFormTextBytes
		if f.MaxLength != nil {
			limit = *f.MaxLength
		}
		if n > limit {
			return fmt.Errorf("must be at most %d characters", limit)
		}
	case "number", "integer":
		n, ok := v.(float64)
		if !ok {
			return fmt.Errorf("must be a %s", f.Type)
		}
		if f.Type == "integer" && (n != math.Trunc(n) || math.IsInf(n, 0)) {
			return fmt.Errorf("must be a whole number")
		}
		if f.Minimum != nil && n < *f.Minimum {
			return fmt.Errorf("must be at least %v", *f.Minimum)
		}
		if f.Maximum != nil && n > *f.Maximum {
			return fmt.Errorf("must be at most %v", *f.Maximum)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			return fmt.Errorf("must be true or false")
		}
	}
	return nil
}

func enumText(enum []any) string {
	parts := make([]string, len(enum))
	for i, e := range enum {
		b, _ := json.Marshal(e)
		parts[i] = string(b)
	}
	return strings.Join(parts, ", ")
}

// FromText turns an HTML form's fields (every value a string; a checkbox
// absent when unticked) into the values Validate takes: numbers parsed,
// booleans from "true"/"on", empty optional fields left out. A value that
// does not parse is a *FieldError.
func (s *FormSchema) FromText(text map[string]string) (map[string]any, error) {
	out := map[string]any{}
	for k := range text {
		if s.field(k) == nil {
			return nil, &FieldError{Field: ClipID(k), Message: "is not a field of this form"}
		}
	}
	for _, f := range s.Fields {
		t, ok := text[f.Name]
		if f.Type == "boolean" && len(f.Enum) == 0 {
			out[f.Name] = ok && (t == "true" || t == "on" || t == "1")
			continue
		}
		if !ok || t == "" {
			continue
		}
		typ := f.Type
		if typ == "" && len(f.Enum) > 0 { // a mixed enum: the value as written in it
			for _, e := range f.Enum {
				if b, _ := json.Marshal(e); string(b) == t || e == t {
					out[f.Name] = e
				}
			}
			if _, ok := out[f.Name]; !ok {
				return nil, &FieldError{Field: f.Name, Message: "must be one of " + enumText(f.Enum)}
			}
			continue
		}
		switch typ {
		case "number", "integer":
			n, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
			if err != nil {
				return nil, &FieldError{Field: f.Name, Message: "must be a " + typ}
			}
			out[f.Name] = n
		case "boolean":
			out[f.Name] = t == "true" || t == "on" || t == "1"
		default:
			out[f.Name] = t
		}
	}
	return out, nil
}
