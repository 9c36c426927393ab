package flowdef

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Query is the step field "query", which two step types read differently:
// an HTTP step's query parameters (an object of templates) and a SQL
// step's statement (a string). One JSON name, one Go field: the JSON's
// shape says which it holds.
type Query struct {
	Params map[string]string // HTTP
	SQL    string            // SQL
}

// IsZero reports whether the field is absent, for omitzero and for the
// walker's misplaced-field check.
func (q Query) IsZero() bool { return len(q.Params) == 0 && q.SQL == "" }

// MarshalJSON writes the string or the object, whichever is set.
func (q Query) MarshalJSON() ([]byte, error) {
	if q.SQL != "" {
		return json.Marshal(q.SQL)
	}
	if q.Params == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(q.Params)
}

// UnmarshalJSON reads a string (SQL) or an object of strings (HTTP).
func (q *Query) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	*q = Query{}
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &q.SQL)
	}
	if err := json.Unmarshal(b, &q.Params); err != nil {
		return errors.New("query must be an object of strings (HTTP query parameters) or a string (a SQL statement)")
	}
	return nil
}

// JSONValue is what the field holds for a strict decoder that walks types
// to find unknown fields (pkg/httpapi): parameters by any name, or a
// string, never the Go struct's own field names.
func (Query) JSONValue() any { return map[string]string(nil) }
