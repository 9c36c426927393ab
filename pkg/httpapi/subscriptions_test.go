package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// TestSubscriptionRoutes goes through every subscription route with the
// validating client, so each exchange is checked against openapi.json; a
// second project sees none of the first's subscriptions; a deployment
// without alerts answers 404 SUBSCRIPTIONS_UNAVAILABLE.
func TestSubscriptionRoutes(t *testing.T) {
	fe := flowtest.New(t, flowtest.Options{})
	alertSvc, err := alerts.NewService(alerts.Config{Store: fe.Store, Flows: fe.Store, Client: http.DefaultClient})
	if err != nil {
		t.Fatal(err)
	}
	srv := serve(t, NewAPI(fe.Svc, nil, WithAlerts(alertSvc)))
	srv.svc = fe.Svc
	key := newProjectKey(t, srv, automation.PlanEnterprise)
	otherKey := newProjectKey(t, srv, automation.PlanTeam)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer receiver.Close()
	flow := createFlow(t, srv, key, `{"name":"f","engine":"FLOW_BUILDER"}`)

	r := call(t, srv, "POST", "/api/v1/subscriptions", key,
		`{"url":"`+receiver.URL+`","events":["run.failed","flow.deleted"],"flowId":"`+flow.ID+`","description":"pager"}`)
	if r.status != 201 {
		t.Fatalf("create = %d %s", r.status, r.body)
	}
	var created struct {
		ID, Secret, Status string
		FlowID             *string
	}
	json.Unmarshal(r.body, &created)
	if !strings.HasPrefix(created.Secret, "whsec_") || created.Status != "ACTIVE" || created.FlowID == nil || *created.FlowID != flow.ID {
		t.Fatalf("created = %s", r.body)
	}
	for _, path := range []string{"/api/v1/subscriptions", "/api/v1/subscriptions/" + created.ID} {
		if r := call(t, srv, "GET", path, key, ""); r.status != 200 || strings.Contains(string(r.body), "whsec_") || !strings.Contains(string(r.body), created.ID) {
			t.Errorf("GET %s = %d %s", path, r.status, r.body)
		}
	}
	if r := call(t, srv, "GET", "/api/v1/subscriptions", otherKey, ""); r.status != 200 || strings.Contains(string(r.body), created.ID) {
		t.Errorf("another project's list = %d %s", r.status, r.body)
	}
	call(t, srv, "GET", "/api/v1/subscriptions/"+created.ID, otherKey, "").wantError(t, 404, "SUBSCRIPTION_NOT_FOUND")
	call(t, srv, "POST", "/api/v1/subscriptions", otherKey,
		`{"url":"`+receiver.URL+`","events":["run.failed"],"flowId":"`+flow.ID+`"}`).wantError(t, 400, "VALIDATION_ERROR")
	call(t, srv, "POST", "/api/v1/subscriptions", key, `{"url":"`+receiver.URL+`","events":[]}`).wantError(t, 400, "VALIDATION_ERROR")
	call(t, srv, "POST", "/api/v1/subscriptions", key, `{"url":"`+receiver.URL+`","events":["run.failed"],"secret":"x"}`).wantError(t, 400, "")

	r = call(t, srv, "POST", "/api/v1/subscriptions/"+created.ID+"/test", key, "")
	var q alerts.Queued
	if json.Unmarshal(r.body, &q); r.status != 202 || !strings.HasPrefix(q.EventID, "msg_") || !strings.HasPrefix(q.DeliveryID, "dlv_") {
		t.Fatalf("test = %d %s", r.status, r.body)
	}
	if n, err := alertSvc.DeliverDue(context.Background(), 10); err != nil || n != 1 {
		t.Fatalf("DeliverDue = %d, %v", n, err)
	}
	r = call(t, srv, "GET", "/api/v1/subscriptions/"+created.ID+"/deliveries?limit=5", key, "")
	if r.status != 200 || !strings.Contains(string(r.body), `"status":"SUCCEEDED"`) || !strings.Contains(string(r.body), q.EventID) {
		t.Fatalf("deliveries = %d %s", r.status, r.body)
	}
	call(t, srv, "GET", "/api/v1/subscriptions/"+created.ID+"/deliveries?limit=101", key, "").wantError(t, 400, "INVALID_PARAMETER")
	if r := call(t, srv, "POST", "/api/v1/subscriptions/"+created.ID+"/deliveries/"+q.DeliveryID+"/retry", key, ""); r.status != 202 ||
		!strings.Contains(string(r.body), `"status":"PENDING"`) {
		t.Fatalf("retry = %d %s", r.status, r.body)
	}
	call(t, srv, "POST", "/api/v1/subscriptions/"+created.ID+"/deliveries/"+q.DeliveryID+"/retry", otherKey, "").wantError(t, 404, "")
	if r := call(t, srv, "POST", "/api/v1/subscriptions/"+created.ID+"/enable", key, ""); r.status != 200 {
		t.Fatalf("enable = %d %s", r.status, r.body)
	}
	if r := call(t, srv, "DELETE", "/api/v1/subscriptions/"+created.ID, key, ""); r.status != 204 {
		t.Fatalf("delete = %d %s", r.status, r.body)
	}
	call(t, srv, "DELETE", "/api/v1/subscriptions/"+created.ID, key, "").wantError(t, 404, "SUBSCRIPTION_NOT_FOUND")

	plain, plainKey := newTestServer(t)
	call(t, plain, "GET", "/api/v1/subscriptions", plainKey, "").wantError(t, 404, "SUBSCRIPTIONS_UNAVAILABLE")
}
