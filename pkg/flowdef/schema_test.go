package flowdef

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func TestInferSchema(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"string", `"hi"`, `{"type":"string"}`},
		{"integer", `42`, `{"type":"integer"}`},
		{"negative integer", `-7`, `{"type":"integer"}`},
		{"number", `4.2`, `{"type":"number"}`},
		{"exponent is a number", `1e3`, `{"type":"number"}`},
		{"boolean", `true`, `{"type":"boolean"}`},
		{"null", `null`, `{"type":"null"}`},
		{"empty input is null", ``, `{"type":"null"}`},
		{"empty object", `{}`, `{"type":"object"}`},
		{"empty array has no items", `[]`, `{"type":"array"}`},
		{"flat object", `{"event":"push","count":3,"ok":false,"note":null}`,
			`{"type":"object","properties":{"count":{"type":"integer"},"event":{"type":"string"},"note":{"type":"null"},"ok":{"type":"boolean"}}}`},
		{"nested object", `{"data":{"ref":"main","repo":{"id":1}}}`,
			`{"type":"object","properties":{"data":{"type":"object","properties":{"ref":{"type":"string"},"repo":{"type":"object","properties":{"id":{"type":"integer"}}}}}}}`},
		{"array of strings", `["a","b"]`, `{"type":"array","items":{"type":"string"}}`},
		{"integers and numbers widen", `[1, 2.5, 3]`, `{"type":"array","items":{"type":"number"}}`},
		{"objects merge their properties", `[{"a":1},{"b":"x"},{"a":2,"b":"y"}]`,
			`{"type":"array","items":{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}}}}`},
		{"mixed types are anyOf", `[1,"a",null,2]`,
			`{"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"string"},{"type":"null"}]}}`},
		{"a property of two types", `[{"v":1},{"v":"x"}]`,
			`{"type":"array","items":{"type":"object","properties":{"v":{"anyOf":[{"type":"integer"},{"type":"string"}]}}}}`},
		{"nested arrays merge items", `[[1],[],["a"]]`,
			`{"type":"array","items":{"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"string"}]}}}`},
		{"anyOf merges with a later alternative", `[1,"a",2.5,{"k":1},{"j":true}]`,
			`{"type":"array","items":{"anyOf":[{"type":"number"},{"type":"string"},{"type":"object","properties":{"j":{"type":"boolean"},"k":{"type":"integer"}}}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := InferSchema([]byte(tt.doc))
			if err != nil {
				t.Fatalf("InferSchema(%s): %v", tt.doc, err)
			}
			got, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("InferSchema(%s)\n got %s\nwant %s", tt.doc, got, tt.want)
			}
		})
	}
}

func TestInferSchemaRejectsInvalidJSON(t *testing.T) {
	for _, doc := range []string{`{`, `{"a":}`, `1 2`, `nope`} {
		if s, err := InferSchema([]byte(doc)); err == nil {
			t.Errorf("InferSchema(%s) = %+v, want an error", doc, s)
		}
	}
}

// TestInferSchemaBounds checks that a schema stays small whatever the body:
// many keys and deep nesting are cut and marked, never followed.
func TestInferSchemaBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 10 * MaxSchemaNodes {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%06d":%d`, i, i)
	}
	b.WriteString("}")
	s, err := InferSchema([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Truncated || len(s.Properties) >= MaxSchemaNodes || len(s.Properties) < MaxSchemaNodes/2 {
		t.Errorf("wide object: truncated %v with %d properties, want truncated with fewer than %d",
			s.Truncated, len(s.Properties), MaxSchemaNodes)
	}
	if _, ok := s.Properties["k000000"]; !ok {
		t.Errorf("wide object: the first key (in sorted order) is missing")
	}

	deep := strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100)
	s, err = InferSchema([]byte(deep))
	if err != nil {
		t.Fatal(err)
	}
	depth := 0
	for s.Properties["a"] != nil {
		s = s.Properties["a"]
		depth++
	}
	if depth != MaxSchemaDepth || !s.Truncated || s.Type != "object" {
		t.Errorf("deep object: cut at depth %d (truncated %v, type %s), want %d, truncated object",
			depth, s.Truncated, s.Type, MaxSchemaDepth)
	}
}
