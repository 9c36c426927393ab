package httpapi

import "net/http"

// getInsights answers a flow's run insights over ?period= (24h, 7d or 30d;
// default 24h), summed from the counters finishing runs keep
// (docs/api.md, "Insights").
func (a *API) getInsights(w http.ResponseWriter, r *http.Request) {
	in, err := a.svc.FlowInsights(r.Context(), projectOf(r), r.PathValue("flowId"), r.URL.Query().Get("period"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, in)
}
