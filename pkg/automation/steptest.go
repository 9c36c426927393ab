package automation

import (
	"context"
	"encoding/json"
	"time"
)

// Trying one step of a flow alone, from the editor, without running the
// flow: the step goes through the executor that runs flows, so the
// project's outbound quota and the HTTP client's address guard apply to it
// as to a step of a run. Nothing is stored: no run, no journal, no sample.

// StepTestTimeout bounds one step test, whatever the step's own timeout.
const StepTestTimeout = 30 * time.Second

// StepTest is a step to try and the data it reads.
type StepTest struct {
	// FlowID is the flow the step belongs to ("" for a flow not saved
	// yet): its ID and name are in scope, and a secret the editor shows
	// masked is read from the flow's step of the same name.
	FlowID  string
	Engine  Engine
	Step    Step
	Trigger TriggerData
	// Outputs are the earlier steps' outputs the step may read
	// (steps.<name>), from the last run or earlier step tests.
	Outputs map[string]json.RawMessage
}

// TestStep runs t.Step alone and returns its result. A step that changes
// the flow's state or starts another run (STORE, CALL_FLOW, at any depth)
// is refused: a test event tries it in a run.
func (s *Service) TestStep(ctx context.Context, p Project, t StepTest) (StepResult, error) {
	if s.RunService.exec == nil {
		return StepResult{}, Invalid("steps cannot be tested here: this server runs no executor")
	}
	var refused StepType
	WalkSteps([]Step{t.Step}, func(st *Step) {
		if st.Type == StepStore || st.Type == StepCallFlow {
			refused = st.Type
		}
	})
	if refused != "" {
		return StepResult{}, Invalid("step: a %s step changes the flow's state or starts a run: try it with a test event of the whole flow", refused)
	}
	f := Flow{Project: p.ID, Name: "step test", Engine: t.Engine, Trigger: Trigger{Type: TriggerWebhook}}
	if f.Engine == "" {
		f.Engine = FlowBuilder
	}
	if f.Engine == WorkflowBuilder {
		f.Trigger.Webhook = &Webhook{HTTPMethod: "POST", Path: "step-test"}
	}
	step := CloneSteps([]Step{t.Step})
	if t.FlowID != "" {
		saved, err := s.Flow(ctx, p, t.FlowID)
		if err != nil {
			return StepResult{}, err
		}
		f.ID, f.Name = saved.ID, saved.Name
		if masked(step) {
			revealed, err := s.RevealFlow(ctx, saved)
			if err != nil {
				return StepResult{}, err
			}
			WalkSteps(append(revealed.Steps, revealed.OnError...), func(st *Step) {
				if st.Name == step[0].Name && st.Signature != nil && step[0].Signature != nil && step[0].Signature.Secret.Masked() {
					step[0].Signature.Secret = st.Signature.Secret
				}
			})
		}
	}
	check := f
	check.Steps = CloneSteps(step)
	if err := s.validateFlow(ctx, &check); err != nil {
		return StepResult{}, err
	}
	// The earlier steps stand as journaled results: the executor restores
	// their outputs into scope without executing them.
	now := s.FlowService.clock()
	run := Run{ID: "run_steptest", Project: p.ID, FlowID: f.ID, Status: RunRunning, Trigger: t.Trigger, Created: now}
	for name, out := range t.Outputs {
		if name == t.Step.Name || len(out) == 0 {
			continue
		}
		f.Steps = append(f.Steps, Step{Name: name, Type: StepSet})
		run.Steps = append(run.Steps, StepResult{Name: name, Type: StepSet, Status: StepSucceeded, FinishedAt: &now, Output: out})
	}
	f.Steps = append(f.Steps, check.Steps[0])
	ctx, cancel := context.WithTimeout(ctx, StepTestTimeout)
	defer cancel()
	ex := s.RunService.exec.ExecuteJournaled(ctx, f, run, nil)
	if len(ex.Run.Steps) == 0 {
		return StepResult{}, Invalid("step: it did not run")
	}
	res := ex.Run.Steps[len(ex.Run.Steps)-1]
	if res.Status == StepSkipped && res.FinishedAt == nil && ex.Run.Error != "" {
		res.Status, res.Error = StepFailed, ex.Run.Error // it never started: the run's error says why
	}
	return res, nil
}

// masked reports whether steps hold a secret shown masked.
func masked(steps []Step) bool {
	found := false
	WalkSteps(steps, func(st *Step) { found = found || st.Signature != nil && st.Signature.Secret.Masked() })
	return found
}
