package automation

import (
	"context"
	"errors"
	"unicode/utf8"

	"flowservice/pkg/flowdef"
)

// validateMeta checks the fields of a flow that need no definition.
func validateMeta(f *Flow) error {
	if err := checkText("name", f.Name, 200); err != nil {
		return err
	}
	if utf8.RuneCountInString(f.Description) > 2000 {
		return Invalid("description is longer than 2000 characters")
	}
	return nil
}

// validateFlow checks a whole flow, filling defaults in place. Messages name
// the field and what is allowed.
func (s *flowValidator) validateFlow(ctx context.Context, f *Flow) error {
	if f.Engine != FlowBuilder && f.Engine != WorkflowBuilder {
		return Invalid("engine %q: allowed values are %s, %s", f.Engine, FlowBuilder, WorkflowBuilder)
	}
	if err := validateMeta(f); err != nil {
		return err
	}
	if err := s.validateTrigger(f); err != nil {
		return err
	}
	if err := fromDef(flowdef.CheckInputSchema(&f.Trigger)); err != nil {
		return err
	}
	if err := s.validateFlowLimits(f); err != nil {
		return err
	}
	f.TriggerType = f.Trigger.Type
	if f.TriggerType == TriggerPoll {
		if err := s.validatePoll(ctx, f); err != nil {
			return err
		}
	}
	if f.Steps == nil {
		f.Steps = []Step{}
	}
	v := flowdef.Validator{
		Checks: s.checker,
		Before: func(st *Step, at string) error { return asDef(s.resolveStep(ctx, f, st, at)) },
		After:  func(st *Step, at string) error { return asDef(s.stepRefs(ctx, f, st, at)) },
	}
	return fromDef(v.Steps(f.Steps, f.OnError))
}

// asDef turns a domain validation error of a hook into the language's,
// so that the walker names the step in it; other errors pass unchanged.
func asDef(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Kind == ErrInvalid {
		return flowdef.Invalid("%s", e.Message)
	}
	return err
}

// fromDef turns a rule the definition breaks into the domain's 400.
func fromDef(err error) error {
	var e *flowdef.Error
	if errors.As(err, &e) {
		return Invalid("%s", e.Message)
	}
	return err
}

// resolveStep turns the names a portable document gives into this
// project's IDs, before the step's rules run.
func (s *flowValidator) resolveStep(ctx context.Context, f *Flow, st *Step, at string) error {
	if st.Type == StepCallFlow {
		return s.resolveCalledFlow(ctx, f, st, at) // portable.go
	}
	return nil
}

// stepRefs checks what a step's rules cannot: that the connection or flow
// it names is the project's, and that a script compiles where the backend
// can say.
func (s *flowValidator) stepRefs(ctx context.Context, f *Flow, st *Step, at string) error {
	switch st.Type {
	case StepHTTP:
		return s.connectionRef(ctx, f, st, at)
	case StepAction:
		if err := s.connectionRef(ctx, f, st, at); err != nil {
			return err
		}
		return s.checkAction(st, at)
	case StepSQL:
		return s.connectionKind(ctx, f, st, at, ConnectionPostgres, ConnectionMySQL)
	case StepEmail:
		return s.connectionKind(ctx, f, st, at, ConnectionSMTP)
	case StepMCP:
		return s.connectionKind(ctx, f, st, at, ConnectionMCP)
	case StepCode:
		// A script that does not compile would fail every run; say so now.
		if s.code != nil {
			if err := s.code.Code(st.Code); err != nil {
				return Invalid("%s.code: %v", at, err)
			}
		}
	case StepAI:
		return s.aiRefs(ctx, f, st, at) // ai.go
	case StepCallFlow:
		if st.FlowID != f.ID {
			if _, err := s.store.Flow(ctx, f.Project, st.FlowID); IsNotFound(err) {
				return Invalid("%s.flowId %q: this project has no flow with this ID", at, ClipID(st.FlowID))
			} else if err != nil {
				return wrap("check called flow", err)
			}
		}
	}
	return nil
}

// connectionRef checks that the connection an HTTP step names by ID is the
// project's.
func (s *flowValidator) connectionRef(ctx context.Context, f *Flow, st *Step, at string) error {
	if st.ConnectionID == "" {
		return nil
	}
	_, err := s.store.Connection(ctx, f.Project, st.ConnectionID)
	if errors.Is(err, ErrNotFound) {
		return Invalid("%s.connectionId %q: no such connection in this project", at, st.ConnectionID)
	} else if err != nil {
		return wrap("check connection", err)
	}
	return nil
}

func checkText(field, v string, max int) error { return fromDef(flowdef.CheckText(field, v, max)) }

func hasControl(s string) bool { return flowdef.HasControl(s) }

func isToken(s string) bool { return flowdef.IsToken(s) }

// MaxWebhookPath bounds a workflow builder path.
const MaxWebhookPath = flowdef.MaxWebhookPath

// ValidWebhookPath checks a workflow builder path (flowdef's rule), as a
// 400; the receivers apply the same rule to the paths they are asked for.
func ValidWebhookPath(p string) error { return fromDef(flowdef.ValidWebhookPath(p)) }

// validateTrigger checks a flow's trigger (flowdef's rules); a new workflow
// builder path is random.
func (s *flowValidator) validateTrigger(f *Flow) error {
	return fromDef(flowdef.CheckTrigger(s.checker, f.Engine, &f.Trigger, func() string { return randomToken(10) }))
}

// validateFlowLimits checks a flow's concurrency and throttle (flowdef's
// rules).
func (s *flowValidator) validateFlowLimits(f *Flow) error {
	var c flowdef.Checks
	if s.checker != nil {
		c = s.checker
	}
	return fromDef(flowdef.CheckLimits(c, f.Concurrency, f.Throttle))
}
