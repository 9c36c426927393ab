package httpapi

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// testClock is a Service clock that tests move forward.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Now()} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// webhookTestView and sampleView are the Test Trigger answers.
type webhookTestView struct {
	FlowID    string    `json:"flowId"`
	TestURL   string    `json:"testUrl"`
	ExpiresAt time.Time `json:"expiresAt"`
}

type sampleView struct {
	FlowID     string                 `json:"flowId"`
	Armed      bool                   `json:"armed"`
	ExpiresAt  *time.Time             `json:"expiresAt"`
	CapturedAt time.Time              `json:"capturedAt"`
	Trigger    automation.TriggerData `json:"trigger"`
	Schema     json.RawMessage        `json:"schema"`
}

// arm arms a flow's Test Trigger through the API.
func (h *hookEnv) arm(t *testing.T, flowID string) webhookTestView {
	t.Helper()
	var v webhookTestView
	call(t, h.api, "POST", "/api/v1/flows/"+flowID+"/webhook/test", h.key, "").into(t, 200, &v)
	if v.FlowID != flowID {
		t.Errorf("arm: flowId = %q, want %q", v.FlowID, flowID)
	}
	return v
}

// sample reads a flow's sample through the API, with its raw JSON.
func (h *hookEnv) sample(t *testing.T, flowID string) (sampleView, string) {
	t.Helper()
	var v sampleView
	r := call(t, h.api, "GET", "/api/v1/flows/"+flowID+"/webhook/sample", h.key, "")
	r.into(t, 200, &v)
	return v, string(r.body)
}

func (h *hookEnv) wantNoSample(t *testing.T, flowID string) {
	t.Helper()
	call(t, h.api, "GET", "/api/v1/flows/"+flowID+"/webhook/sample", h.key, "").wantError(t, 404, "SAMPLE_NOT_FOUND")
}

// flowUpdated reads a flow's updated time, which capture must not move.
func (h *hookEnv) flowUpdated(t *testing.T, flowID string) string {
	t.Helper()
	var f struct{ Updated string }
	call(t, h.api, "GET", "/api/v1/flows/"+flowID, h.key, "").into(t, 200, &f)
	return f.Updated
}

const pushEvent = `{"event":"push","data":{"ref":"main","size":3,"ratio":0.5,"tags":["a","b"],"commits":[{"id":1,"msg":"x"},{"id":2,"merged":true}]}}`

// pushSchema is what InferSchema makes of pushEvent.
const pushSchema = `{"type":"object","properties":{"data":{"type":"object","properties":{` +
	`"commits":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"merged":{"type":"boolean"},"msg":{"type":"string"}}}},` +
	`"ratio":{"type":"number"},"ref":{"type":"string"},"size":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}}},` +
	`"event":{"type":"string"}}}`

