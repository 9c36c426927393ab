package deploy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

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
	if b := api("POST", "/api/v1/flows", def("30s"), 400); !strings.Contains(fmt.Sprint(b), "whole minutes") {
		t.Errorf("every 30s on AWS: %v", b)
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
}
