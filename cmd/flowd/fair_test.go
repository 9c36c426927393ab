package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
)

// heldService is the third-party service a limited flow calls: each call
// is held until the test lets it go, and the service records which calls
// overlapped, per key, and in what order they came.
type heldService struct {
	*httptest.Server
	mu      sync.Mutex
	active  map[string]int // calls in progress per key
	most    map[string]int // the most at once per key
	order   []string       // call IDs in arrival order
	gates   map[string]chan struct{}
	arrived chan string
}

func newHeldService(t *testing.T) *heldService {
	s := &heldService{active: map[string]int{}, most: map[string]int{}, gates: map[string]chan struct{}{}, arrived: make(chan string, 100)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct{ Key, ID string }
		raw, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.active[body.Key]++
		s.most[body.Key] = max(s.most[body.Key], s.active[body.Key])
		s.order = append(s.order, body.ID)
		gate := s.gate(body.ID)
		s.mu.Unlock()
		s.arrived <- body.ID
		select {
		case <-gate:
		case <-r.Context().Done():
		}
		s.mu.Lock()
		s.active[body.Key]--
		s.mu.Unlock()
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(func() {
		s.mu.Lock()
		for _, g := range s.gates {
			select {
			case <-g:
			default:
				close(g)
			}
		}
		s.mu.Unlock()
		s.Close()
	})
	return s
}

// gate is the channel that lets call id go; s.mu held.
func (s *heldService) gate(id string) chan struct{} {
	if s.gates[id] == nil {
		s.gates[id] = make(chan struct{})
	}
	return s.gates[id]
}

func (s *heldService) release(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gate(id))
}

// next waits for the next call to arrive.
func (s *heldService) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-s.arrived:
		return id
	case <-time.After(30 * time.Second):
		t.Fatal("no call arrived in 30 s")
		return ""
	}
}

// deliverAfter posts a webhook delivery and returns its run ID. It first waits
// for the clock to pass the previous delivery's millisecond, so that the
// runs' arrival order is their order of creation.
func deliverAfter(t *testing.T, p *proc, flowID, body string, last *int64) string {
	t.Helper()
	testwait.Event(t, "the clock to pass the last delivery's millisecond", func() bool { return time.Now().UnixMilli() > *last })
	resp, err := http.Post(p.base+"/api/v1/webhooks/"+flowID, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	*last = time.Now().UnixMilli()
	var started struct{ RunID string }
	if err := json.NewDecoder(resp.Body).Decode(&started); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("webhook %s: %d %v", body, resp.StatusCode, err)
	}
	return started.RunID
}

type limitedRun struct {
	ID, Status, WaitingFor string
	Started                *time.Time
}

func getRun(t *testing.T, p *proc, key, flowID, runID string) limitedRun {
	t.Helper()
	var r limitedRun
	api(t, p, key, "GET", "/api/v1/flows/"+flowID+"/runs/"+runID, "", 200, &r)
	return r
}

