package automation

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestJSONPosition(t *testing.T) {
	tests := []struct {
		name, text string
		line, col  int
	}{
		{"first line", `{"a": x}`, 1, 7},
		{"third line", "{\n  \"a\": 1,\n  \"b\": nope\n}", 3, 9},
		{"after multibyte", "{\"é\": \"ü\" x}", 1, 11},
		{"at the start", `]`, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v any
			var syn *json.SyntaxError
			if err := json.Unmarshal([]byte(tt.text), &v); !errors.As(err, &syn) {
				t.Fatalf("%q: want a syntax error, got %v", tt.text, err)
			}
			if line, col := JSONPosition([]byte(tt.text), syn.Offset); line != tt.line || col != tt.col {
				t.Errorf("JSONPosition(%q, %d) = %d:%d, want %d:%d", tt.text, syn.Offset, line, col, tt.line, tt.col)
			}
		})
	}
}
