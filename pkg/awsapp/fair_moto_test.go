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
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/awsapp"
	"flowservice/pkg/awsapp/management"
	"flowservice/pkg/awsdev"
	"flowservice/pkg/awstest"
	"flowservice/pkg/dynamostore"
)

// fairApp is the api and webhook functions and two runner instances on
// moto, the runners polling the run queue until the test ends, and a
// third party whose calls are held until the test lets them go.
type fairApp struct {
	t      *testing.T
	awsCfg aws.Config
	cfg    awsapp.Config
	api    awsapp.ProxyHandler
	hook   awsapp.ProxyHandler
	key    string
	svc    *httptest.Server

	mu      sync.Mutex
	active  int
	most    int
	order   []string
	gates   map[string]chan struct{}
	arrived chan string
	last    int64 // the latest delivery's millisecond
}

func newFairApp(t *testing.T, limits map[string]int64) *fairApp {
	return newFairAppAt(t, limits, nil)
}

// newFairAppAt is newFairApp whose functions read the time from clock
// (nil: the wall clock).
func newFairAppAt(t *testing.T, limits map[string]int64, clock func() time.Time) *fairApp {
	ctx := context.Background()
	a := &fairApp{t: t, gates: map[string]chan struct{}{}, arrived: make(chan string, 10)}
	a.awsCfg = awstest.Start(t)
	prefix := awstest.UniqueName(t, "fair")
	var err error
	a.cfg, err = awsdev.Provision(ctx, a.awsCfg, prefix, awsapp.Config{Stage: "test", LogOutput: io.Discard, AllowPrivateNetworks: true, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := awsdev.NewAdminService(a.awsCfg, prefix)
	if err != nil {
		t.Fatal(err)
	}
	project, err := admin.CreateProject(ctx, "acme", automation.PlanEnterprise)
	if err != nil {
		t.Fatal(err)
	}
	if a.key, _, err = admin.CreateAPIKey(ctx, project.ID); err != nil {
		t.Fatal(err)
	}
	if len(limits) > 0 {
		if _, err := admin.SetProjectLimits(ctx, "acme", limits, nil); err != nil {
			t.Fatal(err)
		}
	}
	if a.api, err = management.NewHandler(ctx, a.awsCfg, a.cfg); err != nil {
		t.Fatal(err)
	}
	if a.hook, err = awsapp.NewWebhookHandler(ctx, a.awsCfg, a.cfg); err != nil {
		t.Fatal(err)
	}
	a.svc = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ ID string }
		json.NewDecoder(r.Body).Decode(&body)
		a.mu.Lock()
		a.active++
		a.most = max(a.most, a.active)
		a.order = append(a.order, body.ID)
		g := a.gate(body.ID)
		a.mu.Unlock()
		a.arrived <- body.ID
		select {
		case <-g:
		case <-r.Context().Done():
		}
		a.mu.Lock()
		a.active--
		a.mu.Unlock()
		fmt.Fprint(w, `{"ok":true}`)
	}))

	pollCtx, stop := context.WithCancel(ctx)
	var pollers sync.WaitGroup
	sqsc := sqs.NewFromConfig(a.awsCfg)
	for range 2 {
		runner, err := awsapp.NewRunnerHandler(ctx, a.awsCfg, a.cfg)
		if err != nil {
			t.Fatal(err)
		}
		pollers.Go(func() {
			for pollCtx.Err() == nil {
				if _, err := awsdev.PollOnce(pollCtx, sqsc, a.cfg.QueueURL, time.Second, runner); err != nil && pollCtx.Err() == nil {
					t.Errorf("poll: %v", err)
					return
				}
			}
		})
	}
	t.Cleanup(func() {
		stop()
		a.mu.Lock()
		for _, g := range a.gates {
			select {
			case <-g:
			default:
				close(g)
			}
		}
		a.mu.Unlock()
		pollers.Wait()
		a.svc.Close()
	})
	return a
}

// gate is the channel that lets call id go; a.mu held.
func (a *fairApp) gate(id string) chan struct{} {
	if a.gates[id] == nil {
		a.gates[id] = make(chan struct{})
	}
	return a.gates[id]
}

func (a *fairApp) release(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	close(a.gate(id))
}

func (a *fairApp) next() string {
	a.t.Helper()
	select {
	case id := <-a.arrived:
		return id
	case <-time.After(60 * time.Second):
		a.t.Fatal("no call arrived in 60 s")
		return ""
	}
}

