package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/engine"
	"flowservice/pkg/flowtest"
)

// TestSQLAndEmailThroughTheService: POSTGRES and SMTP connections made
// through the Service (values checked, sealed), a flow that reads a
// database and mails what it found, and the save-time checks of the
// connection a step names.
func TestSQLAndEmailThroughTheService(t *testing.T) {
	pgPort := engine.StartPostgres(t)
	smtpPort, pool, sent := engine.StartSMTP(t)
	fe := flowtest.New(t, flowtest.Options{})
	_ = pool // the Service's engine trusts the system's CAs: this flow sends with tls "none"
	p, _ := fe.Project(t, "db", automation.PlanFree)
	ctx := context.Background()
	mk := func(in automation.ConnectionInput) (automation.Connection, error) {
		return fe.Svc.CreateConnection(ctx, p, in)
	}
	for _, bad := range []struct {
		in   automation.ConnectionInput
		want string
	}{
		{automation.ConnectionInput{Name: "x", App: "pg", Type: automation.ConnectionPostgres, Value: json.RawMessage(`{"url": "mysql://a@h/db"}`)}, "value.url: want postgres://"},
		{automation.ConnectionInput{Name: "x", App: "pg", Type: automation.ConnectionPostgres, Value: json.RawMessage(`{"host": "h", "username": "u", "tls": "maybe"}`)}, `value.tls "maybe"`},
		{automation.ConnectionInput{Name: "x", App: "mail", Type: automation.ConnectionSMTP, Value: json.RawMessage(`{"host": "h", "from": "a\r\nb@example.com"}`)}, "value.from: an address contains a line break"},
		{automation.ConnectionInput{Name: "x", App: "mail", Type: automation.ConnectionSMTP, Value: json.RawMessage(`{"host": "h", "from": "a@example.com", "tls": "ssl"}`)}, `value.tls "ssl"`},
	} {
		if _, err := mk(bad.in); !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want a 400 with %q", bad.in.Value, err, bad.want)
		}
	}
	if _, err := mk(automation.ConnectionInput{Name: "db", App: "postgres", Type: automation.ConnectionPostgres,
		Value: json.RawMessage(fmt.Sprintf(`{"host": "127.0.0.1", "port": %d, "database": "postgres", "username": "postgres", "password": "pw-not-needed", "tls": "disable"}`, pgPort))}); err != nil {
		t.Fatal(err)
	}
	if _, err := mk(automation.ConnectionInput{Name: "mail", App: "smtp", Type: automation.ConnectionSMTP,
		Value: json.RawMessage(fmt.Sprintf(`{"host": "127.0.0.1", "port": %d, "from": "flows@example.com", "tls": "none"}`, smtpPort))}); err != nil {
		t.Fatal(err)
	}
	// A SQL step naming the SMTP connection is a 400 at save.
	name, eng := "wrong", automation.FlowBuilder
	wrong := []automation.Step{{Name: "q", Type: automation.StepSQL, Connection: "mail", Query: automation.Query{SQL: "select 1"}}}
	if _, err := fe.Svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &wrong}); err == nil || !strings.Contains(err.Error(), `steps[0].connection "mail" is a SMTP connection; a SQL step needs POSTGRES, MYSQL`) {
		t.Errorf("SQL on an SMTP connection: %v", err)
	}

	f := fe.ActiveFlow(t, p, "report",
		automation.Step{Name: "q", Type: automation.StepSQL, Connection: "db",
			Query: automation.Query{SQL: "select $1::text as who, 41 + 1 as answer"}, Params: json.RawMessage(`["{{ trigger.body.ref }}"]`)},
		automation.Step{Name: "mail", Type: automation.StepEmail, Connection: "mail", To: []string{"ada@example.com"},
			Subject: "Report for {{ steps.q.rows[0].who }}", Text: "The answer is {{ steps.q.rows[0].answer }}"},
	)
	r := fe.StartRef(t, f)
	if _, err := fe.Svc.ExecuteRun(ctx, p.ID, r.ID); err != nil {
		t.Fatal(err)
	}
	run, err := fe.Svc.Run(ctx, p, f.ID, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s %+v", run.Status, run.Error, run.Steps)
	}
	msgs := sent()
	if len(msgs) != 1 || !strings.Contains(msgs[0], "Subject: Report for main") || !strings.Contains(msgs[0], "The answer is 42") {
		t.Errorf("messages %q", msgs)
	}
	if !strings.Contains(string(run.Steps[0].Output), `"rowCount":1`) || !strings.Contains(string(run.Steps[1].Output), `"messageId"`) {
		t.Errorf("outputs %s, %s", run.Steps[0].Output, run.Steps[1].Output)
	}
}