func limitedFlow(t *testing.T, p *proc, key, url, limits string) string {
	t.Helper()
	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "limited", "engine": "FLOW_BUILDER", %s,
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q,
			"body": {"key": "{{ trigger.body.order }}", "id": "{{ trigger.body.id }}"}}]}`, limits, url), 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)
	return flow.ID
}

// TestConcurrencyKeyOneAtATime: with concurrency 1 per order, three runs
// of one order wait (RUNNING, waitingFor CONCURRENCY) while the first
// calls the service, a run of another order goes ahead, and the three
// follow one at a time, in arrival order: the service never sees two calls
// of one order at once.
func TestConcurrencyKeyOneAtATime(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	svc := newHeldService(t)
	flowID := limitedFlow(t, p, key, svc.URL+"/orders", `"concurrency": {"limit": 1, "key": "trigger.body.order"}`)

	var last int64
	runs := map[string]string{}
	runs["A1"] = deliverAfter(t, p, flowID, `{"order": "A", "id": "A1"}`, &last)
	if got := svc.next(t); got != "A1" {
		t.Fatalf("first call %s, want A1", got)
	}
	for _, id := range []string{"A2", "A3", "A4"} {
		runs[id] = deliverAfter(t, p, flowID, fmt.Sprintf(`{"order": "A", "id": %q}`, id), &last)
	}
	runs["B1"] = deliverAfter(t, p, flowID, `{"order": "B", "id": "B1"}`, &last)
	if got := svc.next(t); got != "B1" {
		t.Fatalf("while A1 holds order A, the next call is %s, want B1 (another order)", got)
	}
	for _, id := range []string{"A2", "A3", "A4"} {
		waitFor(t, id+" waiting for CONCURRENCY", func() bool {
			r := getRun(t, p, key, flowID, runs[id])
			return r.Status == "RUNNING" && r.WaitingFor == "CONCURRENCY"
		})
	}
	// flowctl says why they wait, on the run and in the list; B1, which
	// executes, waits for nothing.
	c := newCtl(t, "FLOWCTL_URL="+p.base)
	if out := c.ok("", "--data-dir", dir, "runs", "get", flowID, runs["A2"]); !regexp.MustCompile(`(?m)^Waiting for:\s+CONCURRENCY$`).MatchString(out) {
		t.Errorf("flowctl runs get of a waiting run:\n%s", out)
	}
	if out := c.ok("", "--data-dir", dir, "runs", "list", flowID); !tableRow(out, "ID", "STATUS", "WAITING FOR") ||
		!tableRow(out, runs["A3"], "RUNNING", "CONCURRENCY") || !tableRow(out, runs["B1"], "RUNNING", "-") {
		t.Errorf("flowctl runs list while A2-A4 wait:\n%s", out)
	}
	svc.release("B1")
	for _, id := range []string{"A1", "A2", "A3"} {
		svc.release(id)
		want := fmt.Sprintf("A%d", id[1]-'0'+1)
		if got := svc.next(t); got != want {
			t.Fatalf("after %s, the next call is %s, want %s (arrival order)", id, got, want)
		}
		if r := getRun(t, p, key, flowID, runs[want]); r.Status != "RUNNING" || r.WaitingFor != "" {
			t.Fatalf("%s executing: %+v, want RUNNING waiting for nothing", want, r)
		}
	}
	svc.release("A4")
	for id, runID := range runs {
		waitFor(t, id+" SUCCEEDED", func() bool { return getRun(t, p, key, flowID, runID).Status == "SUCCEEDED" })
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.most["A"] != 1 {
		t.Errorf("the service saw %d calls of order A at once, want 1", svc.most["A"])
	}
	if want := []string{"A1", "B1", "A2", "A3", "A4"}; !slices.Equal(svc.order, want) {
		t.Errorf("calls in order %v, want %v", svc.order, want)
	}
}

// TestThrottleCountsStarts: a throttle of 2 runs per 2 s starts the first
// two of five runs at once and the others only as earlier starts leave the
// period: no window of the period holds more than two starts (the runs'
// start times, counted), and the waiting runs start in arrival order.
func TestThrottleCountsStarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	svc := newHeldService(t)
	flowID := limitedFlow(t, p, key, svc.URL+"/orders", `"throttle": {"limit": 2, "period": "2s"}`)

	var last int64
	var ids []string
	for i := range 5 {
		ids = append(ids, deliverAfter(t, p, flowID, fmt.Sprintf(`{"order": "A", "id": "T%d"}`, i), &last))
	}
	// The calls are let go at once: a throttle bounds starts, not runs
	// at once.
	go func() {
		for range 5 {
			select {
			case id := <-svc.arrived:
				svc.release(id)
			case <-time.After(60 * time.Second):
				return
			}
		}
	}()
	waitFor(t, "a third run waiting for THROTTLE", func() bool {
		return slices.ContainsFunc(ids, func(id string) bool { return getRun(t, p, key, flowID, id).WaitingFor == "THROTTLE" })
	})
	var starts []time.Time
	for _, id := range ids {
		var r limitedRun
		waitFor(t, "run "+id+" to end", func() bool {
			r = getRun(t, p, key, flowID, id)
			return r.Status != "RUNNING"
		})
		if r.Status != "SUCCEEDED" {
			t.Fatalf("run %s: %+v", id, r)
		}
		starts = append(starts, *r.Started)
	}
	// A start is counted when the run is admitted; the engine stamps
	// `started` a few milliseconds later, differently for each run: slack
	// for that stamp, far below the period.
	const stamp = 100 * time.Millisecond
	// Arrival order: run i waits for the start of run i-2 (two before it)
	// to leave the period; a run that overtook an earlier one would start
	// sooner. Runs admitted together (two slots freed at once) may stamp
	// their starts in either order.
	for i := 2; i < len(starts); i++ {
		if gap := starts[i].Sub(starts[i-2]); gap < 2*time.Second-stamp {
			t.Errorf("run %d started %v after run %d: it did not wait its turn (starts %v)", i, gap, i-2, starts)
		}
	}
	sorted := slices.SortedFunc(slices.Values(starts), time.Time.Compare)
	for i := 2; i < len(sorted); i++ {
		if gap := sorted[i].Sub(sorted[i-2]); gap < 2*time.Second-stamp {
			t.Errorf("three starts within %v, less than the 2 s period (starts %v)", gap, starts)
		}
	}
}

// TestFlowLimitsValidation: a bad concurrency or throttle is a 400 naming
// the field, and null removes a bound.
func TestFlowLimitsValidation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn")
	key := initialKey(t, dir)
	var flow struct {
		ID          string
		Concurrency *struct{ Limit int }
		Throttle    *struct{ Limit int }
	}
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "v", "engine": "FLOW_BUILDER", "concurrency": {"limit": 2, "key": "trigger.body.user"},
		"throttle": {"limit": 10, "period": "1m"}, "steps": []}`, 201, &flow)
	if flow.Concurrency == nil || flow.Concurrency.Limit != 2 || flow.Throttle == nil || flow.Throttle.Limit != 10 {
		t.Fatalf("created %+v", flow)
	}
	for _, tc := range []struct{ body, field string }{
		{`{"concurrency": {"limit": 0}}`, "concurrency.limit"},
		{`{"concurrency": {"limit": 1001}}`, "concurrency.limit"},
		{`{"concurrency": {"limit": 1, "key": "trigger.body.("}}`, "concurrency.key"},
		{`{"throttle": {"limit": 1}}`, "throttle.period"},
		{`{"throttle": {"limit": 1, "period": "soon"}}`, "throttle.period"},
		{`{"throttle": {"limit": 1, "period": "100ms"}}`, "throttle.period"},
		{`{"throttle": {"limit": 1, "period": "25h"}}`, "throttle.period"},
		{`{"throttle": {"limit": -1, "period": "1m"}}`, "throttle.limit"},
		{`{"throttle": {"limit": 1, "period": "1m", "key": "1 +"}}`, "throttle.key"},
		{`{"throttle": {"limit": 1, "period": "1m", "burst": 3}}`, "burst"},
	} {
		var e struct {
			Error struct{ Code, Message string }
		}
		api(t, p, key, "POST", "/api/v1/flows/"+flow.ID, tc.body, 400, &e)
		if !strings.Contains(e.Error.Message, tc.field) {
			t.Errorf("%s: 400 %q, want it to name %s", tc.body, e.Error.Message, tc.field)
		}
	}
	var after struct {
		Concurrency *struct{ Limit int }
		Throttle    *struct{ Limit int }
	}
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID, `{"concurrency": null}`, 200, &after)
	if after.Concurrency != nil || after.Throttle == nil || after.Throttle.Limit != 10 {
		t.Errorf("after concurrency null: %+v, want the throttle alone", after)
	}
}