func (a *fairApp) call(h awsapp.ProxyHandler, method, path, body string, want int, out any) {
	a.t.Helper()
	resp, err := h(context.Background(), events.APIGatewayProxyRequest{HTTPMethod: method, Path: path, Body: body,
		MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + a.key}},
		RequestContext: events.APIGatewayProxyRequestContext{HTTPMethod: method, Path: path,
			Identity: events.APIGatewayRequestIdentity{SourceIP: "198.51.100.10"}}})
	if err != nil || resp.StatusCode != want {
		a.t.Fatalf("%s %s = %d %s %v, want %d", method, path, resp.StatusCode, resp.Body, err, want)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(resp.Body), out); err != nil {
			a.t.Fatal(err)
		}
	}
}

// flow makes an ACTIVE flow with the given bounds (flow fields, such as
// `"concurrency": {"limit": 1}`) that calls the held service with the
// delivery's id.
func (a *fairApp) flow(bounds string) string {
	var flow struct{ ID string }
	a.call(a.api, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "orders", "engine": "FLOW_BUILDER", %s,
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"id": "{{ trigger.body.id }}"}}]}`, bounds, a.svc.URL), 201, &flow)
	a.call(a.api, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	return flow.ID
}

// deliver posts a delivery of order A through the webhook function, once
// the clock has passed the previous one's millisecond (arrival order is
// creation order), and returns its run ID.
func (a *fairApp) deliver(flowID, id string) string {
	a.t.Helper()
	testwait.Event(a.t, "the clock to pass the last delivery's millisecond", func() bool { return time.Now().UnixMilli() > a.last })
	var accepted struct{ RunID string }
	a.call(a.hook, "POST", "/api/v1/webhooks/"+flowID, fmt.Sprintf(`{"order": "A", "id": %q}`, id), 200, &accepted)
	a.last = time.Now().UnixMilli()
	return accepted.RunID
}

// waitRun polls the run through the api function until ok holds.
func (a *fairApp) waitRun(flowID, runID, what string, ok func(status, waitingFor string) bool) {
	a.t.Helper()
	testwait.For(a.t, testwait.Hang, "run "+runID+" "+what, func() bool {
		var r struct{ Status, WaitingFor string }
		a.call(a.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, "", 200, &r)
		return ok(r.Status, r.WaitingFor)
	})
}

func waitingFor(reason string) func(string, string) bool {
	return func(status, w string) bool { return status == "RUNNING" && w == reason }
}

// succeeded: final, waiting for nothing (the item keeps no earlier reason).
func succeeded(status, w string) bool { return status == "SUCCEEDED" && w == "" }

// TestConcurrencyOnMoto is the Lambda path of a flow's concurrency: three
// runs of one key delivered through the webhook function, executed by two
// runner instances polling the queue at once. The second and third wait
// (waitingFor CONCURRENCY, their messages sent again with a delay), then
// call the service one at a time, in arrival order: the slots live in
// DynamoDB, not in either runner.
func TestConcurrencyOnMoto(t *testing.T) {
	a := newFairApp(t, nil)
	flowID := a.flow(`"concurrency": {"limit": 1, "key": "trigger.body.order"}`)
	runs := map[string]string{}
	runs["A1"] = a.deliver(flowID, "A1")
	if got := a.next(); got != "A1" {
		t.Fatalf("first call %s, want A1", got)
	}
	runs["A2"] = a.deliver(flowID, "A2")
	runs["A3"] = a.deliver(flowID, "A3")
	a.waitRun(flowID, runs["A2"], "waiting for CONCURRENCY", waitingFor("CONCURRENCY"))
	a.waitRun(flowID, runs["A3"], "waiting for CONCURRENCY", waitingFor("CONCURRENCY"))
	a.release("A1")
	if got := a.next(); got != "A2" {
		t.Fatalf("after A1, the next call is %s, want A2 (arrival order)", got)
	}
	var executing struct{ Status, WaitingFor string }
	a.call(a.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runs["A2"], "", 200, &executing)
	if executing.Status != "RUNNING" || executing.WaitingFor != "" {
		t.Fatalf("A2 executing: %+v, want RUNNING waiting for nothing", executing)
	}
	a.release("A2")
	if got := a.next(); got != "A3" {
		t.Fatalf("after A2, the next call is %s, want A3", got)
	}
	a.release("A3")
	for _, runID := range runs {
		a.waitRun(flowID, runID, "SUCCEEDED", succeeded)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.most != 1 || !slices.Equal(a.order, []string{"A1", "A2", "A3"}) {
		t.Errorf("the service saw %d calls at once, in order %v; want 1 at a time, A1 A2 A3", a.most, a.order)
	}
}

// TestSlotOfACrashedRunnerExpiresOnMoto: a runner that died holding the
// flow's only slot (its hold written in DynamoDB, never given back) keeps
// the next run waiting until the hold's lease ends, and no longer: the
// run then executes. The functions' clock is the test's, so the lease ends
// when the test moves it, not while a loaded machine delivers the run.
func TestSlotOfACrashedRunnerExpiresOnMoto(t *testing.T) {
	var mu sync.Mutex
	// Near the wall clock: SQS delays the waiting run's message until the
	// time the hold names, and that delay is real time.
	now := time.Now().Truncate(time.Second)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a := newFairAppAt(t, nil, clock)
	flowID := a.flow(`"concurrency": {"limit": 1}`)
	var project struct{ ID string }
	a.call(a.api, "GET", "/api/v1/project", "", 200, &project)
	store := dynamostore.New(dynamodb.NewFromConfig(a.awsCfg), a.cfg.Tables)
	expires := clock().Add(3 * time.Second)
	err := store.UpdateSlots(context.Background(), project.ID, "c:"+flowID, func(automation.Slots) (automation.Slots, error) {
		return automation.Slots{Held: map[string]int64{"run_crashed": expires.UnixMilli()}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runID := a.deliver(flowID, "B1")
	a.waitRun(flowID, runID, "waiting for CONCURRENCY", waitingFor("CONCURRENCY"))
	mu.Lock()
	now = expires
	mu.Unlock()
	if got := a.next(); got != "B1" {
		t.Fatalf("call %s, want B1", got)
	}
	a.release("B1")
	a.waitRun(flowID, runID, "SUCCEEDED", succeeded)
	var run struct{ Started time.Time }
	a.call(a.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, "", 200, &run)
	if run.Started.Before(expires) {
		t.Errorf("B1 started at %v, before the crashed runner's hold ended at %v", run.Started, expires)
	}
}

// TestConcurrentRunsQuotaOnMoto: past the project's concurrentRuns (1
// here) a run of another flow waits (waitingFor QUOTA) and executes when
// the first ends.
func TestConcurrentRunsQuotaOnMoto(t *testing.T) {
	a := newFairApp(t, map[string]int64{"concurrentRuns": 1})
	one, two := a.flow(`"description": "one"`), a.flow(`"description": "two"`)
	r1 := a.deliver(one, "Q1")
	if got := a.next(); got != "Q1" {
		t.Fatalf("first call %s, want Q1", got)
	}
	r2 := a.deliver(two, "Q2")
	a.waitRun(two, r2, "waiting for QUOTA", waitingFor("QUOTA"))
	a.release("Q1")
	if got := a.next(); got != "Q2" {
		t.Fatalf("after Q1, the next call is %s, want Q2", got)
	}
	a.release("Q2")
	a.waitRun(one, r1, "SUCCEEDED", succeeded)
	a.waitRun(two, r2, "SUCCEEDED", succeeded)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.most != 1 {
		t.Errorf("the service saw %d of the project's runs at once, want 1", a.most)
	}
}

// TestThrottleOnMoto: a throttle of 1 start per 2 s lets the first run
// start and keeps the second waiting (waitingFor THROTTLE) until the first
// start leaves the period, though the first run has finished. The
// functions' clock is the test's: the period passes when the test moves
// it, so a loaded machine cannot let the second run in early or late.
func TestThrottleOnMoto(t *testing.T) {
	var mu sync.Mutex
	// Near the wall clock: SQS delays a throttled message until the time
	// the rule names, and that delay is real time.
	now := time.Now().Truncate(time.Second)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	a := newFairAppAt(t, nil, clock)
	flowID := a.flow(`"throttle": {"limit": 1, "period": "2s"}`)
	r1 := a.deliver(flowID, "T1")
	if got := a.next(); got != "T1" {
		t.Fatalf("first call %s, want T1", got)
	}
	a.release("T1")
	a.waitRun(flowID, r1, "SUCCEEDED", succeeded)
	r2 := a.deliver(flowID, "T2")
	a.waitRun(flowID, r2, "waiting for THROTTLE", waitingFor("THROTTLE"))
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	if got := a.next(); got != "T2" {
		t.Fatalf("second call %s, want T2", got)
	}
	a.release("T2")
	a.waitRun(flowID, r2, "SUCCEEDED", succeeded)
	var one, two struct{ Started time.Time }
	a.call(a.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+r1, "", 200, &one)
	a.call(a.api, "GET", "/api/v1/flows/"+flowID+"/runs/"+r2, "", 200, &two)
	if gap := two.Started.Sub(one.Started); gap < 2*time.Second {
		t.Fatalf("the second run started %v after the first, within the 2 s period", gap)
	}
}
