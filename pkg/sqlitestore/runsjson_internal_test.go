package sqlitestore

import (
	"bytes"
	"encoding/json"
	"flowservice/pkg/rundoc"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

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

// FuzzObjectMember: objectMember accepts exactly the JSON objects
// json.Valid accepts (up to its depth bound), and finds the number a
// decoder finds under the key.
func FuzzObjectMember(f *testing.F) {
	for _, s := range []string{
		`{"id":"r","attempts":0}`, `{}`, `[]`, `{"a":[1,-2.5e+3,true,false,null,{"b":"\u00e9\n"}],"attempts":12}`,
		` { "attempts" : 3 , "x" : [ ] } `, `{"attempts":1,"attempts":"2"}`, `{"a":01}`, `{"a":1.}`, `{"a":"\x"}`,
		`{"a":"` + "\x01" + `"}`, `{"a":-}`, `{"a":1e}`, `{"a":tru}`, `{"a":[1,]}`, `{"a":1,}`, `{"attempt\u0073":1}`,
		`{"attempts":-0.5E-2}`, `{"a":"\ud800"}`, `{"a":1}x`, `{"a":"` + "\xff" + `"}`, `"s"`, `{"a":{"b":{"c":[[[]]]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		start, end, found, valid := objectMember(doc, "attempts")
		trimmed := bytes.TrimLeft(doc, " \t\r\n")
		object := len(trimmed) > 0 && trimmed[0] == '{'
		if want := json.Valid(doc) && object; valid != want {
			if !valid && want && nesting(doc) > rundoc.MaxCheckDepth {
				return // refused for its depth: read the slow way
			}
			t.Fatalf("objectMember(%q) valid = %v, json.Valid and an object = %v", doc, valid, want)
		}
		if !valid {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		if !found {
			return
		}
		// A key written with escapes decodes to the same name as one
		// without, which objectMember does not compare: the decoder's
		// value may differ then.
		if bytes.Contains(doc, []byte(`\`)) {
			return
		}
		if got, want := string(doc[start:end]), string(m["attempts"]); got != want {
			t.Fatalf("objectMember(%q) = %q, decoded %q", doc, got, want)
		}
	})
}

// nesting is how deep doc's objects and arrays go, strings aside.
func nesting(doc []byte) int {
	depth, most, inString := 0, 0, false
	for i := 0; i < len(doc); i++ {
		switch ch := doc[i]; {
		case inString && ch == '\\':
			i++
		case ch == '"':
			inString = !inString
		case !inString && (ch == '{' || ch == '['):
			depth++
			most = max(most, depth)
		case !inString && (ch == '}' || ch == ']'):
			depth--
		}
	}
	return most
}

// BenchmarkObjectMember checks a run summary and finds its attempts, as
// a page read as JSON does for each run, against json.Valid alone.
func BenchmarkObjectMember(b *testing.B) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	d := int64(3)
	summary, err := encodeSummary(automation.Run{ID: automation.NewID(automation.PrefixRun), FlowID: automation.NewID(automation.PrefixFlow),
		Status: automation.RunSucceeded, Created: at, Started: &at, Finished: &at, DurationMs: &d, Attempts: 1,
		Trigger: automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/flw_x",
			Headers: map[string]string{"content-type": "application/json", "user-agent": "bench <1.0>"}, Query: map[string]string{}},
		Steps: []automation.StepResult{{Name: "set", Type: automation.StepSet, Status: automation.StepSucceeded,
			StartedAt: &at, FinishedAt: &at, DurationMs: 1, Attempts: 1}}})
	if err != nil {
		b.Fatal(err)
	}
	doc := []byte(summary)
	b.Run("objectMember", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if _, _, found, valid := objectMember(doc, "attempts"); !found || !valid {
				b.Fatal("not found")
			}
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if !json.Valid(doc) {
				b.Fatal("not valid")
			}
		}
	})
}
