package automation

import (
	"context"
	"time"
)

// CaptureWindow is how long a Test Trigger stays armed: the next event
// received within it becomes the flow's sample.
const CaptureWindow = 120 * time.Second

// Sample is one event a Test Trigger captured: the trigger data exactly as
// the run records it (credentials the receiver checked are never in it) and
// the inferred structure of its body.
type Sample struct {
	CapturedAt time.Time   `json:"capturedAt"`
	Trigger    TriggerData `json:"trigger"`
	// Schema is inferred when the event is captured, from the whole body:
	// an adapter that must shorten a large body (dynamostore) still keeps
	// the schema of all of it.
	Schema *Schema `json:"schema"`
}

// Capture is a flow's Test Trigger state as a SampleStore keeps it.
type Capture struct {
	// ArmedUntil is when the armed capture expires; zero when none is
	// armed. A time in the past is expired: the Service compares it with
	// its clock.
	ArmedUntil time.Time
	// Sample is the latest captured event, nil before the first.
	Sample *Sample
}

// WebhookTest is the answer to arming a Test Trigger.
type WebhookTest struct {
	FlowID string `json:"flowId"`
	// TestURL is where the next event is captured: the flow's own webhook
	// URL for a flow builder flow, {workflow_url}/webhook-test/{path} for a
	// workflow builder flow.
	TestURL   string    `json:"testUrl"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// WebhookSample is a flow's captured sample as clients see it, with the
// state of its Test Trigger.
type WebhookSample struct {
	FlowID string `json:"flowId"`
	// Armed says whether a Test Trigger is waiting for the next event, which
	// will replace this sample; ExpiresAt is when it stops waiting.
	Armed      bool        `json:"armed"`
	ExpiresAt  *time.Time  `json:"expiresAt,omitempty"`
	CapturedAt time.Time   `json:"capturedAt"`
	Trigger    TriggerData `json:"trigger"`
	Schema     *Schema     `json:"schema"`
}

// ArmWebhookTest arms the Test Trigger of a webhook flow for CaptureWindow:
// the next event received is kept as the flow's sample. Arming again
// restarts the window.
func (s *FlowService) ArmWebhookTest(ctx context.Context, p Project, id string) (WebhookTest, error) {
	f, err := s.store.Flow(ctx, p.ID, id)
	if err != nil {
		return WebhookTest{}, wrap("arm webhook test", err)
	}
	if f.Trigger.Type != TriggerWebhook || f.Trigger.Webhook == nil {
		return WebhookTest{}, notWebhook(f)
	}
	until := s.clock().Add(CaptureWindow)
	if err := s.store.ArmCapture(ctx, p.ID, f.ID, until); err != nil {
		return WebhookTest{}, wrap("arm webhook test", err)
	}
	return WebhookTest{FlowID: f.ID, ExpiresAt: until, TestURL: WebhookURL(s.engineURL, s.workflowURL, f, true)}, nil
}

// WebhookSample returns the event a Test Trigger captured for the flow, or
// SAMPLE_NOT_FOUND before the first capture.
func (s *FlowService) WebhookSample(ctx context.Context, p Project, id string) (WebhookSample, error) {
	f, err := s.store.Flow(ctx, p.ID, id)
	if err != nil {
		return WebhookSample{}, wrap("get webhook sample", err)
	}
	if f.Trigger.Type != TriggerWebhook || f.Trigger.Webhook == nil {
		return WebhookSample{}, notWebhook(f)
	}
	c, err := s.store.Capture(ctx, p.ID, f.ID)
	if err != nil && !IsNotFound(err) {
		return WebhookSample{}, wrap("get webhook sample", err)
	}
	armed := c.ArmedUntil.After(s.clock())
	if c.Sample == nil {
		e := NotFound("sample", f.ID)
		e.Message = "flow " + f.ID + " has no captured sample yet: POST /api/v1/flows/" + f.ID +
			"/webhook/test, then send an event to the test URL"
		if armed {
			e.Message = "flow " + f.ID + " has no captured sample yet; its Test Trigger is waiting for an event until " +
				c.ArmedUntil.Format(time.RFC3339)
		}
		return WebhookSample{}, e
	}
	out := WebhookSample{FlowID: f.ID, Armed: armed, CapturedAt: c.Sample.CapturedAt,
		Trigger: c.Sample.Trigger, Schema: c.Sample.Schema}
	if armed {
		until := c.ArmedUntil
		out.ExpiresAt = &until
	}
	return out, nil
}

// armed reports whether the flow's Test Trigger waits for an event now.
func (s *FlowService) armed(ctx context.Context, f Flow) (bool, error) {
	until, err := s.store.ArmedUntil(ctx, f.Project, f.ID)
	if err != nil {
		return false, wrap("read test trigger", err)
	}
	return until.After(s.clock()), nil
}

// capture takes the flow's armed Test Trigger, if one holds now, and keeps
// td as its sample. It reports whether it took one. A sample that cannot be
// stored is logged: the event was accepted and still runs.
func (s *FlowService) capture(ctx context.Context, f Flow, td TriggerData) (bool, error) {
	now := s.clock()
	taken, err := s.store.TakeCapture(ctx, f.Project, f.ID, now)
	if err != nil || !taken {
		return false, wrap("take test trigger", err)
	}
	td.BodyDigest = "" // the receivers' own; a sample shows what steps see
	sample := Sample{CapturedAt: now, Trigger: td}
	if sample.Schema, err = InferSchema(td.Body); err != nil {
		// Receivers always pass JSON; the sample is still worth keeping.
		s.log.WarnContext(ctx, "infer sample schema", "flow", f.ID, "err", err)
	}
	if err := s.store.PutSample(ctx, f.Project, f.ID, sample); err != nil {
		s.log.ErrorContext(ctx, "store webhook sample", "flow", f.ID, "err", err)
	}
	return true, nil
}
