package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/engine"
)

// FuzzFlowDefinition: a flow definition, decoded as the API decodes a body,
// is saved or refused with a client error (400, 403, 409), never an internal
// one. A saved definition reads back as saved, saves again unchanged, and
// runs on any trigger body to a final state with bounded step outputs.
func FuzzFlowDefinition(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"x":"{{ trigger.body.a }}"}}]}`,
		`{"name":"f","engine":"FLOW_BUILDER","steps":[{"name":"f","type":"FILTER","condition":"trigger.body.n > 1"},{"name":"r","type":"RESPOND","statusCode":201,"body":{"m":"{{ trigger.body.m }}"}}]}`,
		`{"name":"w","engine":"WORKFLOW_BUILDER","trigger":{"type":"WEBHOOK","webhook":{"path":"hooks/a","method":"POST"}}}`,
		`{"name":"h","engine":"FLOW_BUILDER","steps":[{"name":"h","type":"HTTP","url":"https://api.example.com/{{ trigger.body.id }}","headers":{"X-A":"{{ trigger.body.h }}"}}]}`,
		`{"name":"v","engine":"FLOW_BUILDER","steps":[{"name":"v","type":"VERIFY_SIGNATURE","signature":{"preset":"GITHUB","secret":"s3cret"}}]}`,
		`{"name":"c","engine":"FLOW_BUILDER","trigger":{"type":"SCHEDULE","schedule":{"cron":"*/5 * * * *","timezone":"Europe/Paris"}}}`,
		`{"name":"loops","engine":"FLOW_BUILDER","steps":[{"name":"f","type":"FILTER","condition":"all(trigger.body.a, all(#, all(#, all(#, true))))"}]}`,
		`{"name":"g","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"x":"{{ repeat(\"x\", 999999) + repeat(\"x\", 999999) }}"}}]}`,
		`{"name":"","engine":"ZAPIER"}`,
		`{"name":"x","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"CODE"}]}`,
	} {
		f.Add([]byte(s), []byte(`{"a":[[1]],"n":2,"m":"hi","id":"7","h":"v"}`))
	}
	svc, p := newServiceTB(f, automation.PlanEnterprise)
	eng := engine.New(engine.Config{MaxResponseBytes: 4096, MaxOutputBytes: 8192})
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, def, body []byte) {
		var in automation.FlowInput
		if json.Unmarshal(def, &in) != nil {
			return // malformed JSON is the HTTP layer's 400
		}
		fl, err := svc.CreateFlow(ctx, p, in)
		if err != nil {
			var ae *automation.Error
			if !errors.As(err, &ae) || !(errors.Is(err, automation.ErrInvalid) || errors.Is(err, automation.ErrForbidden) || errors.Is(err, automation.ErrConflict)) {
				t.Fatalf("CreateFlow(%s) = %v (%T), want a 400, 403 or 409", def, err, err)
			}
			return
		}
		back, err := svc.Flow(ctx, p, fl.ID)
		if err != nil {
			t.Fatalf("the saved flow does not read back: %v", err)
		}
		a, _ := json.Marshal(fl)
		b, _ := json.Marshal(back)
		if !bytes.Equal(a, b) {
			t.Fatalf("saved %s\nread back %s", a, b)
		}
		again := automation.FlowInput{Name: &back.Name, Engine: &back.Engine, Description: &back.Description, Trigger: &back.Trigger, Steps: &back.Steps}
		if _, err := svc.UpdateFlow(ctx, p, fl.ID, again); err != nil {
			t.Fatalf("the saved definition does not save again: %v", err)
		}
		for _, s := range back.Steps {
			if s.Type == automation.StepHTTP {
				return // no traffic leaves the machine
			}
		}
		if !json.Valid(body) {
			body = nil
		}
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		res := eng.Execute(rctx, back, automation.Run{ID: "run_fuzz", FlowID: back.ID, Status: automation.RunRunning,
			Trigger: automation.TriggerData{Method: "POST", Path: "/hook", Body: body}})
		switch res.Run.Status {
		case automation.RunSucceeded, automation.RunFailed:
		default:
			t.Fatalf("run ended %s: %s", res.Run.Status, res.Run.Error)
		}
		if res.Retryable {
			t.Fatalf("a run without HTTP steps failed as transient: %s", res.Run.Error)
		}
		for _, sr := range res.Run.Steps {
			if len(sr.Output) > 8192 {
				t.Fatalf("step %s recorded %d bytes, over the cap", sr.Name, len(sr.Output))
			}
		}
	})
}
