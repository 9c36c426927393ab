package deploy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"flowservice/pkg/automation"
)

// TestPollOnLambdaPath: a POLL flow on the Lambda path (moto): the api
// function saves it (every in whole minutes, as EventBridge Scheduler's
// rates are) and schedules it; each firing, as EventBridge Scheduler sends
// it to the queue, is a poll in the runner: the first records the items
// that exist, a later one queues a run per new item, and a failing API
// shows on the flow.
func TestPollOnLambdaPath(t *testing.T) {
	e := newE2E(t, 5, automation.RunPolicy{MaxAttempts: 3})
	var mu sync.Mutex
	items, failing := []string{"a", "b"}, false
	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		var list []map[string]string
		for _, id := range items {
			list = append(list, map[string]string{"id": id})
		}
		json.NewEncoder(w).Encode(map[string]any{"data": list})
	}))
	t.Cleanup(feed.Close)
	api := func(method, path, body string, want int) map[string]any {
		t.Helper()
		status, b := call(t, e.api, method, path, e.key, body)
		if status != want {
			t.Fatalf("%s %s = %d %.300v, want %d", method, path, status, b, want)
		}
		return b
	}
	def := func(every string) string {
		return fmt.Sprintf(`{"name": "Feed", "engine": "FLOW_BUILDER", "trigger": {"type": "POLL", "poll": {"every": %q,
			"request": {"url": %q}, "items": "response.body.data", "key": "item.id"}},
			"steps": [{"name": "seen", "type": "SET", "values": {"id": "{{ trigger.body.id }}"}}]}`, every, feed.URL)
	}
	if b := api("POST", "/api/v1/flows", def("90s"), 400); !strings.Contains(fmt.Sprint(b), "whole minutes") {
		t.Errorf("every 90s on AWS: %v", b)
	}
	id := api("POST", "/api/v1/flows", def("2m"), 201)["id"].(string)
	api("POST", "/api/v1/flows/"+id+"/enable", "", 200)

	fire := func(n int) {
		t.Helper()
		firing := events.SQSEvent{Records: []events.SQSMessage{{MessageId: fmt.Sprintf("poll-%d", n),
			Body: fmt.Sprintf(`{"kind": "poll", "project": %q, "flowId": %q}`, e.project.ID, id)}}}
		if out, err := e.runner(t.Context(), firing); err != nil || len(out.BatchItemFailures) != 0 {
			t.Fatalf("poll firing: %+v %v", out, err)
		}
	}
	pollOf := func() map[string]any {
		t.Helper()
		p, _ := api("GET", "/api/v1/flows/"+id, "", 200)["poll"].(map[string]any)
		if p == nil {
			t.Fatal("the flow shows no poll status")
		}
		return p
	}
	runs := func() []any {
		return api("GET", "/api/v1/flows/"+id+"/runs", "", 200)["data"].([]any)
	}

	fire(1)
	if p := pollOf(); p["primed"] != true || p["seenKeys"] != float64(2) || p["lastRuns"] != float64(0) {
		t.Fatalf("after the first poll: %v", p)
	}
	if n := e.poll(t); n != 0 || len(runs()) != 0 {
		t.Fatalf("the first poll queued %d messages, %d runs", n, len(runs()))
	}

	mu.Lock()
	items = append(items, "c")
	mu.Unlock()
	fire(2)
	if p := pollOf(); p["lastRuns"] != float64(1) || p["seenKeys"] != float64(3) {
		t.Fatalf("after a new item: %v", p)
	}
	for i := 0; i < 5 && e.poll(t) == 0; i++ {
	}
	r := runs()
	if len(r) != 1 {
		t.Fatalf("runs %v, want one for item c", r)
	}
	run := api("GET", "/api/v1/flows/"+id+"/runs/"+r[0].(map[string]any)["id"].(string), "", 200)
	if run["status"] != "SUCCEEDED" || !strings.Contains(fmt.Sprint(run["steps"]), "id:c") {
		t.Fatalf("run %v", run)
	}

	mu.Lock()
	failing = true
	mu.Unlock()
	fire(3)
	if p := pollOf(); !strings.Contains(fmt.Sprint(p["lastError"]), "answered 502") {
		t.Fatalf("a failing poll shows %v", p)
	}
	api("POST", "/api/v1/flows/"+id+"/disable", "", 200)
	api("DELETE", "/api/v1/flows/"+id, "", 204)

	mu.Lock()
	failing = false
	mu.Unlock()
	// Under a minute: the schedule fires every minute, and its firing
	// queues the polls due within that minute (at 20 s and 40 s), as
	// delayed poll messages.
	sub := api("POST", "/api/v1/flows", def("20s"), 201)["id"].(string)
	api("POST", "/api/v1/flows/"+sub+"/enable", "", 200)
	firing := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "poll-sub",
		Body: fmt.Sprintf(`{"kind": "poll", "project": %q, "flowId": %q}`, e.project.ID, sub)}}}
	if out, err := e.runner(t.Context(), firing); err != nil || len(out.BatchItemFailures) != 0 {
		t.Fatalf("poll firing: %+v %v", out, err)
	}
	attrs, err := e.sqs.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: &e.cfg.QueueURL,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		t.Fatal(err)
	}
	if n := attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)]; n != "2" {
		t.Fatalf("%s delayed messages after the firing, want the two follow-up polls", n)
	}
	at := time.Now().UTC().Add(20 * time.Second)
	follow := []automation.QueueMessage{{Kind: automation.MessagePoll, Project: e.project.ID, FlowID: sub, NotBefore: &at}}
	// A follow-up poll polls and queues nothing more.
	body, _ := json.Marshal(follow[0])
	firing.Records[0].Body = string(body)
	if out, err := e.runner(t.Context(), firing); err != nil || len(out.BatchItemFailures) != 0 {
		t.Fatalf("follow-up poll: %+v %v", out, err)
	}
	if p, _ := api("GET", "/api/v1/flows/"+sub, "", 200)["poll"].(map[string]any); p == nil || p["primed"] != true {
		t.Errorf("after the polls: %v", p)
	}
}
