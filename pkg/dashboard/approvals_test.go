package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// TestApprovalsInbox: a run parked at an APPROVAL step shows it on its run
// page with a link to the inbox; the inbox lists it with its form; an
// answer that does not meet the form is a 400 naming the field; approving
// records the decision via "dashboard" and the run goes on. A viewer is
// offered neither the inbox nor its link, and is refused both.
func TestApprovalsInbox(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	f := e.flow(t, e.p, "Refunds",
		automation.Step{Name: "approve", Type: automation.StepApproval, Title: "Refund 42?", Approvals: 1,
			Form: json.RawMessage(`{"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number", "description": "How much"}, "note": {"type": "string"}}}`)},
		automation.Step{Name: "after", Type: automation.StepSet, Values: json.RawMessage(`{"done": "{{ steps.approve.decision }}"}`)})
	if _, err := e.svc.EnableFlow(ctx, e.p, f.ID); err != nil {
		t.Fatal(err)
	}
	wf, err := e.svc.WebhookFlow(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	r, err := receiveWebhook(ctx, e.svc, wf, automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + f.ID, Body: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	e.svc.ExecuteRun(ctx, e.p.ID, r.ID) // parks at the approval
	if r, err = e.svc.Run(ctx, e.p, f.ID, r.ID); err != nil || r.WaitingFor != automation.WaitingApproval {
		t.Fatalf("run %s waiting for %q (%v), want APPROVAL", r.ID, r.WaitingFor, err)
	}

	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	wantPage(t, b.get("/ui/flows"), http.StatusOK, `href="/ui/approvals"`)
	wantPage(t, b.get("/ui/flows/"+f.ID+"/runs/"+r.ID), http.StatusOK, "Waiting for approval:</strong> Refund 42?",
		`href="/ui/approvals#approval-`+r.ID+`-approve"`)
	inbox := b.get("/ui/approvals")
	wantPage(t, inbox, http.StatusOK, `<h2>Refund 42?</h2>`, `id="approval-`+r.ID+`-approve"`, `name="amount"`, "How much",
		`action="/ui/approvals/`+r.ID+`/approve"`, `value="approve">Approve</button>`, `value="reject"`)

	bad := b.post("/ui/approvals", "/ui/approvals/"+r.ID+"/approve", url.Values{"decision": {"approve"}, "amount": {"lots"}})
	wantPage(t, bad, http.StatusBadRequest, "amount")
	ok := b.post("/ui/approvals", "/ui/approvals/"+r.ID+"/approve", url.Values{"decision": {"approve"}, "amount": {"12.5"}, "note": {""}})
	wantRedirect(t, ok, "/ui/approvals?done=approved")
	wantPage(t, b.get("/ui/approvals?done=approved"), http.StatusOK, "Approved: the run goes on", "No approval is waiting.")
	again := b.post("/ui/flows", "/ui/approvals/"+r.ID+"/approve", url.Values{"decision": {"approve"}, "amount": {"1"}})
	if again.status != http.StatusConflict && again.status != http.StatusNotFound {
		t.Errorf("a second decision: %d, want 409 or 404\n%s", again.status, again.body)
	}

	l, err := e.svc.ListApprovals(ctx, e.p, automation.PageRequest{Status: automation.WaitpointDecided})
	if err != nil || len(l.Data) != 1 {
		t.Fatalf("decided approvals: %v %+v", err, l.Data)
	}
	d := l.Data[0]
	if d.Decision != automation.DecisionApproved || len(d.Decisions) != 1 || d.Decisions[0].Via != automation.ViaDashboard {
		t.Errorf("decision recorded: %+v, want approved via dashboard", d)
	}
	e.svc.ExecuteRun(ctx, e.p.ID, r.ID) // the decision made it due
	if r, err = e.svc.Run(ctx, e.p, f.ID, r.ID); err != nil || r.Status != automation.RunSucceeded {
		t.Fatalf("after the approval the run is %s (%v), want SUCCEEDED", r.Status, err)
	}
	if out := string(r.Steps[len(r.Steps)-1].Output); !strings.Contains(out, "approved") {
		t.Errorf("the step after the approval read %s", out)
	}

	viewer, _ := e.roleKey(t, automation.RoleViewer)
	vb := e.browser(t)
	wantRedirect(t, vb.signin(viewer), "/ui/flows")
	if p := vb.get("/ui/flows"); strings.Contains(p.body, `href="/ui/approvals"`) {
		t.Error("a viewer is offered the approvals inbox")
	}
	wantPage(t, vb.get("/ui/approvals"), http.StatusForbidden, "viewer")
}
