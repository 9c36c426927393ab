package httpapi

import (
	"net/http"
)

func (a *API) listRuns(w http.ResponseWriter, r *http.Request) {
	page, err := a.svc.ListRuns(r.Context(), projectOf(r), r.PathValue("flowId"), pageRequest(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
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
func (a *API) retryRun(w http.ResponseWriter, r *http.Request) {
	run, err := a.svc.RetryRun(r.Context(), projectOf(r), r.PathValue("flowId"), r.PathValue("runId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/flows/"+run.FlowID+"/runs/"+run.ID)
	writeJSON(w, http.StatusCreated, run)
}
