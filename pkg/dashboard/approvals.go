package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowdef"
)

// The approvals inbox: the project's pending approvals (the same listing
// as GET /api/v1/approvals), each with its form and Approve/Reject, decided
// through the same domain call as POST /api/v1/runs/{runId}/approvals/{step},
// recorded as via "dashboard". Only roles that may decide see it.

func (d *Dashboard) approvalRoutes() {
	d.mux.Handle("GET /ui/approvals", d.auth(d.approvalsPage))
	d.mux.Handle("POST /ui/approvals/{runId}/{step}", d.auth(d.decideApproval))
}

// inboxItem is one pending approval with its form's fields.
type inboxItem struct {
	automation.ApprovalItem
	Fields   []flowdef.FormField
	Approved int    // approvals recorded so far
	Anchor   string // the item's id in the page
}

func (d *Dashboard) approvalsPage(w http.ResponseWriter, r *http.Request) {
	d.renderApprovals(w, r, http.StatusOK, notice(r), "")
}

func (d *Dashboard) renderApprovals(w http.ResponseWriter, r *http.Request, status int, note, errMsg string) {
	pr := pageRequest(r)
	pr.Status = automation.WaitpointPending
	l, err := d.svc.ListApprovals(r.Context(), project(r), pr)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	items := make([]inboxItem, 0, len(l.Data))
	for _, a := range l.Data {
		it := inboxItem{ApprovalItem: a, Anchor: approvalAnchor(a.RunID, a.Step)}
		if fs, err := flowdef.ParseFormSchema(a.Form); len(a.Form) > 0 && err == nil {
			it.Fields = fs.Fields
		}
		for _, dc := range a.Decisions {
			if dc.Decision == automation.DecisionApproved {
				it.Approved++
			}
		}
		items = append(items, it)
	}
	var next *string
	if l.Cursor != nil {
		next = l.Cursor
	}
	d.render(w, r, status, "approvals", view{Title: "Approvals", Nav: "approvals", Notice: note, Error: errMsg, Data: struct {
		Items []inboxItem
		Pager pager
		URL   string
	}{items, newPager(r, nil, next), d.base(r) + "/approvals"}})
}

// approvalAnchor names an approval in the inbox page (#approval-<run>-<step>).
func approvalAnchor(runID, step string) string { return "approval-" + runID + "-" + step }

// decideApproval records the signed-in principal's answer.
func (d *Dashboard) decideApproval(w http.ResponseWriter, r *http.Request) {
	runID, step := r.PathValue("runId"), r.PathValue("step")
	s := sessionOf(r.Context())
	in := automation.ApprovalAnswer{Decision: r.PostFormValue("decision"), Via: automation.ViaDashboard}
	if s.principal.Email != "" {
		in.By = s.principal.Email
	}
	// The form's fields come as text; the approval's schema reads them
	// into values (a rejection may leave them out).
	text, filled := map[string]string{}, false
	for k, v := range r.PostForm {
		if k != "decision" && k != "csrf" && len(v) > 0 {
			text[k] = v[0]
			filled = filled || v[0] != ""
		}
	}
	if form := d.pendingForm(r, runID, step); len(form) > 0 && (in.Decision != "reject" || filled) {
		fs, err := flowdef.ParseFormSchema(form)
		if err == nil {
			in.Values, err = fs.FromText(text)
		}
		if err != nil {
			d.renderApprovals(w, r, http.StatusBadRequest, "", "The form of "+step+": "+err.Error())
			return
		}
	}
	if _, err := d.svc.DecideApproval(r.Context(), s.principal, runID, step, in); err != nil {
		var ad *automation.AlreadyDecided
		if errors.As(err, &ad) {
			d.renderApprovals(w, r, http.StatusConflict, "", "This approval was decided already: "+ad.Waitpoint.Decision+".")
			return
		}
		status, msg := d.problem(r, err)
		d.renderApprovals(w, r, status, "", msg)
		return
	}
	done := "approved"
	if in.Decision == "reject" {
		done = "rejected"
	}
	d.redirect(w, r, "/ui/approvals?done="+done)
}

// inboxPages bounds how many pages of pending approvals the dashboard
// reads to find one (a form's schema, a run's approval): 3 pages of 100.
const inboxPages = 3

// pendingApproval finds the pending approval of (runID, step) ("" step:
// the run's first), among the first inboxPages pages.
func (d *Dashboard) pendingApproval(r *http.Request, runID, step string) (automation.ApprovalItem, bool) {
	pr := automation.PageRequest{Status: automation.WaitpointPending, Limit: "100"}
	for range inboxPages {
		l, err := d.svc.ListApprovals(r.Context(), project(r), pr)
		if err != nil {
			return automation.ApprovalItem{}, false
		}
		for _, a := range l.Data {
			if a.RunID == runID && (step == "" || a.Step == step) {
				return a, true
			}
		}
		if l.Cursor == nil || *l.Cursor == "" {
			break
		}
		pr.Cursor = *l.Cursor
	}
	return automation.ApprovalItem{}, false
}

func (d *Dashboard) pendingForm(r *http.Request, runID, step string) json.RawMessage {
	a, _ := d.pendingApproval(r, runID, step)
	return a.Form
}

// runApprovalLink is where the run page sends a decider: the inbox, at
// the approval.
func runApprovalLink(a automation.ApprovalItem) string {
	return "/approvals#" + url.PathEscape(approvalAnchor(a.RunID, a.Step))
}
