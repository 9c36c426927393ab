package httpapi

import (
	"net/http"

	"flowservice/pkg/automation"
)

// pageRequest passes the list parameters through unparsed: the Service owns
// their rules, so that every transport answers the same.
func pageRequest(r *http.Request) automation.PageRequest {
	q := r.URL.Query()
	return automation.PageRequest{Limit: q.Get("limit"), Cursor: q.Get("cursor"), Status: q.Get("status")}
}

func (a *API) listFlows(w http.ResponseWriter, r *http.Request) {
	page, err := a.svc.ListFlows(r.Context(), projectOf(r), pageRequest(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (a *API) getFlow(w http.ResponseWriter, r *http.Request) {
	f, err := a.svc.Flow(r.Context(), projectOf(r), r.PathValue("flowId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (a *API) createFlow(w http.ResponseWriter, r *http.Request) {
	var in automation.FlowInput
	if err := decode(w, r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	f, err := a.svc.CreateFlow(r.Context(), projectOf(r), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, f)
}

func (a *API) updateFlow(w http.ResponseWriter, r *http.Request) {
	var in automation.FlowInput
	if err := decode(w, r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	f, err := a.svc.UpdateFlow(r.Context(), projectOf(r), r.PathValue("flowId"), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (a *API) enableFlow(w http.ResponseWriter, r *http.Request) {
	f, err := a.svc.EnableFlow(r.Context(), projectOf(r), r.PathValue("flowId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (a *API) disableFlow(w http.ResponseWriter, r *http.Request) {
	f, err := a.svc.DisableFlow(r.Context(), projectOf(r), r.PathValue("flowId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, f)
}

func (a *API) deleteFlow(w http.ResponseWriter, r *http.Request) {
	if err := a.svc.DeleteFlow(r.Context(), projectOf(r), r.PathValue("flowId")); err != nil {
		a.fail(w, r, err)
		return
	}
	writeNoContent(w)
}

func (a *API) getWebhook(w http.ResponseWriter, r *http.Request) {
	d, err := a.svc.Webhook(r.Context(), projectOf(r), r.PathValue("flowId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

func (a *API) getWebhookSecurity(w http.ResponseWriter, r *http.Request) {
	sec, err := a.svc.WebhookSecurity(r.Context(), projectOf(r), r.PathValue("flowId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sec)
}

// securityInput is the body of POST /api/v1/flows/{flowId}/webhook/security. AllowedIPs is a pointer so that a
// body without it is an error rather than a silent lifting of the
// restriction, which only an explicit [] does.
type securityInput struct {
	AllowedIPs *[]string `json:"allowedIPs"`
}

func (a *API) setWebhookSecurity(w http.ResponseWriter, r *http.Request) {
	var in securityInput
	if err := decode(w, r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	if in.AllowedIPs == nil {
		a.fail(w, r, automation.Invalid("allowedIPs is required: an array of IP addresses and CIDR ranges; [] lifts the restriction"))
		return
	}
	sec, err := a.svc.SetWebhookSecurity(r.Context(), projectOf(r), r.PathValue("flowId"), *in.AllowedIPs)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sec)
}

// armWebhookTest arms the flow's Test Trigger: the next event received is
// kept as its sample.
func (a *API) armWebhookTest(w http.ResponseWriter, r *http.Request) {
	t, err := a.svc.ArmWebhookTest(r.Context(), projectOf(r), r.PathValue("flowId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func (a *API) getWebhookSample(w http.ResponseWriter, r *http.Request) {
	s, err := a.svc.WebhookSample(r.Context(), projectOf(r), r.PathValue("flowId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}
