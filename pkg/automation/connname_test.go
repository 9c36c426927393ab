package automation_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// An HTTP step may name its connection: the name is resolved when the run
// starts; an unknown or ambiguous name fails the step naming it.
func TestHTTPStepConnectionByName(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{MaxAttempts: 1})
	ctx := t.Context()
	srv := echoServer(t)
	mk := func(name, key string) automation.Connection {
		t.Helper()
		c, err := e.svc.CreateConnection(ctx, e.project, automation.ConnectionInput{Name: name, App: "echo",
			Type: automation.ConnectionAPIKey, Value: json.RawMessage(`{"apiKey":"` + key + `"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	mk("Echo", "key-by-name-1234")
	step := func(conn string) automation.Step {
		return automation.Step{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: srv.URL, Connection: conn}
	}
	run := func(f automation.Flow) automation.Run {
		t.Helper()
		r := e.start1(t, f)
		x, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return x.Run
	}

	f := e.ActiveFlow(t, e.project, "by name", step("Echo"))
	if r := run(f); r.Status != automation.RunSucceeded || !strings.Contains(string(r.Steps[0].Output), `"auth":"Bearer `+automation.SecretMask+`"`) {
		t.Fatalf("run = %s %q output %s: want SUCCEEDED, the key sent and masked", r.Status, r.Error, r.Steps[0].Output)
	}

	g := e.ActiveFlow(t, e.project, "unknown", step("Nope"))
	if r := run(g); r.Status != automation.RunFailed || !strings.Contains(r.Error, `step call: connection "Nope" does not exist`) {
		t.Errorf("unknown name: run = %s %q", r.Status, r.Error)
	}

	// A second connection with the name makes it ambiguous; the flow saved
	// before fails its next run rather than guessing.
	mk("Echo", "key-by-name-5678")
	if r := run(f); r.Status != automation.RunFailed || !strings.Contains(r.Error, `connection name "Echo" is ambiguous`) {
		t.Errorf("ambiguous name: run = %s %q", r.Status, r.Error)
	}

	// Both ways at once is refused at save time.
	c := mk("Other", "key-other-0000")
	both := step("Other")
	both.ConnectionID = c.ID
	name, eng := "both", automation.FlowBuilder
	steps := []automation.Step{both}
	_, err := e.svc.CreateFlow(ctx, e.project, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps})
	if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), "steps[0]") {
		t.Errorf("connection and connectionId: err = %v", err)
	}
}

// Export names a step's connection while it exists; once it is deleted the
// document keeps its ID, and importing that document is refused naming it.
func TestExportNamesConnections(t *testing.T) {
	e := newEnv(t, automation.RunPolicy{})
	ctx := t.Context()
	c, err := e.svc.CreateConnection(ctx, e.project, automation.ConnectionInput{Name: "Chat", App: "chat",
		Type: automation.ConnectionAPIKey, Value: json.RawMessage(`{"apiKey":"k-1234"}`)})
	if err != nil {
		t.Fatal(err)
	}
	f := e.ActiveFlow(t, e.project, "uses chat",
		automation.Step{Name: "call", Type: automation.StepHTTP, Method: "POST", URL: "https://chat.example.com", ConnectionID: c.ID})
	export := func() automation.FlowDocument {
		t.Helper()
		raw, err := e.svc.ExportFlow(ctx, e.project, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		var doc automation.FlowDocument
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		return doc
	}
	if st := export().Definition.Steps[0]; st.Connection != "Chat" || st.ConnectionID != "" {
		t.Errorf("exported step names %q / %q, want the name only", st.Connection, st.ConnectionID)
	}
	if err := e.svc.DeleteConnection(ctx, e.project, c.ID); err != nil {
		t.Fatal(err)
	}
	doc := export()
	if st := doc.Definition.Steps[0]; st.Connection != "" || st.ConnectionID != c.ID {
		t.Errorf("after the delete the step names %q / %q, want the ID kept", st.Connection, st.ConnectionID)
	}
	doc.Name = "copy"
	_, err = e.svc.ImportFlow(ctx, e.project, doc)
	if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), "definition.steps[0].connectionId") {
		t.Errorf("import with a deleted connection: err = %v", err)
	}
}
