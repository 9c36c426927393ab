package httpapi

import (
	"net/http"
	"strconv"

	"flowservice/pkg/automation"
)

// Versions and drafts of a flow (docs/api.md, "Versions").

func (a *API) versionRoutes() []route {
	return []route{
		{pattern: "GET /api/v1/flows/{flowId}/draft", handler: a.getDraft},
		{pattern: "PUT /api/v1/flows/{flowId}/draft", handler: a.saveDraft},
		{pattern: "DELETE /api/v1/flows/{flowId}/draft", handler: a.discardDraft},
		{pattern: "POST /api/v1/flows/{flowId}/publish", handler: a.publishDraft},
		{pattern: "GET /api/v1/flows/{flowId}/versions", handler: a.listVersions},
		{pattern: "GET /api/v1/flows/{flowId}/versions/{version}", handler: a.getVersion},
		{pattern: "POST /api/v1/flows/{flowId}/versions/{version}/restore", handler: a.restoreVersion},
	}
}

func (a *API) getDraft(w http.ResponseWriter, r *http.Request) {
	d, err := a.svc.Draft(r.Context(), projectOf(r), r.PathValue("flowId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (a *API) saveDraft(w http.ResponseWriter, r *http.Request) {
	var in automation.DraftInput
	if err := decode(w, r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	d, err := a.svc.SaveDraft(r.Context(), projectOf(r), r.PathValue("flowId"), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (a *API) discardDraft(w http.ResponseWriter, r *http.Request) {
	if err := a.svc.DiscardDraft(r.Context(), projectOf(r), r.PathValue("flowId")); err != nil {
		a.fail(w, r, err)
		return
	}
	writeNoContent(w)
}

func (a *API) publishDraft(w http.ResponseWriter, r *http.Request) {
	var req automation.PublishRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	f, err := a.svc.Publish(r.Context(), projectOf(r), r.PathValue("flowId"), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (a *API) listVersions(w http.ResponseWriter, r *http.Request) {
	page, err := a.svc.ListFlowVersions(r.Context(), projectOf(r), r.PathValue("flowId"), pageRequest(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// versionParam reads the {version} path parameter: a version number.
func versionParam(r *http.Request) (int64, error) {
	s := r.PathValue("version")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, automation.InvalidCode("INVALID_PARAMETER", "version must be a version number (1, 2, …), got %q", s)
	}
	return n, nil
}

func (a *API) getVersion(w http.ResponseWriter, r *http.Request) {
	n, err := versionParam(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v, err := a.svc.FlowVersion(r.Context(), projectOf(r), r.PathValue("flowId"), n)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (a *API) restoreVersion(w http.ResponseWriter, r *http.Request) {
	n, err := versionParam(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	f, err := a.svc.RestoreVersion(r.Context(), projectOf(r), r.PathValue("flowId"), n)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}
