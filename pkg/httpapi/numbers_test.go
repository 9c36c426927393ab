package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCheckNumbers: a number a float64 cannot hold is refused wherever it
// is; one in a string, a large one in range, and tiny ones are not.
func TestCheckNumbers(t *testing.T) {
	for _, tt := range []struct {
		body string
		bad  bool
	}{
		{`{"n": 1e999999}`, true},
		{`[1, 2, -1E400]`, true},
		{`{"a": {"b": [0.5, ` + strings.Repeat("9", 400) + `]}}`, true},
		{`{"n": 1.7e308, "m": -2.5e-400, "k": 12345678901234567890}`, false},
		{`{"s": "1e999999", "t": "\"1e999999"}`, false},
		{`{"n": 3}`, false},
	} {
		err := checkNumbers([]byte(tt.body))
		if (err != nil) != tt.bad {
			t.Errorf("checkNumbers(%.60s) = %v, want refused %v", tt.body, err, tt.bad)
		}
		if err != nil && !strings.Contains(err.Error(), "out of the range") {
			t.Errorf("message %q does not say why", err)
		}
	}
}

// FuzzCheckNumbers: on a valid JSON body within the depth limit,
// checkNumbers refuses exactly what encoding/json cannot decode into the
// values steps read.
func FuzzCheckNumbers(f *testing.F) {
	for _, s := range []string{`{"n": 1e999999}`, `[1e308, 1e309]`, `"1e999"`, `{"a": [-0.0, 1E-999]}`, `123456789012345678901234567890`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) || jsonDepthExceeds(b, MaxJSONDepth) {
			return
		}
		var v any
		decodes := json.Unmarshal(b, &v) == nil
		if refused := checkNumbers(b) != nil; refused == decodes {
			t.Fatalf("checkNumbers refused %v, json decodes %v: %q", refused, decodes, b)
		}
	})
}
