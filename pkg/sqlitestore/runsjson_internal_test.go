package sqlitestore

import "testing"

// TestWithAttempts: the run's own attempts member is set, whatever comes
// before it with the same name: a step's, a header's key, a string's text.
func TestWithAttempts(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string // "" for not found
	}{
		{`{"id":"r","attempts":0}`, 0, `{"id":"r","attempts":0}`},
		{`{"id":"r","attempts":0,"created":"x"}`, 12, `{"id":"r","attempts":12,"created":"x"}`},
		{`{"trigger":{"headers":{"attempts":"5"}},"steps":[{"name":"a","attempts":3}],"attempts":1}`, 2,
			`{"trigger":{"headers":{"attempts":"5"}},"steps":[{"name":"a","attempts":3}],"attempts":2}`},
		{`{"error":"\"attempts\":4 \\","attempts":10,"response":{"headers":{"attempts":"1"}}}`, 9,
			`{"error":"\"attempts\":4 \\","attempts":9,"response":{"headers":{"attempts":"1"}}}`},
		{`{"id":"attempts","steps":[{"attempts":1}]}`, 1, ""},
		{`{"attempts":"1"}`, 1, ""},
		{`{"attempts":null}`, 1, ""},
	} {
		got, ok := withAttempts([]byte(c.in), c.n)
		if c.want == "" {
			if ok {
				t.Errorf("withAttempts(%s) = %s, want not found", c.in, got)
			}
			continue
		}
		if !ok || string(got) != c.want {
			t.Errorf("withAttempts(%s, %d) = %s %v, want %s", c.in, c.n, got, ok, c.want)
		}
	}
}