// TestTestTriggerFlowBuilder: arm, fire at the flow's own URL, read the
// sample with its schema; the next event runs but is not captured.
func TestTestTriggerFlowBuilder(t *testing.T) {
	clock := newTestClock()
	h := newHookEnvClock(t, HookConfig{}, clock.now)
	id := h.activeFlow(t, h.key, `{"name":"fb","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"ref":"{{ trigger.body.data.ref }}"}}]}`)
	h.wantNoSample(t, id)
	updated := h.flowUpdated(t, id)

	armed := h.arm(t, id)
	if armed.TestURL != "http://engine.test/api/v1/webhooks/"+id {
		t.Errorf("testUrl = %q, want the flow builder webhook URL", armed.TestURL)
	}
	if want := clock.now().Add(automation.CaptureWindow); !armed.ExpiresAt.Equal(want.UTC().Truncate(time.Millisecond)) {
		t.Errorf("expiresAt = %v, want %v", armed.ExpiresAt, want)
	}
	e := call(t, h.api, "GET", "/api/v1/flows/"+id+"/webhook/sample", h.key, "").wantError(t, 404, "SAMPLE_NOT_FOUND")
	if !strings.Contains(e.Message, "waiting") {
		t.Errorf("404 while armed says %q; want it to say the trigger is waiting", e.Message)
	}

	call(t, h.engine, "POST", "/api/v1/webhooks/"+id+"?source=test", "", pushEvent,
		"Authorization: Bearer sender-token-value", "X-GitHub-Event: push").started(t)
	s, raw := h.sample(t, id)
	if s.Armed || s.ExpiresAt != nil {
		t.Errorf("after the capture: armed %v, expiresAt %v; want disarmed", s.Armed, s.ExpiresAt)
	}
	if s.FlowID != id || !s.CapturedAt.Equal(clock.now().UTC().Truncate(time.Millisecond)) {
		t.Errorf("flowId %q capturedAt %v", s.FlowID, s.CapturedAt)
	}
	if compactJSON(t, s.Trigger.Body) != compactJSON(t, json.RawMessage(pushEvent)) || s.Trigger.Method != "POST" ||
		s.Trigger.Query["source"] != "test" || s.Trigger.Headers["x-github-event"] != "push" {
		t.Errorf("trigger = %+v", s.Trigger)
	}
	if string(s.Schema) != pushSchema {
		t.Errorf("schema\n got %s\nwant %s", s.Schema, pushSchema)
	}
	if strings.Contains(raw, "sender-token-value") || s.Trigger.Headers["authorization"] != "" {
		t.Errorf("the sample holds the Authorization header: %s", raw)
	}

	// One event per arming: the next one runs, and the sample stays.
	clock.advance(time.Second)
	call(t, h.engine, "POST", "/api/v1/webhooks/"+id, "", `{"event":"second"}`).started(t)
	if again, _ := h.sample(t, id); compactJSON(t, again.Trigger.Body) != compactJSON(t, json.RawMessage(pushEvent)) || !again.CapturedAt.Equal(s.CapturedAt) {
		t.Errorf("a second event replaced the sample: %s at %v", again.Trigger.Body, again.CapturedAt)
	}
	drain(t, h.svc, h.runs)
	var runs struct{ Data []automation.Run }
	call(t, h.api, "GET", "/api/v1/flows/"+id+"/runs", h.key, "").into(t, 200, &runs)
	if len(runs.Data) != 2 {
		t.Errorf("runs = %d, want 2 (the active flow ran both events)", len(runs.Data))
	}

	// Arming again replaces the sample with the next event; arming never
	// touches the flow's definition.
	h.arm(t, id)
	if s, _ := h.sample(t, id); !s.Armed || s.ExpiresAt == nil {
		t.Errorf("re-armed: armed %v expiresAt %v; want armed with the old sample shown", s.Armed, s.ExpiresAt)
	}
	call(t, h.engine, "POST", "/api/v1/webhooks/"+id, "", `[1,"two"]`).started(t)
	if s, _ := h.sample(t, id); string(s.Trigger.Body) != `[1,"two"]` ||
		string(s.Schema) != `{"type":"array","items":{"anyOf":[{"type":"integer"},{"type":"string"}]}}` {
		t.Errorf("second capture: body %s schema %s", s.Trigger.Body, s.Schema)
	}
	if got := h.flowUpdated(t, id); got != updated {
		t.Errorf("flow updated moved from %s to %s by capture", updated, got)
	}
}

// TestTestTriggerInactiveFlowBuilder: an armed INACTIVE flow accepts exactly
// one event, and runs it.
func TestTestTriggerInactiveFlowBuilder(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	id := createFlow(t, h.api, h.key, `{"name":"fb","engine":"FLOW_BUILDER","steps":[{"name":"s","type":"SET","values":{"e":"{{ trigger.body.event }}"}}]}`).ID
	e := call(t, h.engine, "POST", "/api/v1/webhooks/"+id, "", `{}`).wantError(t, 404, "FLOW_INACTIVE")
	if !strings.Contains(e.Message, "is INACTIVE: enable it (POST /api/v1/flows/"+id+"/enable") {
		t.Errorf("an inactive flow's webhook does not say how to enable it: %q", e.Message)
	}

	h.arm(t, id)
	runID := call(t, h.engine, "POST", "/api/v1/webhooks/"+id, "", `{"event":"first"}`).started(t)
	r := call(t, h.engine, "POST", "/api/v1/webhooks/"+id, "", `{"event":"second"}`)
	r.wantError(t, 404, "FLOW_INACTIVE")
	drain(t, h.svc, h.runs)
	if run := h.run(t, id, runID); run.Status != automation.RunSucceeded || string(run.Steps[0].Output) != `{"e":"first"}` {
		t.Errorf("run: %s %s", run.Status, run.Steps[0].Output)
	}
	if h.runs.count() != 1 {
		t.Errorf("runs made = %d, want 1", h.runs.count())
	}
	if s, _ := h.sample(t, id); string(s.Trigger.Body) != `{"event":"first"}` {
		t.Errorf("sample body %s", s.Trigger.Body)
	}
	var f flowView
	call(t, h.api, "GET", "/api/v1/flows/"+id, h.key, "").into(t, 200, &f)
	if f.Status != "INACTIVE" {
		t.Errorf("status = %s, want INACTIVE", f.Status)
	}
}

