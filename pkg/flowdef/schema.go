package flowdef

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Schema is the inferred data structure of a JSON value, shaped like a small
// JSON Schema: the type of each field, the properties of objects and the
// item type of arrays. Users build steps against it after a Test Trigger.
type Schema struct {
	// Type is object, array, string, integer, number, boolean or null; it
	// is empty when AnyOf lists the alternatives.
	Type string `json:"type,omitempty"`
	// Properties are an object's fields.
	Properties map[string]*Schema `json:"properties,omitempty"`
	// Items is the type of an array's elements, merged over all of them;
	// nil for an empty array.
	Items *Schema `json:"items,omitempty"`
	// AnyOf lists the alternatives where values differ in type (array
	// elements of mixed types, a field missing from some objects is not
	// one: it is simply a property).
	AnyOf []*Schema `json:"anyOf,omitempty"`
	// Truncated marks a node whose contents were not inferred because the
	// value is larger than MaxSchemaNodes allows or nested deeper than
	// MaxSchemaDepth.
	Truncated bool `json:"truncated,omitempty"`
}

// Bounds of InferSchema, so that a schema stays small whatever the body:
// a webhook body may be megabytes of distinct keys.
const (
	MaxSchemaNodes = 2000
	MaxSchemaDepth = 32
)

// JSON types as Schema.Type names them.
const (
	schemaObject  = "object"
	schemaArray   = "array"
	schemaString  = "string"
	schemaInteger = "integer"
	schemaNumber  = "number"
	schemaBoolean = "boolean"
	schemaNull    = "null"
)

// InferSchema returns the data structure of a JSON document. Objects list
// their properties; arrays merge their elements into one item schema, where
// objects merge property by property, integer and number widen to number,
// and other differences become AnyOf. Empty input is null.
func InferSchema(doc []byte) (*Schema, error) {
	if len(bytes.TrimSpace(doc)) == 0 {
		return &Schema{Type: schemaNull}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber() // to tell integers from numbers
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("infer schema: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("infer schema: data after the JSON value")
	}
	in := inferrer{budget: MaxSchemaNodes}
	return in.infer(v, 0), nil
}

// inferrer counts the nodes made so far against the budget.
type inferrer struct{ budget int }

func (in *inferrer) infer(v any, depth int) *Schema {
	in.budget--
	switch x := v.(type) {
	case map[string]any:
		s := &Schema{Type: schemaObject, Properties: map[string]*Schema{}}
		if depth >= MaxSchemaDepth || in.budget <= 0 {
			s.Properties, s.Truncated = nil, len(x) > 0
			return s
		}
		// Sorted, so that a truncated schema is the same every time.
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if in.budget <= 0 {
				s.Truncated = true
				break
			}
			s.Properties[k] = in.infer(x[k], depth+1)
		}
		return s
	case []any:
		s := &Schema{Type: schemaArray}
		if depth >= MaxSchemaDepth || in.budget <= 0 {
			s.Truncated = len(x) > 0
			return s
		}
		for _, e := range x {
			if in.budget <= 0 {
				s.Truncated = true
				break
			}
			s.Items = mergeSchema(s.Items, in.infer(e, depth+1))
		}
		return s
	case string:
		return &Schema{Type: schemaString}
	case json.Number:
		if strings.ContainsAny(x.String(), ".eE") {
			return &Schema{Type: schemaNumber}
		}
		return &Schema{Type: schemaInteger}
	case bool:
		return &Schema{Type: schemaBoolean}
	default:
		return &Schema{Type: schemaNull}
	}
}

// mergeSchema returns a schema that describes values of a and of b; a may
// be nil (nothing seen yet). It may reuse a and b.
func mergeSchema(a, b *Schema) *Schema {
	if a == nil {
		return b
	}
	alts := append(alternatives(a), alternatives(b)...)
	var out []*Schema
	for _, s := range alts {
		merged := false
		for i, o := range out {
			if m, ok := mergeSame(o, s); ok {
				out[i], merged = m, true
				break
			}
		}
		if !merged {
			out = append(out, s)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return &Schema{AnyOf: out}
}

func alternatives(s *Schema) []*Schema {
	if s.Type == "" && len(s.AnyOf) > 0 {
		return s.AnyOf
	}
	return []*Schema{s}
}

// mergeSame merges two schemas of one type (integer and number count as
// one), and reports false for different types.
func mergeSame(a, b *Schema) (*Schema, bool) {
	numeric := func(t string) bool { return t == schemaInteger || t == schemaNumber }
	switch {
	case numeric(a.Type) && numeric(b.Type):
		if a.Type == b.Type {
			return a, true
		}
		return &Schema{Type: schemaNumber}, true
	case a.Type != b.Type:
		return nil, false
	case a.Type == schemaObject:
		m := &Schema{Type: schemaObject, Properties: map[string]*Schema{}, Truncated: a.Truncated || b.Truncated}
		for k, p := range a.Properties {
			m.Properties[k] = p
		}
		for k, p := range b.Properties {
			m.Properties[k] = mergeSchema(m.Properties[k], p)
		}
		if len(m.Properties) == 0 {
			m.Properties = nil
		}
		return m, true
	case a.Type == schemaArray:
		items := a.Items
		if b.Items != nil {
			items = mergeSchema(items, b.Items)
		}
		return &Schema{Type: schemaArray, Items: items, Truncated: a.Truncated || b.Truncated}, true
	}
	return a, true
}
