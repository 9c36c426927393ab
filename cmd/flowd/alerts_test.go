package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"flowservice/internal/testwait"
	"flowservice/pkg/awstest"
)

// alertReceiver is a subscriber: it verifies each delivery with the
// official Standard Webhooks library and counts deliveries per webhook-id.
type alertReceiver struct {
	srv    *httptest.Server
	secret atomic.Value // string, set once the subscription exists
	// hold, when set, keeps the first delivery unanswered until closed,
	// after signalling reached.
	hold    chan struct{}
	reached chan struct{}
	held    atomic.Bool
	agent   atomic.Value // string: the User-Agent of the latest delivery

	mu     sync.Mutex
	counts map[string]int
	bodies map[string][]byte
	bad    []string
}

func newAlertReceiver(t *testing.T, holdFirst bool) *alertReceiver {
	rc := &alertReceiver{counts: map[string]int{}, bodies: map[string][]byte{}, reached: make(chan struct{}, 1)}
	if holdFirst {
		rc.hold = make(chan struct{})
	}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		secret, _ := rc.secret.Load().(string)
		wh, err := standardwebhooks.NewWebhook(secret)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		id := r.Header.Get("webhook-id")
		rc.agent.Store(r.Header.Get("User-Agent"))
		rc.mu.Lock()
		if err != nil {
			rc.bad = append(rc.bad, fmt.Sprintf("%s: %v", id, err))
		}
		rc.counts[id]++
		rc.bodies[id] = body
		rc.mu.Unlock()
		if rc.hold != nil && rc.held.CompareAndSwap(false, true) {
			rc.reached <- struct{}{}
			<-rc.hold // never answered: flowd is killed meanwhile
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() {
		if rc.hold != nil {
			select {
			case <-rc.hold:
			default:
				close(rc.hold)
			}
		}
		rc.srv.Close()
	})
	return rc
}

func (rc *alertReceiver) snapshot() (map[string]int, map[string][]byte, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	counts, bodies := map[string]int{}, map[string][]byte{}
	for k, v := range rc.counts {
		counts[k], bodies[k] = v, rc.bodies[k]
	}
	return counts, bodies, append([]string(nil), rc.bad...)
}

// waitFor polls until cond holds, at the interval of testwait.For (under
// flowd's rate limit: cond asks the API), bounded by testwait.Hang.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, testwait.Hang, what, cond)
}

type subscriptionAnswer struct {
	ID, URL, Status, Secret string
	Events                  []string
	FlowID                  *string
}

