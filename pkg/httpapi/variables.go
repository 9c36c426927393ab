package httpapi

import (
	"net/http"

	"flowservice/pkg/automation"
)

func (a *API) listVariables(w http.ResponseWriter, r *http.Request) {
	page, err := a.svc.ListVariables(r.Context(), projectOf(r), pageRequest(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (a *API) getVariable(w http.ResponseWriter, r *http.Request) {
	v, err := a.svc.Variable(r.Context(), projectOf(r), r.PathValue("name"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// putVariable answers with the variable; a secret one has no value field:
// its value went to the Secrets store.
func (a *API) putVariable(w http.ResponseWriter, r *http.Request) {
	var in automation.VariableInput
	if err := decode(w, r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	v, err := a.svc.PutVariable(r.Context(), projectOf(r), r.PathValue("name"), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (a *API) deleteVariable(w http.ResponseWriter, r *http.Request) {
	if err := a.svc.DeleteVariable(r.Context(), projectOf(r), r.PathValue("name")); err != nil {
		a.fail(w, r, err)
		return
	}
	writeNoContent(w)
}