// TestTestTriggerExpiry: after 120 s an armed capture takes nothing.
func TestTestTriggerExpiry(t *testing.T) {
	clock := newTestClock()
	h := newHookEnvClock(t, HookConfig{}, clock.now)
	inactive := createFlow(t, h.api, h.key, flowBuilderBody).ID
	active := h.activeFlow(t, h.key, flowBuilderBody)

	first := h.arm(t, inactive)
	clock.advance(time.Minute)
	second := h.arm(t, inactive)
	if got := second.ExpiresAt.Sub(first.ExpiresAt); got != time.Minute {
		t.Errorf("arming again moved the expiry by %v, want 1m", got)
	}
	h.arm(t, active)
	clock.advance(automation.CaptureWindow + time.Second)

	call(t, h.engine, "POST", "/api/v1/webhooks/"+inactive, "", `{}`).wantError(t, 404, "FLOW_INACTIVE")
	call(t, h.engine, "POST", "/api/v1/webhooks/"+active, "", `{"late":true}`).started(t)
	h.wantNoSample(t, inactive)
	h.wantNoSample(t, active)
	if h.runs.count() != 1 {
		t.Errorf("runs made = %d, want 1 (the active flow's)", h.runs.count())
	}
}

// TestTestTriggerWorkflow: the workflow builder test URL answers only while
// armed, with the live path's checks, once; it runs an INACTIVE flow and the
// sample keeps no credential.
func TestTestTriggerWorkflow(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	auth := `,"authentication":{"type":"HEADER","name":"X-Webhook-Secret","value":"s3cret-header-value"}`
	id := createFlow(t, h.api, h.key, workflowFlow("tests-wf", "POST", auth, "")).ID
	secret := "X-Webhook-Secret: s3cret-header-value"

	call(t, h.workflow, "POST", "/webhook-test/tests-wf", "", `{"a":1}`, secret).wantError(t, 404, "")
	call(t, h.workflow, "POST", "/webhook/tests-wf", "", `{"a":1}`, secret).wantError(t, 404, "")

	armed := h.arm(t, id)
	if armed.TestURL != "http://workflow.test/webhook-test/tests-wf" {
		t.Errorf("testUrl = %q", armed.TestURL)
	}
	// The live path stays closed for an inactive flow; the checks of the
	// live path hold on the test URL and do not use up the arming.
	call(t, h.workflow, "POST", "/webhook/tests-wf", "", `{"a":1}`, secret).wantError(t, 404, "")
	call(t, h.workflow, "POST", "/webhook-test/tests-wf", "", `{"a":1}`).wantError(t, 401, "UNAUTHORIZED")
	call(t, h.workflow, "POST", "/webhook-test/tests-wf", "", `{"a":1}`, "X-Webhook-Secret: wrong").wantError(t, 401, "UNAUTHORIZED")
	r := call(t, h.workflow, "GET", "/webhook-test/tests-wf", "", "", secret)
	r.wantError(t, 405, "METHOD_NOT_ALLOWED")
	call(t, h.workflow, "POST", "/webhook-test/other-path", "", `{"a":1}`, secret).wantError(t, 404, "")
	if h.runs.count() != 0 {
		t.Fatalf("refused calls made %d runs", h.runs.count())
	}

	runID := call(t, h.workflow, "POST", "/webhook-test/tests-wf?x=1", "", `{"order":{"id":7,"items":[{"sku":"a","qty":2}]}}`, secret).started(t)
	call(t, h.workflow, "POST", "/webhook-test/tests-wf", "", `{"again":true}`, secret).wantError(t, 404, "")
	drain(t, h.svc, h.runs)
	if run := h.run(t, id, runID); run.Status != automation.RunSucceeded {
		t.Errorf("run %s: %s %s", runID, run.Status, run.Error)
	}
	if h.runs.count() != 1 {
		t.Errorf("runs made = %d, want 1", h.runs.count())
	}
	s, raw := h.sample(t, id)
	if s.Trigger.Path != "/webhook-test/tests-wf" || s.Trigger.Query["x"] != "1" ||
		compactJSON(t, s.Trigger.Body) != `{"order":{"id":7,"items":[{"qty":2,"sku":"a"}]}}` {
		t.Errorf("trigger = %+v", s.Trigger)
	}
	want := `{"type":"object","properties":{"order":{"type":"object","properties":{"id":{"type":"integer"},` +
		`"items":{"type":"array","items":{"type":"object","properties":{"qty":{"type":"integer"},"sku":{"type":"string"}}}}}}}}`
	if string(s.Schema) != want {
		t.Errorf("schema\n got %s\nwant %s", s.Schema, want)
	}
	if strings.Contains(raw, "s3cret-header-value") || strings.Contains(strings.ToLower(raw), "x-webhook-secret") {
		t.Errorf("the sample holds the authentication header: %s", raw)
	}

	// Enabled, the flow answers on its live path without capturing.
	var f flowView
	call(t, h.api, "POST", "/api/v1/flows/"+id+"/enable", h.key, "").into(t, 200, &f)
	call(t, h.workflow, "POST", "/webhook/tests-wf", "", `{"live":true}`, secret).started(t)
	call(t, h.workflow, "POST", "/webhook-test/tests-wf", "", `{"a":1}`, secret).wantError(t, 404, "")
	if again, _ := h.sample(t, id); compactJSON(t, again.Trigger.Body) != compactJSON(t, s.Trigger.Body) {
		t.Errorf("the live path replaced the sample: %s", again.Trigger.Body)
	}
}

