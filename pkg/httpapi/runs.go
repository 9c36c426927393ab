package httpapi

import (
	"net/http"

	"flowservice/pkg/automation"
)

func (a *API) listRuns(w http.ResponseWriter, r *http.Request) {
	page, err := a.svc.ListRunsJSON(r.Context(), projectOf(r), r.PathValue("flowId"), pageRequest(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSONList(w, page)
}

func (a *API) getRun(w http.ResponseWriter, r *http.Request) {
	run, err := a.svc.Run(r.Context(), projectOf(r), r.PathValue("flowId"), r.PathValue("runId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

// retryRun answers 201 Created with the new run, RUNNING, and its URL in
// Location: a retry makes a new resource and leaves the old run as it was.
// Its body is optional: none is a retry from START with the same trigger.
func (a *API) retryRun(w http.ResponseWriter, r *http.Request) {
	var req automation.RetryRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	run, err := a.svc.RetryRun(r.Context(), projectOf(r), r.PathValue("flowId"), r.PathValue("runId"), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/flows/"+run.FlowID+"/runs/"+run.ID)
	writeJSON(w, http.StatusCreated, run)
}

// cancelRun ends a run waiting at a WAIT step or for a flow it called
// (automation.RunService.CancelRun): 200 with the run, now FAILED.
func (a *API) cancelRun(w http.ResponseWriter, r *http.Request) {
	run, err := a.svc.CancelRun(r.Context(), projectOf(r), r.PathValue("flowId"), r.PathValue("runId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

// Run search and replay across a project (docs/api.md, "Runs").

func (a *API) searchRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, err := a.svc.SearchRunsJSON(r.Context(), projectOf(r), automation.RunSearch{
		PageRequest: pageRequest(r), FlowID: q.Get("flowId"), Since: q.Get("since"), Until: q.Get("until"),
	})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSONList(w, page)
}

func (a *API) replayRuns(w http.ResponseWriter, r *http.Request) {
	var req automation.ReplayRequest
	if err := decode(w, r, &req); err != nil {
		a.fail(w, r, err)
		return
	}
	n, err := a.svc.ReplayRuns(r.Context(), projectOf(r), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, n)
}
