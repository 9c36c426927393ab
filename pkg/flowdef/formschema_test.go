package flowdef

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

type noChecks struct{}

func (noChecks) Expression(string) error         { return nil }
func (noChecks) Template(string) error           { return nil }
func (noChecks) ResponseExpression(string) error { return nil }

func TestFormSchema(t *testing.T) {
	fs, err := ParseFormSchema(json.RawMessage(`{"type":"object","required":["amount"],"properties":{
		"amount":{"type":"number","minimum":0,"maximum":500},"reason":{"type":"string","maxLength":5},
		"count":{"type":"integer"},"urgent":{"type":"boolean"},"tier":{"enum":["gold","silver"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{fs.Fields[0].Name, fs.Fields[4].Name}; got[0] != "amount" || got[1] != "tier" {
		t.Errorf("order = %v, want as written", got)
	}
	for _, tc := range []struct {
		values map[string]any
		field  string
	}{
		{map[string]any{"amount": 10.0}, ""},
		{map[string]any{}, "amount"},
		{map[string]any{"amount": 501.0}, "amount"},
		{map[string]any{"amount": "x"}, "amount"},
		{map[string]any{"amount": 1.0, "reason": "toolong"}, "reason"},
		{map[string]any{"amount": 1.0, "count": 1.5}, "count"},
		{map[string]any{"amount": 1.0, "urgent": "yes"}, "urgent"},
		{map[string]any{"amount": 1.0, "tier": "bronze"}, "tier"},
		{map[string]any{"amount": 1.0, "other": 1.0}, "other"},
	} {
		err := fs.Validate(tc.values)
		var fe *FieldError
		if tc.field == "" && err != nil || tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field) {
			t.Errorf("Validate(%v) = %v, want field %q", tc.values, err, tc.field)
		}
	}
	v, err := fs.FromText(map[string]string{"amount": "12.5", "urgent": "on", "tier": "gold", "reason": ""})
	if err != nil || v["amount"] != 12.5 || v["urgent"] != true || v["tier"] != "gold" || v["reason"] != nil {
		t.Errorf("FromText = %v, %v", v, err)
	}
	for _, bad := range []string{`{"type":"array"}`, `{"type":"object","properties":{"a":{"type":"object"}}}`,
		`{"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}`, `{"type":"object","required":["b"],"properties":{}}`,
		`{"type":"object","properties":{"a":{"type":"string","minimum":1}}}`} {
		if _, err := ParseFormSchema(json.RawMessage(bad)); err == nil {
			t.Errorf("ParseFormSchema(%s) accepted", bad)
		}
	}
}

func TestApprovalAndWaitRules(t *testing.T) {
	for _, tc := range []struct {
		step Step
		want string
	}{
		{Step{Type: StepApproval, Title: "ok?"}, ""},
		{Step{Type: StepApproval}, "title is required"},
		{Step{Type: StepApproval, Title: "x", Approvals: 11}, "approvals 11"},
		{Step{Type: StepApproval, Title: "x", Timeout: "30s"}, `timeout "30s"`},
		{Step{Type: StepApproval, Title: "x", Timeout: "721h"}, `timeout "721h"`},
		{Step{Type: StepApproval, Title: "x", Approvers: &Approvers{Roles: []string{"viewer"}}}, `roles[0] "viewer"`},
		{Step{Type: StepApproval, Title: "x", Approvers: &Approvers{Emails: []string{"Ada@Example.com", "b@x.io"}}}, ""},
		{Step{Type: StepApproval, Title: "x", Approvers: &Approvers{Emails: []string{"a@x.io", "ada"}}}, `emails[1] "ada" is not an email address`},
		{Step{Type: StepApproval, Title: "x", Approvers: &Approvers{Emails: []string{"Ada <ada@x.io>"}}}, `emails[0]`},
		{Step{Type: StepApproval, Title: "x", Approvers: &Approvers{Emails: []string{"ada@localhost"}}}, `emails[0]`},
		{Step{Type: StepApproval, Title: "x", Approvers: &Approvers{Emails: manyEmails(MaxApproverEmails + 1)}}, "emails: 51 addresses; at most 50"},
		{Step{Type: StepApproval, Title: "x", Approvers: &Approvers{Emails: manyEmails(MaxApproverEmails)}}, ""},
		{Step{Type: StepApproval, Title: "x", Form: json.RawMessage(`{"type":"object","properties":{"a":{"type":"date"}}}`)}, "form: properties.a.type"},
		{Step{Type: StepApproval, Title: "x", Notify: []Step{{Name: "w", Type: StepWait, Duration: "1s"}}}, "cannot wait themselves"},
		{Step{Type: StepWait, Duration: "720h"}, ""},
		{Step{Type: StepWait, Duration: "721h"}, "at most"},
		{Step{Type: StepWait, Until: "trigger.body.at"}, ""},
		{Step{Type: StepWait, Until: "x", Duration: "1s"}, "not both"},
		{Step{Type: StepWait, For: "callback", Timeout: "24h"}, ""},
		{Step{Type: StepWait, For: "callback", Duration: "1h"}, "not duration"},
		{Step{Type: StepWait, For: "event"}, `for "event"`},
		{Step{Type: StepWait, Duration: "1s", Timeout: "1h"}, "callback"},
	} {
		tc.step.Name = "s"
		err := Validator{Checks: noChecks{}}.Steps([]Step{tc.step}, nil)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.step, err, tc.want)
		}
	}
	// Emails are kept lower-case: people are matched as they sign in.
	low := []Step{{Name: "s", Type: StepApproval, Title: "x", Approvers: &Approvers{Emails: []string{" Ada@Example.COM"}}}}
	if err := (Validator{Checks: noChecks{}}).Steps(low, nil); err != nil || low[0].Approvers.Emails[0] != "ada@example.com" {
		t.Errorf("approvers.emails saved as %q (%v), want lower-case", low[0].Approvers.Emails, err)
	}
	st := Step{Name: "a", Type: StepApproval, Title: "x"}
	if err := (Validator{Checks: noChecks{}}).Steps([]Step{{Name: "loop", Type: StepForEach, Items: json.RawMessage(`[1]`), Steps: []Step{st}}}, nil); err == nil || !strings.Contains(err.Error(), "FOR_EACH") {
		t.Errorf("APPROVAL in FOR_EACH: %v", err)
	}
}

func manyEmails(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("p%d@example.com", i)
	}
	return out
}