// TestConcurrentRunsQuotaWaits: past its project's concurrentRuns quota a
// run waits (RUNNING, waitingFor QUOTA) and starts when a run ends.
func TestConcurrentRunsQuotaWaits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	env := []string{"FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn"}
	p := startFlowd(t, dir, env...)
	key := initialKey(t, dir)
	var projects []struct{ Name string }
	out, err := flowctl(t, dir, "projects", "list", "-o", "json")
	if err != nil || json.Unmarshal([]byte(out), &projects) != nil || len(projects) != 1 {
		t.Fatalf("projects list: %v %s", err, out)
	}
	if out, err := flowctl(t, dir, "projects", "set-limits", projects[0].Name, "--concurrentRuns", "2"); err != nil {
		t.Fatalf("set-limits: %v %s", err, out)
	}
	p.stop(t) // a new process reads the limits at once
	p = startFlowd(t, dir, env...)
	svc := newHeldService(t)
	// Two flows: the quota is the project's, whatever the flow.
	one := limitedFlow(t, p, key, svc.URL+"/a", `"description": "one"`)
	two := limitedFlow(t, p, key, svc.URL+"/b", `"description": "two"`)

	var last int64
	r1 := deliverAfter(t, p, one, `{"order": "all", "id": "Q1"}`, &last)
	r2 := deliverAfter(t, p, two, `{"order": "all", "id": "Q2"}`, &last)
	got := []string{svc.next(t), svc.next(t)}
	slices.Sort(got)
	if !slices.Equal(got, []string{"Q1", "Q2"}) {
		t.Fatalf("first calls %v, want Q1 and Q2", got)
	}
	r3 := deliverAfter(t, p, one, `{"order": "all", "id": "Q3"}`, &last)
	waitFor(t, "the third run waiting for QUOTA", func() bool {
		r := getRun(t, p, key, one, r3)
		return r.Status == "RUNNING" && r.WaitingFor == "QUOTA"
	})
	svc.release("Q2")
	if got := svc.next(t); got != "Q3" {
		t.Fatalf("after Q2 ended, the next call is %s, want Q3", got)
	}
	svc.release("Q1")
	svc.release("Q3")
	for runID, flowID := range map[string]string{r1: one, r2: two, r3: one} {
		waitFor(t, runID+" SUCCEEDED", func() bool { return getRun(t, p, key, flowID, runID).Status == "SUCCEEDED" })
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if svc.most["all"] != 2 {
		t.Errorf("the service saw %d of the project's runs at once, want at most (and reaching) 2", svc.most["all"])
	}
}

