package automation_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowdef"
)

// An APPROVAL parks its run until its timeout; an answer after the expiry
// finds nothing, and the attempt at the expiry decides "timeout" without
// failing the step. One decided through the API before the expiry resumes
// with "approved", and a second answer is ALREADY_DECIDED with it.
func TestApprovalTimeoutAndDecision(t *testing.T) {
	clock := newTestClock()
	e := newEnv(t, automation.RunPolicy{}, clock.now)
	ctx := context.Background()
	f := e.ActiveFlow(t, e.project, "asks", automation.Step{Name: "ok", Type: automation.StepApproval, Title: "go?", Timeout: "1m"},
		automation.Step{Name: "after", Type: automation.StepSet, Values: json.RawMessage(`{"d": "{{ steps.ok.decision }}"}`)})
	pr := automation.Principal{Project: e.project, KeyID: "k1", Role: automation.RoleOperator}

	r := e.start1(t, f)
	at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if at.Outcome != automation.OutcomeRetry || at.Run.WaitingFor != automation.WaitingApproval || !at.RetryAt.Equal(clock.now().Add(time.Minute).Truncate(time.Millisecond)) {
		t.Fatalf("first attempt = %v waiting %q until %v", at.Outcome, at.Run.WaitingFor, at.RetryAt)
	}
	clock.set(at.RetryAt)
	if _, err := e.svc.DecideApproval(ctx, pr, r.ID, "ok", automation.ApprovalAnswer{Decision: "approve"}); !automation.IsNotFound(err) {
		t.Fatalf("answer at the expiry = %v, want not found", err)
	}
	at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded || string(at.Run.Steps[1].Output) != `{"d":"timeout"}` {
		t.Fatalf("at the expiry = %s %v %s", at.Run.Status, err, at.Run.Steps[1].Output)
	}

	r = e.start1(t, f)
	if at, _ = e.svc.ExecuteRun(ctx, r.Project, r.ID); at.Outcome != automation.OutcomeRetry {
		t.Fatalf("second run's first attempt = %v", at.Outcome)
	}
	if _, err := e.svc.DecideApproval(ctx, automation.Principal{Project: e.project, KeyID: "v", Role: automation.RoleViewer}, r.ID, "ok",
		automation.ApprovalAnswer{Decision: "approve"}); !errors.Is(err, automation.ErrForbidden) {
		t.Fatalf("a viewer's answer = %v, want forbidden", err)
	}
	if _, err := e.svc.DecideApproval(ctx, pr, r.ID, "ok", automation.ApprovalAnswer{Decision: "approve"}); err != nil {
		t.Fatal(err)
	}
	w, err := e.svc.DecideApproval(ctx, automation.Principal{Project: e.project, KeyID: "k2", Role: automation.RoleAdmin}, r.ID, "ok",
		automation.ApprovalAnswer{Decision: "reject"})
	var ad *automation.AlreadyDecided
	if !errors.As(err, &ad) || w.Decision != automation.DecisionApproved {
		t.Fatalf("second answer = %v (%+v), want ALREADY_DECIDED with approved", err, w)
	}
	clock.advance(time.Second) // woken now, long before the expiry
	at, err = e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded || string(at.Run.Steps[1].Output) != `{"d":"approved"}` {
		t.Fatalf("after the decision = %s %v %+v", at.Run.Status, err, at.Run.Steps)
	}
}

// WAIT "until" waits for the time its expression gives.
func TestWaitUntil(t *testing.T) {
	clock := newTestClock()
	e := newEnv(t, automation.RunPolicy{}, clock.now)
	ctx := context.Background()
	f := e.ActiveFlow(t, e.project, "until", automation.Step{Name: "w", Type: automation.StepWait, Until: `"` + clock.now().Add(2*time.Hour).UTC().Format(time.RFC3339) + `"`})
	r := e.start1(t, f)
	at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if at.Outcome != automation.OutcomeRetry || !at.RetryAt.Equal(clock.now().Add(2*time.Hour).Truncate(time.Second)) {
		t.Fatalf("attempt = %v until %v", at.Outcome, at.RetryAt)
	}
}

