package flowdef

import (
	"encoding/json"
	"strings"
	"testing"
)

// okChecks accepts every expression: these tests are about the rules.
type okChecks struct{}

func (okChecks) Expression(string) error         { return nil }
func (okChecks) Template(string) error           { return nil }
func (okChecks) ResponseExpression(string) error { return nil }

// TestSQLAndEmailRules: a {{ in a SQL statement, bounds, and line breaks
// in mail headers are 400s naming the field; defaults are filled.
func TestSQLAndEmailRules(t *testing.T) {
	for _, tc := range []struct {
		step Step
		want string
	}{
		{Step{Name: "q", Type: StepSQL, Connection: "db", Query: Query{SQL: "select * from t where id = {{ trigger.body.id }}"}}, "steps[0].query holds a {{ template }}: values go in params"},
		{Step{Name: "q", Type: StepSQL, Query: Query{SQL: "select 1"}}, "steps[0].connection is required"},
		{Step{Name: "q", Type: StepSQL, Connection: "db", Query: Query{SQL: "select 1"}, MaxRows: 20000}, "steps[0].maxRows 20000: use 1 to 10000"},
		{Step{Name: "q", Type: StepSQL, Connection: "db", Query: Query{SQL: "select 1"}, Timeout: "2m"}, `steps[0].timeout "2m"`},
		{Step{Name: "q", Type: StepSQL, Connection: "db", Query: Query{SQL: "select 1"}, Params: json.RawMessage(`{"a": 1}`)}, "steps[0].params must be an array"},
		{Step{Name: "m", Type: StepEmail, Connection: "mail", To: []string{"a@example.com"}, Subject: "Hi\r\nBcc: x@example.com", Text: "t"}, "steps[0].subject contains a line break"},
		{Step{Name: "m", Type: StepEmail, Connection: "mail", To: []string{"a@example.com\nBcc: x@example.com"}, Subject: "Hi", Text: "t"}, "steps[0].to[0] contains a line break"},
		{Step{Name: "m", Type: StepEmail, Connection: "mail", To: []string{"not an address"}, Subject: "Hi", Text: "t"}, `steps[0].to[0] "not an address" is not an email address`},
		{Step{Name: "m", Type: StepEmail, Connection: "mail", To: []string{"a@example.com"}, Subject: "Hi"}, "EMAIL needs text or html"},
		{Step{Name: "a", Type: StepAction, Action: "Slack post"}, `steps[0].action "Slack post": an action key is <app>.<action>`},
		{Step{Name: "a", Type: StepAction, Action: "slack.post_message", Input: json.RawMessage(`[1]`)}, "steps[0].input must be an object"},
	} {
		steps := []Step{tc.step}
		err := Validator{Checks: okChecks{}}.Steps(steps, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.step, err, tc.want)
		}
	}
	steps := []Step{{Name: "q", Type: StepSQL, Connection: "db", Query: Query{SQL: "select $1"}, Params: json.RawMessage(`["{{ trigger.body.id }}"]`)}}
	if err := (Validator{Checks: okChecks{}}).Steps(steps, nil); err != nil || steps[0].MaxRows != DefaultSQLMaxRows {
		t.Errorf("a valid SQL step: %v, maxRows %d", err, steps[0].MaxRows)
	}
}

// TestQueryField: "query" is an HTTP step's object or a SQL step's string,
// and encodes back the same.
func TestQueryField(t *testing.T) {
	for _, in := range []string{`{"name":"a","type":"HTTP","query":{"page":"1"}}`, `{"name":"a","type":"SQL","query":"select 1"}`} {
		var s Step
		if err := json.Unmarshal([]byte(in), &s); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(s)
		if string(b) != in {
			t.Errorf("%s came back as %s", in, b)
		}
	}
	var s Step
	if err := json.Unmarshal([]byte(`{"query": 5}`), &s); err == nil {
		t.Error("a number for query was accepted")
	}
}
