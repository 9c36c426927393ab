package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowdef"
)

// APPROVAL steps and WAIT for a callback (docs/flows.md): a waitpoint the
// domain keeps (automation/waitpoint.go). The first execution opens it,
// runs the notify steps with the links in scope, and records {"waiting":
// true, "expiresAt"}, which parks the run until the expiry (list); the
// attempt that resumes the run (woken by the decision, or at the expiry)
// executes the step again, reads the waitpoint and outputs the decision,
// or waits on.

// isWaitpoint reports whether s waits on a waitpoint.
func isWaitpoint(s automation.Step) bool {
	return s.Type == automation.StepApproval || s.Type == automation.StepWait && s.For == flowdef.WaitForCallback
}

// waitpoint runs s, an APPROVAL or a WAIT for a callback.
//
//lint:ignore ST1008 the listEnd after the error says how the notify steps ended the list
func (x *execution) waitpoint(ctx context.Context, s automation.Step, sr *automation.StepResult, iter string) (any, error, listEnd) {
	if x.e.waitpoints == nil {
		return nil, &stepError{msg: string(s.Type) + " steps are not available in this deployment"}, listEnd{}
	}
	key := journalKey(s.Name, iter)
	prev := x.sh.previous[key]
	if _, waiting := automation.WaitingPoint(prev); waiting && prev.Type == s.Type {
		// Resumed: each claim that looks at the waitpoint counts, none as
		// a retry (automation.failedAttempts).
		x.locked(func() { sr.Steps, sr.Attempts = cloneResults(prev.Steps), prev.Attempts+1 })
		w, err := x.e.waitpoints.ResolveWaitpoint(ctx, x.flow.Project, x.run.ID, key)
		switch {
		case automation.IsNotFound(err):
			return nil, &stepError{msg: "the record of this wait is gone"}, listEnd{}
		case err != nil:
			x.e.log.WarnContext(ctx, "read waitpoint", "run", x.run.ID, "step", s.Name, "err", err)
			return nil, &stepError{msg: "the wait could not be read; the run will be retried", retryable: true}, listEnd{}
		case w.Decided():
			return w.Outcome(), nil, listEnd{}
		}
		return waitingOutput(w), nil, listEnd{}
	}
	x.locked(func() { sr.Attempts = 1 })
	spec := automation.WaitpointSpec{Project: x.flow.Project, RunID: x.run.ID, FlowID: x.flow.ID, FlowName: x.flow.Name,
		Step: key, Kind: automation.WaitCallback, Attempt: x.run.Attempts}
	timeout, err := s.WaitTimeout()
	if err != nil {
		return nil, fail(false, err), listEnd{}
	}
	spec.Timeout = timeout
	if s.Type == automation.StepApproval {
		spec.Kind, spec.Form, spec.Approvals = automation.WaitApproval, s.Form, max(s.Approvals, 1)
		if s.Approvers != nil {
			spec.Roles, spec.Emails = s.Approvers.Roles, s.Approvers.Emails
		}
		title, err := x.e.checker.evalText(s.Title, x.env)
		if err != nil {
			return nil, fail(false, fmt.Errorf("title: %w", err)), listEnd{}
		}
		if len(title) > flowdef.MaxTitleBytes {
			title = title[:flowdef.MaxTitleBytes]
		}
		spec.Title = title
	}
	w, links, err := x.e.waitpoints.OpenWaitpoint(ctx, spec)
	if err != nil {
		x.e.log.WarnContext(ctx, "open waitpoint", "run", x.run.ID, "step", s.Name, "err", err)
		return nil, &stepError{msg: "the wait could not be recorded; the run will be retried", retryable: true}, listEnd{}
	}
	if w.Decided() {
		// Answered while an earlier attempt ran the notify steps.
		return w.Outcome(), nil, listEnd{}
	}
	if len(s.Notify) > 0 {
		if end := x.notify(ctx, s, sr, w, links); end.err != nil || end.interrupted || end.journalErr != nil {
			if end.err != nil {
				return nil, &stepError{msg: "notify step " + end.step + ": " + end.err.msg, retryable: end.err.retryable}, listEnd{}
			}
			return nil, &stepError{msg: "notify step " + end.step + " did not finish", retryable: true}, end
		}
	}
	return waitingOutput(w), nil, listEnd{}
}

// notify runs s's notify steps with the links in scope: `approval` (url,
// approveUrl, rejectUrl, expiresAt) or `wait` (callbackUrl, expiresAt).
// Each attempt that opens the waitpoint has a new token, so its notify
// steps run again (their journal keys and Idempotency-Keys carry the
// attempt), and the links they send are the valid ones.
func (x *execution) notify(ctx context.Context, s automation.Step, sr *automation.StepResult, w automation.Waitpoint, links automation.WaitpointLinks) listEnd {
	y := *x
	y.env = maps.Clone(x.env)
	y.logs = nil
	expires := w.ExpiresAt.UTC().Format(time.RFC3339)
	if s.Type == automation.StepApproval {
		y.env["approval"] = map[string]any{"url": links.URL, "approveUrl": links.ApproveURL, "rejectUrl": links.RejectURL, "expiresAt": expires}
	} else {
		y.env["wait"] = map[string]any{"callbackUrl": links.CallbackURL, "expiresAt": expires}
	}
	if x.iter == "" {
		y.iter = "a" + strconv.Itoa(x.run.Attempts)
	} else {
		y.iter = x.iter + ".a" + strconv.Itoa(x.run.Attempts)
	}
	results := pending(s.Notify)
	x.locked(func() { sr.Steps = results })
	end := y.list(ctx, s.Notify, results, y.iter, false)
	x.logs = append(x.logs, y.logs...)
	return end
}

// waitingOutput is the recorded output of a step that waits on w.
func waitingOutput(w automation.Waitpoint) map[string]any {
	return map[string]any{"waiting": true, "expiresAt": w.ExpiresAt.UTC().Format(time.RFC3339Nano)}
}

// waitUntil is the time a WAIT with "until" waits for: its expression's
// value, an RFC 3339 time (a past one does not wait), at most MaxWait on.
func (x *execution) waitUntil(s automation.Step) (time.Time, error) {
	v, err := x.e.checker.evalExpr(s.Until, x.env)
	if err != nil {
		return time.Time{}, fmt.Errorf("until: %w", err)
	}
	var t time.Time
	switch u := v.(type) {
	case string:
		t, err = time.Parse(time.RFC3339Nano, u)
		if err != nil {
			return time.Time{}, fmt.Errorf("until: %q is not an RFC 3339 time such as \"2025-01-31T09:00:00Z\"", clipText(u))
		}
	case time.Time:
		t = u
	default:
		b, _ := json.Marshal(v)
		return time.Time{}, fmt.Errorf("until: %s is not an RFC 3339 time such as \"2025-01-31T09:00:00Z\"", clipText(string(b)))
	}
	now := x.e.clock()
	if t.Sub(now) > automation.MaxWait {
		return time.Time{}, fmt.Errorf("until: %s is more than %s away", t.UTC().Format(time.RFC3339), automation.MaxWait)
	}
	if t.Before(now) {
		t = now
	}
	return t, nil
}

func clipText(s string) string { return flowdef.ClipID(s) }
