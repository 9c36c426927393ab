package awsapp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/awstest"
)

// TestConcurrencyOnMoto is the Lambda path of a flow's concurrency: three
// runs of one key delivered through the webhook function, executed by two
// runner instances polling the queue at once. The second and third wait
// (waitingFor CONCURRENCY, their messages sent again with a delay), then
// call the service one at a time, in arrival order: the slots live in
// DynamoDB, not in either runner.
func TestConcurrencyOnMoto(t *testing.T) {
	ctx := context.Background()
	awsCfg := awstest.Start(t)
	prefix := awstest.UniqueName(t, "fair")
	cfg, err := awsdev.Provision(ctx, awsCfg, prefix, awsapp.Config{Stage: "test", LogOutput: io.Discard, AllowPrivateNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := awsdev.NewAdminService(awsCfg, prefix)
	if err != nil {
		t.Fatal(err)
	}
	project, err := admin.CreateProject(ctx, "acme", automation.PlanEnterprise)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := admin.CreateAPIKey(ctx, project.ID)
	if err != nil {
		t.Fatal(err)
	}
	api, err := management.NewHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := awsapp.NewWebhookHandler(ctx, awsCfg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	call := func(h awsapp.ProxyHandler, method, path, body string, want int, out any) {
		t.Helper()
		resp, err := h(ctx, events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body,
			MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + key}},
			RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: path,
				Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}})
		if err != nil || resp.StatusCode != want {
			t.Fatalf("%s %s = %d %s %v, want %d", method, path, resp.StatusCode, resp.Body, err, want)
		}
		if out != nil {
			if err := json.Unmarshal([]byte(resp.Body), out); err != nil {
				t.Fatal(err)
			}
		}
	}

	// The third party: each call held until the test lets it go.
	var (
		mu           sync.Mutex
		active, most int
		order        []string
		gates        = map[string]chan struct{}{}
		arrived      = make(chan string, 10)
		gate         = func(id string) chan struct{} {
			if gates[id] == nil {
				gates[id] = make(chan struct{})
			}
			return gates[id]
		}
	)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ ID string }
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		active++
		most = max(most, active)
		order = append(order, body.ID)
		g := gate(body.ID)
		mu.Unlock()
		arrived <- body.ID
		select {
		case <-g:
		case <-r.Context().Done():
		}
		mu.Lock()
		active--
		mu.Unlock()
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer svc.Close()
	release := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		close(gate(id))
	}
	next := func() string {
		t.Helper()
		select {
		case id := <-arrived:
			return id
		case <-time.After(60 * time.Second):
			t.Fatal("no call arrived in 60 s")
			return ""
		}
	}

	var flow struct{ ID string }
	call(api, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "orders", "engine": "FLOW_BUILDER",
		"concurrency": {"limit": 1, "key": "trigger.body.order"},
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"id": "{{ trigger.body.id }}"}}]}`, svc.URL), 201, &flow)
	call(api, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)

	// Two runner instances poll the queue until the test ends.
	pollCtx, stop := context.WithCancel(ctx)
	var pollers sync.WaitGroup
	sqsc := sqs.NewFromConfig(awsCfg)
	for range 2 {
		runner, err := awsapp.NewRunnerHandler(ctx, awsCfg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		pollers.Go(func() {
			for pollCtx.Err() == nil {
				if _, err := awsdev.PollOnce(pollCtx, sqsc, cfg.QueueURL, time.Second, runner); err != nil && pollCtx.Err() == nil {
					t.Errorf("poll: %v", err)
					return
				}
			}
		})
	}
	defer func() {
		stop()
		mu.Lock()
		for _, g := range gates {
			select {
			case <-g:
			default:
				close(g)
			}
		}
		mu.Unlock()
		pollers.Wait()
	}()

	runs := map[string]string{}
	var last int64
	deliver := func(id string) {
		t.Helper()
		for time.Now().UnixMilli() <= last {
			time.Sleep(100 * time.Microsecond) // until the clock moves: arrival order is creation order
		}
		var accepted struct{ RunID string }
		call(hook, "POST", "/api/v1/webhooks/"+flow.ID, fmt.Sprintf(`{"order": "A", "id": %q}`, id), 200, &accepted)
		last = time.Now().UnixMilli()
		runs[id] = accepted.RunID
	}
	deliver("A1")
	if got := next(); got != "A1" {
		t.Fatalf("first call %s, want A1", got)
	}
	deliver("A2")
	deliver("A3")
	for _, id := range []string{"A2", "A3"} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			var r struct{ Status, WaitingFor string }
			call(api, "GET", "/api/v1/flows/"+flow.ID+"/runs/"+runs[id], "", 200, &r)
			if r.Status == "RUNNING" && r.WaitingFor == "CONCURRENCY" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s = %+v, want RUNNING waiting for CONCURRENCY", id, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	release("A1")
	if got := next(); got != "A2" {
		t.Fatalf("after A1, the next call is %s, want A2 (arrival order)", got)
	}
	release("A2")
	if got := next(); got != "A3" {
		t.Fatalf("after A2, the next call is %s, want A3", got)
	}
	release("A3")
	for id, runID := range runs {
		deadline := time.Now().Add(30 * time.Second)
		for {
			var r struct{ Status string }
			call(api, "GET", "/api/v1/flows/"+flow.ID+"/runs/"+runID, "", 200, &r)
			if r.Status == "SUCCEEDED" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s = %+v, want SUCCEEDED", id, r)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if most != 1 || !slices.Equal(order, []string{"A1", "A2", "A3"}) {
		t.Errorf("the service saw %d calls at once, in order %v; want 1 at a time, A1 A2 A3", most, order)
	}
}
