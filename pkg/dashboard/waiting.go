package dashboard

import (
	"net/http"
	"net/url"

	"flowservice/pkg/automation"
)

// waitHint says in words what a waiting run waits for (Run.WaitingFor),
// so the run page explains why a RUNNING run is not executing.
func waitHint(w automation.WaitReason) string {
	switch w {
	case automation.WaitingConcurrency:
		return "the flow's concurrency limit: it starts when a run holding its slot ends"
	case automation.WaitingThrottle:
		return "the flow's throttle: it starts when the period allows another start"
	case automation.WaitingQuota:
		return "the project's concurrentRuns quota: it starts when another run of the project ends"
	case automation.WaitingWait:
		return "a WAIT step, or a flow a CALL_FLOW step called"
	case automation.WaitingRetry:
		return "the backoff before its next attempt"
	}
	return ""
}

// confirmCancelRun asks before cancelling a waiting run (a page, so that
// it works without script): a cancel cannot be undone.
func (d *Dashboard) confirmCancelRun(w http.ResponseWriter, r *http.Request) {
	ctx, p := r.Context(), project(r)
	f, err := d.svc.Flow(ctx, p, r.PathValue("flowId"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	run, err := d.svc.Run(ctx, p, f.ID, r.PathValue("runId"))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	back := "/flows/" + f.ID + "/runs/" + run.ID
	d.render(w, r, http.StatusOK, "confirm_delete", view{Title: "Cancel run " + run.ID, Nav: "flows", Data: deletion{
		Crumbs:  []crumb{{"/flows", "Flows"}, {"/flows/" + f.ID, f.Name}, {back, "Run"}},
		Heading: "Cancel this waiting run?",
		Name:    run.ID, ID: run.ID, Before: "The run ",
		After:  " ends FAILED with the error CANCELLED: the steps after its wait never run, and its onError steps do not run either. Flows it called go on.",
		Action: back + "/cancel", Button: "Cancel run", Cancel: back,
	}})
}

// cancelRun ends a run waiting at a WAIT step or for a flow it called
// (automation.RunService.CancelRun).
func (d *Dashboard) cancelRun(w http.ResponseWriter, r *http.Request) {
	flowID, runID := r.PathValue("flowId"), r.PathValue("runId")
	if _, err := d.svc.CancelRun(r.Context(), project(r), flowID, runID); err != nil {
		d.fail(w, r, err)
		return
	}
	d.redirect(w, r, "/ui/flows/"+url.PathEscape(flowID)+"/runs/"+url.PathEscape(runID)+"?done=cancelled")
}