// TestFairSharesAcrossProjects: one project floods flowd (4 workers) with
// 400 runs whose calls the third party holds; alone, it holds every
// worker. Another project's run is then queued behind the flood, and one
// flood call is let go: the worker it frees takes the quiet run, not the
// next of the flood. The order of calls says it, not a time.
func TestFairSharesAcrossProjects(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_WORKERS=4")
	floodKey := initialKey(t, dir)
	if out, err := flowctl(t, dir, "projects", "create", "quiet", "--plan", "ENTERPRISE"); err != nil {
		t.Fatalf("projects create: %v %s", err, out)
	}
	quietKey, err := flowctl(t, dir, "keys", "create", "--project", "quiet")
	if err != nil {
		t.Fatalf("keys create: %v %s", err, quietKey)
	}
	quietKey = strings.TrimSpace(quietKey)

	var mu sync.Mutex
	var arrivals []string // ids of the calls, in the order they reached the third party
	held := 0             // flood calls held now
	letGo := make(chan struct{})
	hold := make(chan struct{})
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(hold) }) }
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var call struct{ ID string }
		_ = json.NewDecoder(r.Body).Decode(&call)
		mu.Lock()
		arrivals = append(arrivals, call.ID)
		mu.Unlock()
		if call.ID != "quiet" {
			mu.Lock()
			held++
			mu.Unlock()
			defer func() { mu.Lock(); held--; mu.Unlock() }()
			select { // a flood call waits until the test lets it go
			case <-letGo:
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(release) // before slow.Close, which waits for the held calls
	flood := limitedFlow(t, p, floodKey, slow.URL, `"description": "flood"`)
	quiet := limitedFlow(t, p, quietKey, slow.URL, `"description": "quiet"`)

	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				resp, err := http.Post(p.base+"/api/v1/webhooks/"+flood, "application/json", strings.NewReader(fmt.Sprintf(`{"id": "F%d-%d"}`, g, i)))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	state := func() (int, []string) {
		mu.Lock()
		defer mu.Unlock()
		return held, slices.Clone(arrivals)
	}
	testwait.Event(t, "the flood to hold all 4 workers", func() bool { n, _ := state(); return n == 4 })
	var last int64
	runID := deliverAfter(t, p, quiet, `{"id": "quiet"}`, &last)
	_, before := state()
	letGo <- struct{}{} // one flood call ends: its worker is the only one free
	testwait.Event(t, "a call after the one let go", func() bool { _, a := state(); return len(a) > len(before) })
	if _, a := state(); a[len(before)] != "quiet" {
		t.Fatalf("the freed worker called for %s, want the quiet project's run ahead of the flood's backlog", a[len(before)])
	}
	release()
	waitFor(t, "the quiet project's run to end", func() bool {
		return getRun(t, p, quietKey, quiet, runID).Status != "RUNNING"
	})
	if r := getRun(t, p, quietKey, quiet, runID); r.Status != "SUCCEEDED" {
		t.Fatalf("the quiet project's run: %+v, want SUCCEEDED", r)
	}
}

// TestOnCompletionWaitCountsTowardSyncTimeout: a synchronous webhook whose
// run waits for its flow's concurrency answers 504 when the sync timeout
// (2 s here) passes; the run goes on and succeeds once the slot frees.
func TestOnCompletionWaitCountsTowardSyncTimeout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_ALLOW_PRIVATE_NETWORKS=true", "FLOWD_LOG_LEVEL=warn", "FLOWD_SYNC_TIMEOUT=2s")
	key := initialKey(t, dir)
	svc := newHeldService(t)
	var flow struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "sync", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "sync/orders", "responseMode": "ON_COMPLETION"}},
		"concurrency": {"limit": 1},
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"key": "k", "id": "{{ trigger.body.id }}"}}]}`, svc.URL), 201, &flow)
	api(t, p, key, "POST", "/api/v1/flows/"+flow.ID+"/enable", "", 200, nil)

	first := make(chan int, 1)
	go func() {
		resp, err := http.Post(p.base+"/webhook/sync/orders", "application/json", strings.NewReader(`{"id": "S1"}`))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	if got := svc.next(t); got != "S1" {
		t.Fatalf("first call %s, want S1", got)
	}
	resp, err := http.Post(p.base+"/webhook/sync/orders", "application/json", strings.NewReader(`{"id": "S2"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("the waiting run's webhook answered %d, want 504 after the sync timeout", resp.StatusCode)
	}
	if code := <-first; code != http.StatusGatewayTimeout {
		t.Fatalf("the first webhook (its call held) answered %d, want 504", code)
	}
	var waiting struct{ Data []limitedRun }
	api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/runs", "", 200, &waiting)
	if len(waiting.Data) != 2 || waiting.Data[0].WaitingFor != "CONCURRENCY" {
		t.Fatalf("runs after the 504s: %+v; want the newest waiting for CONCURRENCY", waiting.Data)
	}
	svc.mu.Lock()
	calls := slices.Clone(svc.order)
	svc.mu.Unlock()
	if !slices.Equal(calls, []string{"S1"}) {
		t.Fatalf("calls while S1 held the slot: %v, want S1 alone", calls)
	}
	svc.release("S1")
	if got := svc.next(t); got != "S2" {
		t.Fatalf("after S1, the next call is %s, want S2", got)
	}
	svc.release("S2")
	var runs struct{ Data []limitedRun }
	waitFor(t, "both runs SUCCEEDED", func() bool {
		api(t, p, key, "GET", "/api/v1/flows/"+flow.ID+"/runs", "", 200, &runs)
		return len(runs.Data) == 2 && runs.Data[0].Status == "SUCCEEDED" && runs.Data[1].Status == "SUCCEEDED"
	})
}