// TestAlertSurvivesKill9 kills flowd (SIGKILL) while it delivers the
// run.failed event of a run, restarts it, and checks that the event
// arrives again under the same webhook-id, signed so that the official
// library verifies it; then that every later failed run's event arrives,
// each under its own ID, at least once.
func TestAlertSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills flowd processes")
	}
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer broken.Close()
	rc := newAlertReceiver(t, true)

	dir := filepath.Join(t.TempDir(), "data")
	env := []string{"FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_RUN_ATTEMPTS=1", "FLOWD_LOG_LEVEL=warn"}
	p := startFlowd(t, dir, env...)
	key := initialKey(t, dir)
	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "charge", "engine": "FLOW_BUILDER",
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q}]}`, broken.URL), 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	var sub subscriptionAnswer
	api(t, p, key, "POST", "/api/v1/subscriptions",
		fmt.Sprintf(`{"url": %q, "events": ["run.failed"], "flowId": %q}`, rc.srv.URL, flow.ID), 201, &sub)
	if !strings.HasPrefix(sub.Secret, "whsec_") || sub.Status != "ACTIVE" || !strings.HasPrefix(sub.ID, "sub_") {
		t.Fatalf("created subscription = %+v", sub)
	}
	rc.secret.Store(sub.Secret)

	fire := func(p *proc) string {
		t.Helper()
		resp, err := http.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json", strings.NewReader(`{"n":1}`))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("webhook: %v %v", resp, err)
		}
		defer resp.Body.Close()
		var out struct{ RunID string }
		json.NewDecoder(resp.Body).Decode(&out)
		return out.RunID
	}
	first := fire(p)
	select {
	case <-rc.reached:
	case <-time.After(20 * time.Second):
		t.Fatalf("the run's alert never reached the receiver; log: %s", p.stderr)
	}
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	p2 := startFlowd(t, dir, env...)
	defer p2.stop(t)

	waitFor(t, "the held alert delivered again after the restart", func() bool {
		counts, _, _ := rc.snapshot()
		return len(counts) == 1 && total(counts) >= 2
	})
	runs := []string{first}
	for range 3 {
		runs = append(runs, fire(p2))
	}
	waitFor(t, "an alert per failed run", func() bool {
		counts, _, _ := rc.snapshot()
		return len(counts) == len(runs)
	})
	counts, bodies, bad := rc.snapshot()
	if len(bad) > 0 {
		t.Fatalf("deliveries the official library refused: %v", bad)
	}
	seen := map[string]string{} // run ID -> webhook-id
	for id, body := range bodies {
		var ev struct {
			Type string
			Data struct {
				ID, FlowID, FlowName, Status string
				Error                        struct{ Step, Message string }
			}
		}
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Fatalf("delivery %s: %s: %v", id, body, err)
		}
		if ev.Type != "run.failed" || ev.Data.FlowID != flow.ID || ev.Data.FlowName != "charge" ||
			ev.Data.Status != "FAILED" || ev.Data.Error.Step != "call" || ev.Data.Error.Message == "" {
			t.Errorf("delivery %s = %s", id, body)
		}
		if prev, dup := seen[ev.Data.ID]; dup {
			t.Errorf("run %s alerted under two IDs: %s and %s", ev.Data.ID, prev, id)
		}
		seen[ev.Data.ID] = id
	}
	for _, r := range runs {
		if seen[r] == "" {
			t.Errorf("run %s never alerted (alerts for %v)", r, seen)
		}
	}
	if counts[seen[first]] < 2 {
		t.Errorf("the interrupted alert arrived %d times, want the held attempt and its redelivery", counts[seen[first]])
	}

	var deliveries struct {
		Data []struct {
			ID, EventID, EventType, Status string
			Attempts                       int
			LastStatusCode                 *int
		}
	}
	waitFor(t, "every delivery recorded SUCCEEDED", func() bool {
		api(t, p2, key, "GET", "/api/v1/subscriptions/"+sub.ID+"/deliveries?limit=100", "", 200, &deliveries)
		ok := len(deliveries.Data) == len(runs)
		for _, d := range deliveries.Data {
			ok = ok && d.Status == "SUCCEEDED" && d.LastStatusCode != nil && *d.LastStatusCode == 204
		}
		return ok
	})
}

// TestSubscriptionsAPI goes through the subscription routes on a real
// flowd: validation names the field, the secret is shown once, a ping is
// delivered and verifiable, a delivery can be retried, and deletion stops
// deliveries.
func TestSubscriptionsAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	rc := newAlertReceiver(t, false)
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	defer p.stop(t)
	key := initialKey(t, dir)

	for _, tt := range []struct{ body, want string }{
		{`{"events": ["run.failed"]}`, "url is required"},
		{`{"url": "ftp://example.com/x", "events": ["run.failed"]}`, "url must be an absolute http or https URL"},
		{`{"url": "https://user:pw@example.com/x", "events": ["run.failed"]}`, "url must not carry credentials"},
		{`{"url": "https://example.com/x"}`, "events is required"},
		{`{"url": "https://example.com/x", "events": ["run.failed", "run.exploded"]}`, `events[1] \"run.exploded\": allowed values are`},
		{`{"url": "https://example.com/x", "events": ["run.failed"], "flowId": "flw_nope"}`, `flowId \"flw_nope\": no such flow`},
		{`{"url": "https://example.com/x", "events": ["run.failed"], "colour": "red"}`, "colour"},
	} {
		req, _ := http.NewRequest("POST", p.base+"/api/v1/subscriptions", strings.NewReader(tt.body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(raw), tt.want) || !strings.Contains(string(raw), `"error"`) {
			t.Errorf("POST %s = %d %s, want 400 naming %q", tt.body, resp.StatusCode, raw, tt.want)
		}
	}

	var sub subscriptionAnswer
	api(t, p, key, "POST", "/api/v1/subscriptions",
		fmt.Sprintf(`{"url": %q, "events": ["run.failed", "flow.deleted"], "description": "pager"}`, rc.srv.URL), 201, &sub)
	rc.secret.Store(sub.Secret)
	if sub.FlowID != nil || len(sub.Events) != 2 {
		t.Fatalf("created = %+v", sub)
	}
	for _, path := range []string{"/api/v1/subscriptions/" + sub.ID, "/api/v1/subscriptions"} {
		var raw json.RawMessage
		api(t, p, key, "GET", path, "", 200, &raw)
		if strings.Contains(string(raw), sub.Secret) || strings.Contains(string(raw), "whsec_") || !strings.Contains(string(raw), sub.ID) {
			t.Errorf("GET %s = %s: want the subscription without its secret", path, raw)
		}
	}
	api(t, p, key, "GET", "/api/v1/subscriptions/sub_nope", "", 404, nil)

	var ping struct{ EventID, DeliveryID string }
	api(t, p, key, "POST", "/api/v1/subscriptions/"+sub.ID+"/test", "", 202, &ping)
	waitFor(t, "the ping", func() bool {
		counts, _, _ := rc.snapshot()
		return counts[ping.EventID] == 1
	})
	_, bodies, bad := rc.snapshot()
	if len(bad) > 0 || !strings.Contains(string(bodies[ping.EventID]), `"type":"ping"`) {
		t.Fatalf("ping body %s, refused: %v", bodies[ping.EventID], bad)
	}
	// Retry a delivery once its attempt is recorded, as the dashboard shows
	// it: the receiver's 200 comes before the sender writes SUCCEEDED.
	waitFor(t, "the ping recorded SUCCEEDED", func() bool {
		var ds struct{ Data []struct{ ID, Status string } }
		api(t, p, key, "GET", "/api/v1/subscriptions/"+sub.ID+"/deliveries", "", 200, &ds)
		for _, d := range ds.Data {
			if d.ID == ping.DeliveryID {
				return d.Status == "SUCCEEDED"
			}
		}
		return false
	})
	var retried struct{ ID, Status string }
	api(t, p, key, "POST", "/api/v1/subscriptions/"+sub.ID+"/deliveries/"+ping.DeliveryID+"/retry", "", 202, &retried)
	waitFor(t, "the retried ping, same webhook-id", func() bool {
		counts, _, _ := rc.snapshot()
		return counts[ping.EventID] == 2
	})
	api(t, p, key, "POST", "/api/v1/subscriptions/"+sub.ID+"/deliveries/dlv_nope/retry", "", 404, nil)
	api(t, p, key, "GET", "/api/v1/subscriptions/"+sub.ID+"/deliveries?limit=0", "", 400, nil)
	var enabled subscriptionAnswer
	api(t, p, key, "POST", "/api/v1/subscriptions/"+sub.ID+"/enable", "", 200, &enabled)
	if enabled.Status != "ACTIVE" || enabled.Secret != "" {
		t.Fatalf("enable = %+v", enabled)
	}
	api(t, p, key, "DELETE", "/api/v1/subscriptions/"+sub.ID, "", 204, nil)
	api(t, p, key, "GET", "/api/v1/subscriptions/"+sub.ID, "", 404, nil)

	// A flow's life, each step an event written with the change.
	var lifecycle subscriptionAnswer
	api(t, p, key, "POST", "/api/v1/subscriptions", fmt.Sprintf(`{"url": %q,
		"events": ["flow.published", "flow.enabled", "flow.disabled", "flow.deleted"]}`, rc.srv.URL), 201, &lifecycle)
	rc.secret.Store(lifecycle.Secret)
	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "life", "engine": "FLOW_BUILDER"}`, 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID, `{"description": "metadata only: no event"}`, 200, nil)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/disable", "", 200, nil)
	api(t, p, key, "DELETE", "/api/v1/flows/"+flow.ID, "", 204, nil)
	want := []string{"flow.published", "flow.enabled", "flow.disabled", "flow.deleted"}
	testwait.Event(t, "the ping and one delivery per event", func() bool {
		counts, _, _ := rc.snapshot()
		return len(counts) >= 1+len(want) // the ping's ID, then one per event
	})
	counts, bodies, bad := rc.snapshot()
	if len(bad) > 0 {
		t.Fatalf("refused: %v", bad)
	}
	if len(counts) != 1+len(want) {
		var seen []string
		for _, b := range bodies {
			seen = append(seen, string(b))
		}
		t.Fatalf("events received: %v; want the ping and %v", seen, want)
	}
	got := map[string]bool{}
	for _, b := range bodies {
		var ev struct {
			Type string
			Data struct{ FlowID string }
		}
		json.Unmarshal(b, &ev)
		if ev.Type != "ping" && ev.Data.FlowID != flow.ID {
			t.Errorf("event %s about flow %q, want %s", ev.Type, ev.Data.FlowID, flow.ID)
		}
		got[ev.Type] = true
	}
	for _, typ := range want {
		if !got[typ] {
			t.Errorf("no %s event (got %v)", typ, got)
		}
	}
}

// TestFlowctlSubscriptions drives flowctl subscriptions against a real
// flowd: create prints the secret once, list never shows it, test sends a
// ping the receiver verifies, deliveries lists it, delete removes it.
func TestFlowctlSubscriptions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	rc := newAlertReceiver(t, false)
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	defer p.stop(t)
	c := newCtl(t, "FLOWCTL_URL="+p.base, "FLOWCTL_API_KEY="+initialKey(t, dir))

	var created subscriptionAnswer
	c.okJSON(&created, "subscriptions", "create", "--target", rc.srv.URL, "--event", "run.failed", "--event", "ping")
	if !strings.HasPrefix(created.Secret, "whsec_") || created.Status != "ACTIVE" {
		t.Fatalf("created = %+v", created)
	}
	rc.secret.Store(created.Secret)
	list := c.ok("", "subscriptions", "list")
	if !tableRow(list, created.ID, "ACTIVE", "run.failed,ping", "-", rc.srv.URL) || strings.Contains(list, "whsec_") {
		t.Fatalf("list:\n%s", list)
	}
	if stderr := c.fails("subscriptions", "create", "--target", rc.srv.URL, "--event", "run.nope"); !strings.Contains(stderr, `events[0] "run.nope"`) {
		t.Errorf("bad event: %s", stderr)
	}
	out := c.ok("", "subscriptions", "test", created.ID)
	if !strings.Contains(out, "msg_") {
		t.Fatalf("test printed %q", out)
	}
	waitFor(t, "the ping", func() bool {
		counts, _, _ := rc.snapshot()
		return len(counts) == 1
	})
	deliveryID := regexp.MustCompile(`dlv_[a-z0-9]+`).FindString(out)
	waitFor(t, "the ping recorded", func() bool {
		return tableRow(c.ok("", "subscriptions", "deliveries", created.ID), deliveryID, "ping", "SUCCEEDED", "1", "204")
	})
	if _, _, bad := rc.snapshot(); len(bad) > 0 {
		t.Fatalf("refused: %v", bad)
	}
	if out := c.ok("", "subscriptions", "delete", created.ID); !strings.Contains(out, "deleted "+created.ID) {
		t.Fatalf("delete printed %q", out)
	}
	if list := c.ok("", "subscriptions", "list"); strings.Contains(list, created.ID) {
		t.Fatalf("still listed after delete:\n%s", list)
	}
}

// TestAlertsOnAWSBackend: flowd with FLOWD_BACKEND=aws on moto (the Lambda
// wiring in one process) sends a failed run's alert, written with the
// finish in DynamoDB, verifiable by the official library.
func TestAlertsOnAWSBackend(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd and moto_server")
	}
	moto, err := awstest.StartServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { moto.Stop() })
	var stepAgent atomic.Value
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stepAgent.Store(r.Header.Get("User-Agent"))
		w.WriteHeader(500)
	}))
	defer broken.Close()
	rc := newAlertReceiver(t, false)
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "AWS_ENDPOINT_URL="+moto.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=testing",
		"AWS_SECRET_ACCESS_KEY=testing", "AWS_EC2_METADATA_DISABLED=true", "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null", "FLOWD_BACKEND=aws", "FLOWD_AWS_PROVISION=true",
		"FLOWD_AWS_PREFIX=alerts", "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_WORKERS=1", "FLOWD_RUN_ATTEMPTS=1",
		"FLOWD_LOG_LEVEL=warn")
	defer p.stop(t)
	key := initialKey(t, dir)
	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "charge", "engine": "FLOW_BUILDER",
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q}]}`, broken.URL), 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	var sub subscriptionAnswer
	api(t, p, key, "POST", "/api/v1/subscriptions", fmt.Sprintf(`{"url": %q, "events": ["run.failed"]}`, rc.srv.URL), 201, &sub)
	rc.secret.Store(sub.Secret)
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json", strings.NewReader(`{}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("webhook: %v %v", resp, err)
	}
	resp.Body.Close()
	runID := resp.Header.Get("X-Run-Id")
	waitFor(t, "the run's alert", func() bool {
		counts, _, _ := rc.snapshot()
		return len(counts) == 1
	})
	_, bodies, bad := rc.snapshot()
	if len(bad) > 0 {
		t.Fatalf("refused: %v", bad)
	}
	for _, b := range bodies {
		if !strings.Contains(string(b), `"type":"run.failed"`) || !strings.Contains(string(b), runID) {
			t.Fatalf("alert = %s, want run.failed of %s", b, runID)
		}
	}
	checkAgents(t, rc, &stepAgent)
}

