package httpapi

import (
	"net/http"

	"flowservice/pkg/automation"
)

// exportFlow answers the flow's portable document (docs/environments.md).
func (a *API) exportFlow(w http.ResponseWriter, r *http.Request) {
	doc, err := a.svc.ExportFlow(r.Context(), projectOf(r), r.PathValue("flowId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

// importFlow creates an INACTIVE flow from a portable document.
func (a *API) importFlow(w http.ResponseWriter, r *http.Request) {
	var doc automation.FlowDocument
	if err := decode(w, r, &doc); err != nil {
		a.fail(w, r, err)
		return
	}
	f, err := a.svc.ImportFlow(r.Context(), projectOf(r), doc)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, f)
}

// compareFlow answers what updating the flow with a portable document
// would change, for flowctl apply's plan.
func (a *API) compareFlow(w http.ResponseWriter, r *http.Request) {
	var doc automation.FlowDocument
	if err := decode(w, r, &doc); err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.svc.CompareFlow(r.Context(), projectOf(r), r.PathValue("flowId"), doc)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}
