package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDefinitionSyntaxErrorSaysWhere: a definition that is not JSON is
// refused before any request, naming its line and column.
func TestDefinitionSyntaxErrorSaysWhere(t *testing.T) {
	tests := []struct{ def, want string }{
		{"{\n  \"name\": \"x\",\n  \"engine\": FLOW_BUILDER\n}", "stdin:3:13: invalid character 'F'"},
		{`{"name": "x"`, "stdin:1:12: unexpected end of JSON input"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		root := newRoot(strings.NewReader(tt.def), &out, &errb)
		// A URL nothing answers on: the file is checked first.
		root.SetArgs([]string{"--url", "http://127.0.0.1:1", "--api-key", "k", "flows", "create", "-f", "-"})
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("flows create -f - with %q: err = %v, want %q", tt.def, err, tt.want)
		}
	}
}