// checkAgents: alerts say who sends them as HTTP steps do,
// flowd/<version> (+<engine URL>).
func checkAgents(t *testing.T, rc *alertReceiver, stepAgent *atomic.Value) {
	t.Helper()
	alert, _ := rc.agent.Load().(string)
	step, _ := stepAgent.Load().(string)
	if alert != step || !strings.HasPrefix(alert, "flowd/") {
		t.Errorf("alert User-Agent %q, HTTP step's %q: want the same flowd/<version> form", alert, step)
	}
}

// TestAlertsFairAcrossProjects: project A has 20 subscriptions to a
// server that accepts connections and never answers, and 60 pings queued
// to them; project B's failure alerts, 14 runs started once A's attempts
// hang, all arrive promptly. A holds at most its share of the senders (4)
// and a subscription at most 2; alerts carry the HTTP step's User-Agent.
func TestAlertsFairAcrossProjects(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd")
	}
	var mu sync.Mutex
	held, most, mostPer := 0, 0, 0
	byPath := map[string]int{}
	arrived, release := make(chan struct{}, 1000), make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		held++
		byPath[r.URL.Path]++
		most, mostPer = max(most, held), max(mostPer, byPath[r.URL.Path])
		mu.Unlock()
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		mu.Lock()
		held--
		byPath[r.URL.Path]--
		mu.Unlock()
	}))
	defer hang.Close()
	defer close(release)
	var stepAgent atomic.Value
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stepAgent.Store(r.Header.Get("User-Agent"))
		w.WriteHeader(500)
	}))
	defer broken.Close()
	rc := newAlertReceiver(t, false)

	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_RUN_ATTEMPTS=1", "FLOWD_LOG_LEVEL=warn")
	defer p.stop(t)
	keyA := initialKey(t, dir)
	if out, err := flowctl(t, dir, "projects", "create", "quiet", "--plan", "ENTERPRISE"); err != nil {
		t.Fatalf("projects create: %v %s", err, out)
	}
	keyB, err := flowctl(t, dir, "keys", "create", "--project", "quiet")
	if err != nil {
		t.Fatalf("keys create: %v %s", err, keyB)
	}
	keyB = strings.TrimSpace(keyB)
	var flow struct{ ID string }
	api(t, p, keyB, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "charge", "engine": "FLOW_BUILDER",
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q}]}`, broken.URL), 201, &flow)
	api(t, p, keyB, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	var subB subscriptionAnswer
	api(t, p, keyB, "POST", "/api/v1/subscriptions", fmt.Sprintf(`{"url": %q, "events": ["run.failed"]}`, rc.srv.URL), 201, &subB)
	rc.secret.Store(subB.Secret)

	var subsA []string
	for i := range 20 {
		var sub subscriptionAnswer
		api(t, p, keyA, "POST", "/api/v1/subscriptions", fmt.Sprintf(`{"url": "%s/a%d", "events": ["ping", "run.failed"]}`, hang.URL, i), 201, &sub)
		subsA = append(subsA, sub.ID)
	}
	for range 3 {
		for _, id := range subsA {
			api(t, p, keyA, "POST", "/api/v1/subscriptions/"+id+"/test", "", 202, nil)
		}
	}
	for range 4 {
		<-arrived // A's attempts hang, holding its share
	}

	start := time.Now()
	for range 14 {
		resp, err := http.Post(p.base+"/api/v1/webhooks/"+flow.ID, "application/json", strings.NewReader(`{}`))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("webhook: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	waitFor(t, "project B's 14 failure alerts", func() bool {
		counts, _, _ := rc.snapshot()
		return len(counts) == 14
	})
	took := time.Since(start)
	t.Logf("project B's 14 runs and their alerts took %v while project A's receivers hung", took)
	if took > 10*time.Second {
		t.Errorf("project B's alerts took %v behind project A's hanging receivers, want a few seconds", took)
	}
	if _, _, bad := rc.snapshot(); len(bad) > 0 {
		t.Fatalf("refused: %v", bad)
	}
	mu.Lock()
	if most > 4 || mostPer > 2 {
		t.Errorf("project A held %d senders at once, %d for one subscription; want at most 4 and 2", most, mostPer)
	}
	mu.Unlock()
	checkAgents(t, rc, &stepAgent)
}