// TestTestTriggerScope: other projects, unknown and schedule flows.
func TestTestTriggerScope(t *testing.T) {
	h := newHookEnv(t, HookConfig{})
	id := createFlow(t, h.api, h.key, flowBuilderBody).ID
	sched := createFlow(t, h.api, h.key, scheduleBody).ID
	other := newProjectKey(t, h.api, automation.PlanTeam)

	for _, path := range []string{"/webhook/test", "/webhook/sample"} {
		method := "POST"
		if strings.HasSuffix(path, "sample") {
			method = "GET"
		}
		t.Run(method+" "+path, func(t *testing.T) {
			call(t, h.api, method, "/api/v1/flows/"+id+path, other, "").wantError(t, 404, "FLOW_NOT_FOUND")
			call(t, h.api, method, "/api/v1/flows/flw_unknown"+path, h.key, "").wantError(t, 404, "FLOW_NOT_FOUND")
			call(t, h.api, method, "/api/v1/flows/"+sched+path, h.key, "").wantError(t, 409, "NOT_A_WEBHOOK_FLOW")
			call(t, h.api, method, "/api/v1/flows/"+id+path, "", "").wantError(t, 401, "")
		})
	}
	// Another project's key neither armed the flow nor sees its sample.
	call(t, h.engine, "POST", "/api/v1/webhooks/"+id, "", `{}`).wantError(t, 404, "FLOW_INACTIVE")
	h.arm(t, id)
	call(t, h.engine, "POST", "/api/v1/webhooks/"+id, "", `{"mine":true}`).started(t)
	call(t, h.api, "GET", "/api/v1/flows/"+id+"/webhook/sample", other, "").wantError(t, 404, "FLOW_NOT_FOUND")

	// Deleting the flow deletes its sample.
	call(t, h.api, "DELETE", "/api/v1/flows/"+id, h.key, "")
	call(t, h.api, "GET", "/api/v1/flows/"+id+"/webhook/sample", h.key, "").wantError(t, 404, "FLOW_NOT_FOUND")
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
