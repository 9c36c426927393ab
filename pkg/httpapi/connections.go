package httpapi

import (
	"net/http"

	"flowservice/pkg/automation"
)

func (a *API) listConnections(w http.ResponseWriter, r *http.Request) {
	page, err := a.svc.ListConnections(r.Context(), projectOf(r), pageRequest(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (a *API) getConnection(w http.ResponseWriter, r *http.Request) {
	c, err := a.svc.Connection(r.Context(), projectOf(r), r.PathValue("connectionId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// createConnection answers with the connection record alone: the credential
// went to the Secrets store and automation.Connection has no field for it.
func (a *API) createConnection(w http.ResponseWriter, r *http.Request) {
	var in automation.ConnectionInput
	if err := decode(w, r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.svc.CreateConnection(r.Context(), projectOf(r), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

func (a *API) deleteConnection(w http.ResponseWriter, r *http.Request) {
	if err := a.svc.DeleteConnection(r.Context(), projectOf(r), r.PathValue("connectionId")); err != nil {
		a.fail(w, r, err)
		return
	}
	writeNoContent(w)
}

// listApps answers the app catalog (docs/apps.md): every app with its
// connection and its actions' input schemas, from which forms are drawn.
func (a *API) listApps(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"items": a.svc.ListApps()})
}
