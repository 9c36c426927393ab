package httpapi

import (
	"net/http"

	"flowservice/pkg/alerts"
)

// WithAlerts serves the event subscription routes (/api/v1/subscriptions)
// with svc; without it they are unknown routes.
func WithAlerts(svc *alerts.Service) APIOption {
	return func(a *API) { a.alerts = svc }
}

// alertRoutes are the subscription routes. Without WithAlerts they answer
// 404 SUBSCRIPTIONS_UNAVAILABLE, so that the route table (and the OpenAPI
// document) is the same on every deployment.
func (a *API) alertRoutes() []route {
	return []route{
		{pattern: "GET /api/v1/subscriptions", handler: a.needAlerts(a.listSubscriptions)},
		{pattern: "POST /api/v1/subscriptions", handler: a.needAlerts(a.createSubscription)},
		{pattern: "GET /api/v1/subscriptions/{subscriptionId}", handler: a.needAlerts(a.getSubscription)},
		{pattern: "DELETE /api/v1/subscriptions/{subscriptionId}", handler: a.needAlerts(a.deleteSubscription)},
		{pattern: "POST /api/v1/subscriptions/{subscriptionId}/test", handler: a.needAlerts(a.testSubscription)},
		{pattern: "POST /api/v1/subscriptions/{subscriptionId}/enable", handler: a.needAlerts(a.enableSubscription)},
		{pattern: "GET /api/v1/subscriptions/{subscriptionId}/deliveries", handler: a.needAlerts(a.listDeliveries)},
		{pattern: "POST /api/v1/subscriptions/{subscriptionId}/deliveries/{deliveryId}/retry", handler: a.needAlerts(a.retryDelivery)},
	}
}

func (a *API) needAlerts(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.alerts == nil {
			writeError(w, r, http.StatusNotFound, "SUBSCRIPTIONS_UNAVAILABLE", "event subscriptions are not available on this deployment")
			return
		}
		h(w, r)
	}
}

func (a *API) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	l, err := a.alerts.Subscriptions(r.Context(), projectOf(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// createSubscription answers with the secret, the one time it is shown.
func (a *API) createSubscription(w http.ResponseWriter, r *http.Request) {
	var in alerts.Input
	if err := decode(w, r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.alerts.CreateSubscription(r.Context(), projectOf(r), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

func (a *API) getSubscription(w http.ResponseWriter, r *http.Request) {
	s, err := a.alerts.Subscription(r.Context(), projectOf(r), r.PathValue("subscriptionId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (a *API) deleteSubscription(w http.ResponseWriter, r *http.Request) {
	if err := a.alerts.DeleteSubscription(r.Context(), projectOf(r), r.PathValue("subscriptionId")); err != nil {
		a.fail(w, r, err)
		return
	}
	writeNoContent(w)
}

// testSubscription queues a ping: 202, the sender delivers it at once.
func (a *API) testSubscription(w http.ResponseWriter, r *http.Request) {
	q, err := a.alerts.Test(r.Context(), projectOf(r), r.PathValue("subscriptionId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, q)
}

func (a *API) enableSubscription(w http.ResponseWriter, r *http.Request) {
	s, err := a.alerts.Enable(r.Context(), projectOf(r), r.PathValue("subscriptionId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (a *API) listDeliveries(w http.ResponseWriter, r *http.Request) {
	l, err := a.alerts.Deliveries(r.Context(), projectOf(r), r.PathValue("subscriptionId"), r.URL.Query().Get("limit"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func (a *API) retryDelivery(w http.ResponseWriter, r *http.Request) {
	d, err := a.alerts.Retry(r.Context(), projectOf(r), r.PathValue("subscriptionId"), r.PathValue("deliveryId"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, d)
}
