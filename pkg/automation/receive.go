package automation

import "context"

// The run starts of accepted deliveries (accept.go): a delivery to a
// flow's webhook URL, which an armed Test Trigger captures as the flow's
// sample first (sample.go), and a test delivery (the workflow builder test
// URL, the owner's test event), which runs the flow's draft. The in-memory
// path of flows without side effects is in pure.go.

// receive starts the run of a delivery to a flow's live webhook URL (once
// the one-commit path, runPure, declined it). For a flow builder flow with
// an armed Test Trigger it first captures the delivery as the flow's
// sample; an INACTIVE flow (which WebhookFlow lets through only while
// armed) accepts exactly the delivery that takes the capture, and is a 404
// otherwise.
//
// The run of an ON_COMPLETION flow is for the receiver to execute: where
// the queue offers it (RunRuntime.Inline) it comes back claimed by the
// receiver's attempt (Run.LeaseToken set), for AwaitRun; no worker takes
// it before its lease runs out.
func (s *RunService) receive(ctx context.Context, f Flow, td TriggerData) (Run, error) {
	if f.Engine == FlowBuilder {
		taken, err := s.flows.capture(ctx, f, td)
		switch {
		case err != nil && f.Status != FlowActive:
			return Run{}, err
		case err != nil:
			// A live flow keeps working when its Test Trigger cannot be read.
			s.log.WarnContext(ctx, "capture webhook sample", "flow", f.ID, "err", err)
		case !taken && f.Status != FlowActive:
			// Another delivery took the capture, or it expired since.
			return Run{}, InactiveFlow(f.ID)
		case taken:
			return s.startTestRun(ctx, f, td) // the Test Trigger's event tries the draft
		}
	} else if f.Status != FlowActive {
		return Run{}, NotFound("flow", f.ID)
	}
	return s.startRunOf(ctx, f, td, executesInline(f), nil)
}

// receiveTest captures a test delivery as the flow's sample and runs the
// flow, even while it is INACTIVE. One delivery per arming gets through;
// the others are a 404. An ON_COMPLETION flow's run comes back claimed for
// AwaitRun, as from receive.
func (s *RunService) receiveTest(ctx context.Context, f Flow, td TriggerData) (Run, error) {
	if f.Trigger.Type != TriggerWebhook {
		return Run{}, NotFound("flow", f.ID)
	}
	taken, err := s.flows.capture(ctx, f, td)
	if err != nil {
		return Run{}, err
	}
	if !taken {
		return Run{}, NotFound("flow", f.ID)
	}
	return s.startTestRun(ctx, f, td)
}

// startTestRun starts the run of a test delivery (the workflow builder
// test URL, the event an armed Test Trigger takes): a flow with a draft
// runs the draft, as it is now, whatever is saved or published later
// (Run.DraftDefinition); one without runs its live version.
func (s *RunService) startTestRun(ctx context.Context, f Flow, td TriggerData) (Run, error) {
	if !f.HasDraft {
		return s.startRunOf(ctx, f, td, executesInline(f), nil)
	}
	d, err := s.store.Draft(ctx, f.Project, f.ID)
	if IsNotFound(err) { // published or discarded since the flow was read
		return s.startRunOf(ctx, f, td, executesInline(f), nil)
	} else if err != nil {
		return Run{}, wrap("read draft", err)
	}
	def := d.Definition
	g := f
	def.ApplyTo(&g)
	return s.startRunOf(ctx, g, td, executesInline(g), &def)
}