// TestApproversEmailsAndDistinctPeople: approvers.emails lets the people
// it names decide besides approvers.roles; a project key of another role
// and a person not named may not. A person is one decider, whichever of
// their personal keys or sessions answers; the run needs two people.
func TestApproversEmailsAndDistinctPeople(t *testing.T) {
	clock := newTestClock()
	e := newEnv(t, automation.RunPolicy{}, clock.now)
	ctx := context.Background()
	f := e.ActiveFlow(t, e.project, "asks", automation.Step{Name: "ok", Type: automation.StepApproval, Title: "go?", Approvals: 2,
		Approvers: &flowdef.Approvers{Roles: []string{"editor"}, Emails: []string{"ada@example.com"}}},
		automation.Step{Name: "after", Type: automation.StepSet, Values: json.RawMessage(`{"d": "{{ steps.ok.decision }}"}`)})
	adaID := invite(t, e.svc, e.project, "Ada@Example.com", automation.RoleOperator)
	bobID := invite(t, e.svc, e.project, "bob@example.com", automation.RoleOperator)
	carolID := invite(t, e.svc, e.project, "carol@example.com", automation.RoleEditor)
	ada := automation.Principal{Project: e.project, Role: automation.RoleOperator, UserID: adaID, Email: "ada@example.com"}
	bob := automation.Principal{Project: e.project, Role: automation.RoleOperator, UserID: bobID, Email: "bob@example.com"}
	carol := automation.Principal{Project: e.project, Role: automation.RoleEditor, UserID: carolID, Email: "carol@example.com"}
	keyOf := func(pr automation.Principal) automation.Principal {
		t.Helper()
		secret, _, err := e.svc.CreatePersonalKey(ctx, pr, "")
		if err != nil {
			t.Fatal(err)
		}
		kp, err := e.svc.AuthenticatePrincipal(ctx, secret)
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	adaKey1, adaKey2 := keyOf(ada), keyOf(ada)
	projectKey := automation.Principal{Project: e.project, KeyID: "key_ops", Role: automation.RoleOperator}

	r := e.start1(t, f)
	if at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID); at.Run.WaitingFor != automation.WaitingApproval {
		t.Fatalf("first attempt = %v waiting %q", at.Outcome, at.Run.WaitingFor)
	}
	approve := automation.ApprovalAnswer{Decision: "approve"}
	for name, pr := range map[string]automation.Principal{"an operator's project key": projectKey, "bob, not named": bob} {
		if _, err := e.svc.DecideApproval(ctx, pr, r.ID, "ok", approve); !errors.Is(err, automation.ErrForbidden) {
			t.Fatalf("%s: %v, want forbidden", name, err)
		}
	}
	w, err := e.svc.DecideApproval(ctx, adaKey1, r.ID, "ok", approve)
	if err != nil || w.Decided() || len(w.Decisions) != 1 || w.Decisions[0].By != "ada@example.com" {
		t.Fatalf("ada's first key = %+v, %v; want one answer by her email, not yet decided", w, err)
	}
	for name, pr := range map[string]automation.Principal{"ada's second key": adaKey2, "ada's session": ada} {
		var ae *automation.Error
		if _, err := e.svc.DecideApproval(ctx, pr, r.ID, "ok", approve); !errors.As(err, &ae) || ae.Code != "ALREADY_ANSWERED" {
			t.Fatalf("%s: %v, want ALREADY_ANSWERED (one person, one decider)", name, err)
		}
	}
	w, err = e.svc.DecideApproval(ctx, carol, r.ID, "ok", approve)
	if err != nil || w.Decision != automation.DecisionApproved || len(w.Decisions) != 2 || w.Decisions[1].By != "carol@example.com" {
		t.Fatalf("carol (an editor) = %+v, %v; want the second person to decide", w, err)
	}
	clock.advance(time.Second)
	at, err := e.svc.ExecuteRun(ctx, r.Project, r.ID)
	if err != nil || at.Run.Status != automation.RunSucceeded || string(at.Run.Steps[1].Output) != `{"d":"approved"}` {
		t.Fatalf("after the decision = %s %v %+v", at.Run.Status, err, at.Run.Steps)
	}
}

// TestWaitpointsPurgedWithRuns: the retention purge removes a parked
// run's approval with the run (the inbox no longer lists it), and deleting
// a flow removes its runs' approvals.
func TestWaitpointsPurgedWithRuns(t *testing.T) {
	clock := newTestClock()
	e := newEnv(t, automation.RunPolicy{Retention: 48 * time.Hour}, clock.now)
	ctx := context.Background()
	ask := automation.Step{Name: "ok", Type: automation.StepApproval, Title: "go?", Timeout: "720h"}
	f := e.ActiveFlow(t, e.project, "asks", ask)
	g := e.ActiveFlow(t, e.project, "asks too", ask)
	park := func(f automation.Flow) automation.Run {
		t.Helper()
		r := e.start1(t, f)
		if at, _ := e.svc.ExecuteRun(ctx, r.Project, r.ID); at.Run.WaitingFor != automation.WaitingApproval {
			t.Fatalf("attempt = %v waiting %q", at.Outcome, at.Run.WaitingFor)
		}
		return r
	}
	pending := func() []string {
		t.Helper()
		l, err := e.svc.ListApprovals(ctx, e.project, automation.PageRequest{Limit: "50"})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, it := range l.Data {
			ids = append(ids, it.RunID)
		}
		return ids
	}
	old := park(f)
	clock.advance(24 * time.Hour)
	young := park(f)
	other := park(g)
	if got := pending(); len(got) != 3 {
		t.Fatalf("pending approvals = %v, want 3", got)
	}
	clock.advance(25 * time.Hour) // old is 49 h old, the others 25 h
	if n, err := e.svc.PurgeRuns(ctx); err != nil || n != 1 {
		t.Fatalf("PurgeRuns = %d, %v; want 1", n, err)
	}
	if got := pending(); len(got) != 2 || slices.Contains(got, old.ID) {
		t.Fatalf("after the purge: pending %v, want %s gone with its run", got, old.ID)
	}
	if _, err := e.svc.DecideApproval(ctx, automation.Principal{Project: e.project, KeyID: "k", Role: automation.RoleAdmin}, old.ID, "ok",
		automation.ApprovalAnswer{Decision: "approve"}); !automation.IsNotFound(err) {
		t.Fatalf("answer to a purged run's approval = %v, want not found", err)
	}
	if err := e.svc.DeleteFlow(ctx, e.project, g.ID); err != nil {
		t.Fatal(err)
	}
	if got := pending(); len(got) != 1 || got[0] != young.ID {
		t.Fatalf("after deleting a flow: pending %v, want only %s (%s went with its flow)", got, young.ID, other.ID)
	}
}
