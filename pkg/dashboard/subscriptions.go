package dashboard

import (
	"net/http"

	"flowservice/pkg/alerts"
)

// recentDeliveries is how many deliveries the page shows per subscription.
const recentDeliveries = "5"

// subscriptionView is one subscription with its latest deliveries.
type subscriptionView struct {
	alerts.Subscription
	Deliveries []alerts.Delivery
}

// subscriptions lists the project's event subscriptions and the latest
// deliveries of each: what a team checks when an alert did not arrive.
// Managing them is the API's and flowctl's (docs/alerts.md).
func (d *Dashboard) subscriptions(w http.ResponseWriter, r *http.Request) {
	var views []subscriptionView
	if d.opts.Alerts != nil {
		subs, err := d.opts.Alerts.Subscriptions(r.Context(), project(r))
		if err != nil {
			d.fail(w, r, err)
			return
		}
		for _, s := range subs.Data {
			ds, err := d.opts.Alerts.Deliveries(r.Context(), project(r), s.ID, recentDeliveries)
			if err != nil {
				d.fail(w, r, err)
				return
			}
			views = append(views, subscriptionView{Subscription: s, Deliveries: ds.Data})
		}
	}
	d.render(w, r, http.StatusOK, "subscriptions", view{Title: "Alerts", Nav: "subscriptions", Notice: notice(r),
		Data: struct {
			Available     bool
			Subscriptions []subscriptionView
		}{d.opts.Alerts != nil, views}})
}
