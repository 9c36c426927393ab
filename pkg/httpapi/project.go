package httpapi

import "net/http"

// getProject answers the caller's project with its limits and usage.
func (a *API) getProject(w http.ResponseWriter, r *http.Request) {
	info, err := a.svc.ProjectInfo(r.Context(), projectOf(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}
