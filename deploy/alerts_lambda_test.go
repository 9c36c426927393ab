package deploy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/automation"
)

// TestAlertsOnLambda: on the stage's tables as the template names them, a
// subscription made through the api function gets the run.failed event of
// a run the runner finished, and the sweep message the schedule sends
// delivers the ping that the api function only wrote. Its calls feed
// TestGrantsMatchObservedCalls.
func TestAlertsOnLambda(t *testing.T) {
	recordGrants(t)
	e := newE2E(t, 5, automation.RunPolicy{MaxAttempts: 1})
	var mu sync.Mutex
	got := map[string][]string{} // event type -> webhook-ids
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct{ Type string }
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &ev)
		mu.Lock()
		got[ev.Type] = append(got[ev.Type], r.Header.Get("webhook-id"))
		mu.Unlock()
	}))
	t.Cleanup(receiver.Close)
	seen := func(typ string) int { mu.Lock(); defer mu.Unlock(); return len(got[typ]) }

	status, sub := call(t, e.api, "POST", "/api/v1/subscriptions", e.key,
		`{"url": "`+receiver.URL+`/hooks", "events": ["run.failed", "ping"]}`)
	if status != 201 || sub["secret"] == nil {
		t.Fatalf("create subscription = %d %v", status, sub)
	}
	id := sub["id"].(string)
	if status, list := call(t, e.api, "GET", "/api/v1/subscriptions", e.key, ""); status != 200 || len(list["data"].([]any)) != 1 {
		t.Fatalf("list = %d %v", status, list)
	}

	ext, _ := external(t, 400) // a 4xx: the run fails at once, for good
	flowID := e.activeFlow(t, ext.URL)
	if status, acc := call(t, e.hook, "POST", "/api/v1/webhooks/"+flowID, "", `{"ref": "main"}`); status != 200 {
		t.Fatalf("webhook = %d %v", status, acc)
	}
	for i := 0; i < 5 && seen("run.failed") == 0; i++ {
		e.poll(t)
	}
	if n := seen("run.failed"); n != 1 {
		t.Fatalf("run.failed delivered %d times, want 1", n)
	}

	if status, p := call(t, e.api, "POST", "/api/v1/subscriptions/"+id+"/test", e.key, ""); status >= 300 {
		t.Fatalf("test = %d %v", status, p)
	}
	if _, err := e.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(e.cfg.QueueURL), MessageBody: aws.String(`{"alertsSweep":true}`),
	}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5 && seen("ping") == 0; i++ {
		e.poll(t)
	}
	if n := seen("ping"); n != 1 {
		t.Fatalf("ping delivered %d times after the sweep, want 1", n)
	}
	if status, d := call(t, e.api, "GET", "/api/v1/subscriptions/"+id+"/deliveries", e.key, ""); status != 200 || len(d["data"].([]any)) < 2 {
		t.Fatalf("deliveries = %d %v", status, d)
	}
	if status, en := call(t, e.api, "POST", "/api/v1/subscriptions/"+id+"/enable", e.key, ""); status != 200 || en["status"] != "ACTIVE" {
		t.Fatalf("enable = %d %v", status, en)
	}
	if status, _ := call(t, e.api, "DELETE", "/api/v1/subscriptions/"+id, e.key, ""); status != 204 {
		t.Fatalf("delete = %d", status)
	}
}
