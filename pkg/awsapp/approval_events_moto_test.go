package awsapp_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"flowservice/pkg/awsapp"
)

// TestApprovalEventsOnMoto: a subscription to approval.requested and
// approval.decided, made through the api function, gets both on the
// Lambda path. The runner that parks an APPROVAL run wrote
// approval.requested in the waitpoint's transaction and sends it after its
// batch, with the link as url; the api function's decision wrote
// approval.decided in the decision's transaction, and the runner that a
// sweep message reaches sends it (the api function does not send). Each
// delivery verifies with the official Standard Webhooks library and is
// recorded SUCCEEDED.
func TestApprovalEventsOnMoto(t *testing.T) {
	st := newApprovalStage(t, "apprevents")
	var (
		mu     sync.Mutex
		secret string
		got    []map[string]any
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		wh, err := standardwebhooks.NewWebhook(secret)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		if err != nil {
			t.Errorf("official library refused a delivery: %v", err)
		}
		var ev map[string]any
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("delivery body %s: %v", body, err)
		}
		got = append(got, ev)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	received := func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]any(nil), got...)
	}

	var sub struct{ ID, Secret string }
	st.must(st.api, "POST", "/api/v1/subscriptions",
		fmt.Sprintf(`{"url": %q, "events": ["approval.requested", "approval.decided"]}`, receiver.URL), 201, &sub)
	mu.Lock()
	secret = sub.Secret
	mu.Unlock()
	flowID := st.enabled(`{"name": "refunds", "engine": "FLOW_BUILDER", "steps": [
		{"name": "ok", "type": "APPROVAL", "title": "Refund {{ trigger.body.amount }}?", "timeout": "1h"},
		{"name": "after", "type": "SET", "values": {"d": "{{ steps.ok.decision }}"}}]}`)
	runID := st.trigger(flowID)
	st.drive("park", func() bool { return st.run(flowID, runID).WaitingFor == "APPROVAL" })

	// The runner that parked the run sent the event after its batch.
	evs := received()
	if len(evs) != 1 || evs[0]["type"] != "approval.requested" {
		t.Fatalf("after the park the receiver got %v, want one approval.requested", evs)
	}
	data, _ := evs[0]["data"].(map[string]any)
	link, _ := data["url"].(string)
	if data["runId"] != runID || data["step"] != "ok" || data["status"] != "PENDING" || data["title"] != "Refund 120?" ||
		data["flowName"] != "refunds" {
		t.Fatalf("approval.requested data = %v", data)
	}
	tok := st.token(link, "/approvals/")
	if page := st.call(st.hook, "GET", "/approvals/"+tok, "", ""); page.StatusCode != 200 || !strings.Contains(page.Body, "Refund 120?") {
		t.Fatalf("the event's url: page = %d %s", page.StatusCode, page.Body)
	}

	st.must(st.api, "POST", "/api/v1/runs/"+runID+"/approvals/ok", `{"decision": "approve"}`, 200, nil)
	// The api function sent no alert itself: it left the run's wake message
	// and one alerts sweep on the queue, so the runner that takes them
	// delivers approval.decided at once, not at the schedule's next sweep.
	if n := st.queued(awsapp.AlertsSweepBody); n != 1 {
		t.Fatalf("the decision left %d alerts sweep messages on the run queue, want 1", n)
	}
	st.drive("the decision's event and the run's end", func() bool {
		return len(received()) == 2 && st.run(flowID, runID).Status != "RUNNING"
	})
	evs = received()
	data, _ = evs[1]["data"].(map[string]any)
	decisions, _ := data["decisions"].([]any)
	if evs[1]["type"] != "approval.decided" || data["runId"] != runID || data["status"] != "DECIDED" ||
		data["decision"] != "approved" || len(decisions) != 1 || data["url"] != nil {
		t.Fatalf("second delivery = %v, want approval.decided approved with its decision and no url", evs[1])
	}
	if r := st.run(flowID, runID); r.Status != "SUCCEEDED" {
		t.Fatalf("run = %+v", r)
	}
	var deliveries struct {
		Data []struct{ EventType, Status string }
	}
	st.must(st.api, "GET", "/api/v1/subscriptions/"+sub.ID+"/deliveries", "", 200, &deliveries)
	if len(deliveries.Data) != 2 {
		t.Fatalf("deliveries = %+v, want 2", deliveries.Data)
	}
	types := map[string]string{}
	for _, d := range deliveries.Data {
		types[d.EventType] = d.Status
	}
	if types["approval.requested"] != "SUCCEEDED" || types["approval.decided"] != "SUCCEEDED" {
		t.Fatalf("deliveries = %+v, want approval.requested and approval.decided SUCCEEDED", deliveries.Data)
	}
}
