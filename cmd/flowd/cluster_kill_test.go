package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/internal/testwait"
	"flowservice/pkg/pgstore/pgtest"
)

// clusterSink is the outside service of TestPostgresClusterKill9: it
// records every call of the flows' HTTP steps with its Idempotency-Key, can
// hold the next call of the sync flow until the node making it is killed,
// and answers and counts the POLL flow's polls.
type clusterSink struct {
	mu       sync.Mutex
	byRun    map[string]string          // run → the delivery it carried (async flow)
	runsOf   map[string]map[string]bool // delivery → the runs that called with it
	keys     map[string]int             // Idempotency-Key → calls
	badKeys  []string                   // calls whose key is not <run>.call
	polls    int
	armed    bool
	held     chan string   // the run of the held call
	released chan struct{} // closed to let the held call answer
}

func newClusterSink() *clusterSink {
	return &clusterSink{byRun: map[string]string{}, runsOf: map[string]map[string]bool{}, keys: map[string]int{}}
}

// arm makes the next call of the sync flow wait, and returns where its run
// is reported and how to let it go.
func (s *clusterSink) arm() (held <-chan string, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed, s.held, s.released = true, make(chan string, 1), make(chan struct{})
	rel := s.released
	return s.held, sync.OnceFunc(func() { close(rel) })
}

func (s *clusterSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/poll" {
		s.mu.Lock()
		s.polls++
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"items": []}`)
		return
	}
	var body struct{ Run, N string }
	_ = json.NewDecoder(r.Body).Decode(&body)
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	s.keys[key]++
	if key != body.Run+".call" {
		s.badKeys = append(s.badKeys, fmt.Sprintf("%s on %s for run %s", key, r.URL.Path, body.Run))
	}
	if r.URL.Path == "/async" {
		s.byRun[body.Run] = body.N
		if s.runsOf[body.N] == nil {
			s.runsOf[body.N] = map[string]bool{}
		}
		s.runsOf[body.N][body.Run] = true
	}
	var release chan struct{}
	if r.URL.Path == "/sync" && s.armed {
		s.armed, release = false, s.released
		s.held <- body.Run
	}
	s.mu.Unlock()
	if release != nil {
		// The side effect has happened; the node that asked dies before it
		// learns so, and the run's next executor calls again.
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	io.WriteString(w, `{"ok": true}`)
}

// TestPostgresClusterKill9 runs three flowd nodes on one PostgreSQL
// database, sends webhooks round robin across them and, every few accepted
// deliveries, kills a node with SIGKILL in the middle of a run's HTTP call
// and starts it again. Every delivery answered 2xx has exactly one run,
// every run finishes, a run executed again after its node's death calls
// with the same Idempotency-Key (one key per run and step), a POLL flow's
// ticks are each polled once across the nodes, including across the death
// of the node holding the cron duty, and a flow made on one node is served
// by another at once.
func TestPostgresClusterKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts flowd processes on a PostgreSQL cluster")
	}
	const (
		every = 8  // accepted deliveries between kills
		kills = 3  // the second kills the holder of the cron duty
		total = 40 // accepted deliveries in all
	)
	dbURL, secret := pgtest.URL(t), newSecretKey(t)
	sink := newClusterSink()
	srv := httptest.NewServer(sink)
	defer srv.Close()
	// Polls on every whole second, aligned alike on every node (a hook of
	// the flowdtest build), so that a tick two nodes polled is named twice.
	env := append(clusterEnv(dbURL, secret), "FLOWD_TEST_POLL_TICK=1s")

	var (
		mu    sync.Mutex
		cond  = sync.NewCond(&mu)
		nodes [3]*proc // nil while killed
		all   []*proc  // every process started, for their logs
	)
	dirs := [3]string{}
	for i := range dirs {
		dirs[i] = filepath.Join(t.TempDir(), fmt.Sprint("node", i))
	}
	for i := range nodes {
		nodes[i] = startFlowd(t, dirs[i], env...)
		all = append(all, nodes[i])
	}
	key := initialKey(t, dirs[0])

	webhook := func(p *proc, path, body string) (int, string) {
		resp, err := http.Post(p.base+path, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, ""
		}
		defer resp.Body.Close()
		var got struct{ RunID string }
		_ = json.NewDecoder(resp.Body).Decode(&got)
		return resp.StatusCode, got.RunID
	}
	// servedAtOnce makes a flow on one node and delivers to it through
	// another at once: no node caches flows.
	servedAtOnce := func(maker, server *proc, name string) {
		t.Helper()
		var f struct{ ID string }
		api(t, maker, key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": %q, "engine": "FLOW_BUILDER",
			"steps": [{"name": "set", "type": "SET", "values": {"ok": true}}]}`, name), 201, &f)
		api(t, maker, key, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)
		if st, run := webhook(server, "/api/v1/webhooks/"+f.ID, `{}`); st/100 != 2 || run == "" {
			t.Fatalf("flow %s made on %s, delivered through %s at once: %d run %q, want 2xx with a run", f.ID, maker.base, server.base, st, run)
		}
	}
	servedAtOnce(nodes[0], nodes[1], "made on one node")

	var async, syncFlow, poll struct{ ID string }
	api(t, nodes[0], key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "async", "engine": "FLOW_BUILDER",
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"run": "{{ run.id }}", "n": "{{ trigger.body.n }}"}}]}`,
		srv.URL+"/async"), 201, &async)
	api(t, nodes[1], key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "sync", "engine": "WORKFLOW_BUILDER",
		"trigger": {"type": "WEBHOOK", "webhook": {"httpMethod": "POST", "path": "cluster/sync", "responseMode": "ON_COMPLETION"}},
		"steps": [{"name": "call", "type": "HTTP", "method": "POST", "url": %q, "body": {"run": "{{ run.id }}"}}]}`,
		srv.URL+"/sync"), 201, &syncFlow)
	api(t, nodes[2], key, "POST", "/api/v1/flows", fmt.Sprintf(`{"name": "poll", "engine": "FLOW_BUILDER",
		"trigger": {"type": "POLL", "poll": {"every": "10s", "request": {"url": %q}, "items": "response.body.items", "key": "item.id"}},
		"steps": [{"name": "set", "type": "SET", "values": {"ok": true}}]}`, srv.URL+"/poll"), 201, &poll)
	for i, f := range []string{async.ID, syncFlow.ID, poll.ID} {
		api(t, nodes[i], key, "POST", "/api/v1/flows/"+f+"/enable", "", 200, nil)
	}

	// Three senders, round robin over the live nodes. They pause when
	// gate deliveries are accepted, so that kills come at counts of
	// deliveries, not at times.
	var (
		accepted = map[string]string{} // delivery → its run
		refused  int                   // deliveries not answered 2xx (their node died)
		rr, seq  int
		gate     = every
		stop     bool
		senders  sync.WaitGroup
	)
	for range 3 {
		senders.Go(func() {
			for {
				mu.Lock()
				for !stop && len(accepted) >= gate {
					cond.Wait()
				}
				if stop || seq >= 20*total {
					mu.Unlock()
					return
				}
				n := fmt.Sprintf("d%d", seq)
				seq++
				var p *proc
				for i := range nodes {
					if s := (rr + i) % len(nodes); nodes[s] != nil {
						p, rr = nodes[s], s+1
						break
					}
				}
				mu.Unlock()
				st, run := webhook(p, "/api/v1/webhooks/"+async.ID, `{"n": "`+n+`"}`)
				mu.Lock()
				if st/100 == 2 && run != "" {
					accepted[n] = run
				} else {
					refused++
				}
				cond.Broadcast()
				mu.Unlock()
			}
		})
	}
	defer func() {
		mu.Lock()
		stop = true
		cond.Broadcast()
		mu.Unlock()
		senders.Wait()
	}()
	acceptedAtLeast := func(n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(accepted) >= n
		}
	}
	cronHolder := func() int {
		mu.Lock()
		defer mu.Unlock()
		for i, p := range nodes {
			if p != nil && logged(p, "cluster duty taken", `"duty":"cron"`) > logged(p, "cluster duty lost", `"duty":"cron"`) {
				return i
			}
		}
		return -1
	}

	var heldRuns []string
	pollsAtHolderKill := -1
	for k := 1; k <= kills; k++ {
		testwait.Event(t, fmt.Sprintf("%d accepted deliveries", k*every), acceptedAtLeast(k*every))
		slot := rand.IntN(len(nodes))
		if k == 2 {
			testwait.Event(t, "a live node to hold the cron duty", func() bool { return cronHolder() >= 0 })
			slot = cronHolder()
		}
		// A few more deliveries round robin, some of them to the victim,
		// whose runs it may be executing when it dies.
		mu.Lock()
		victim := nodes[slot]
		gate = k*every + 3
		cond.Broadcast()
		mu.Unlock()
		testwait.Event(t, "deliveries before the kill", acceptedAtLeast(k*every+3))
		// An ON_COMPLETION run is executed by the node that received it:
		// its call is held at the sink and the node killed at once, well
		// within the run's timeout.
		held, release := sink.arm()
		syncAnswer := make(chan int, 1)
		go func() {
			st, _ := webhook(victim, "/webhook/cluster/sync", `{}`)
			syncAnswer <- st
		}()
		var run string
		select {
		case run = <-held:
		case <-time.After(testwait.Hang):
			t.Fatalf("kill %d: the sync flow's call on %s never came", k, victim.base)
		}
		heldRuns = append(heldRuns, run)
		mu.Lock()
		nodes[slot] = nil
		gate = min((k+1)*every, total)
		if k == kills {
			gate = total
		}
		cond.Broadcast()
		mu.Unlock()
		if k == 2 {
			sink.mu.Lock()
			pollsAtHolderKill = sink.polls
			sink.mu.Unlock()
		}
		if err := victim.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-victim.exited
		release()
		if st := <-syncAnswer; st/100 == 2 {
			t.Errorf("kill %d: the held ON_COMPLETION webhook on the killed node answered %d", k, st)
		}
		t.Logf("kill %d: node %d (%s) killed during run %s's call", k, slot, victim.base, run)
		p := startFlowd(t, dirs[slot], env...)
		mu.Lock()
		nodes[slot], all = p, append(all, p)
		mu.Unlock()
	}
	testwait.Event(t, fmt.Sprintf("%d accepted deliveries", total), acceptedAtLeast(total))
	mu.Lock()
	stop = true
	cond.Broadcast()
	mu.Unlock()
	senders.Wait()
	// A node started after the kills serves a flow made on another.
	servedAtOnce(nodes[0], nodes[2], "made after the kills")

	// Every run finishes: those the killed nodes held are taken up when
	// their leases (15 s here) run out.
	type summary struct{ ID, Status string }
	runsOf := func(flow string) []summary {
		var out []summary
		cursor := ""
		for {
			var page struct {
				Data   []summary
				Cursor *string
			}
			api(t, nodes[1], key, "GET", "/api/v1/flows/"+flow+"/runs?limit=100&cursor="+cursor, "", 200, &page)
			out = append(out, page.Data...)
			if page.Cursor == nil || *page.Cursor == "" {
				return out
			}
			cursor = *page.Cursor
		}
	}
	// The cron duty moved: polls go on after its holder's death.
	testwait.Event(t, "a poll after the cron duty's holder was killed", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink.polls > pollsAtHolderKill
	})
	var asyncRuns, syncRuns []summary
	testwait.Paced(t, 250*time.Millisecond, "every run to finish", func() bool {
		asyncRuns, syncRuns = runsOf(async.ID), runsOf(syncFlow.ID)
		for _, r := range append(append([]summary{}, asyncRuns...), syncRuns...) {
			if r.Status == "RUNNING" {
				return false
			}
		}
		return true
	})

	sink.mu.Lock()
	defer sink.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d deliveries accepted, %d refused (node down or killed); %d async and %d sync runs; %d polls",
		len(accepted), refused, len(asyncRuns), len(syncRuns), sink.polls)
	listed := map[string]bool{}
	for _, r := range append(append([]summary{}, asyncRuns...), syncRuns...) {
		listed[r.ID] = true
		if r.Status != "SUCCEEDED" {
			t.Errorf("run %s ended %s, want SUCCEEDED", r.ID, r.Status)
		}
	}
	// Every accepted delivery has exactly one run, the one it was answered
	// with; any run of the flow carries a delivery (one refused at a kill
	// may have a run too: its sender would send it again).
	for n, run := range accepted {
		if !listed[run] {
			t.Errorf("delivery %s was accepted with run %s, which is not among the flow's runs", n, run)
		}
		if got := sink.runsOf[n]; len(got) != 1 || !got[run] {
			t.Errorf("delivery %s (run %s) made calls from runs %v, want from its run alone", n, run, got)
		}
	}
	for _, r := range asyncRuns {
		if _, ok := sink.byRun[r.ID]; !ok {
			t.Errorf("run %s succeeded without its call", r.ID)
		}
	}
	// One Idempotency-Key per run and step, however often it was executed.
	if len(sink.keys) != len(listed) || len(sink.badKeys) > 0 {
		t.Errorf("%d distinct Idempotency-Keys for %d runs (each with one HTTP step); keys not <run>.call: %v", len(sink.keys), len(listed), sink.badKeys)
	}
	for _, run := range heldRuns {
		if sink.keys[run+".call"] < 2 {
			t.Errorf("run %s, whose node died during its call, called %d times with its key, want again after the takeover", run, sink.keys[run+".call"])
		}
	}

	// Each poll tick was taken by one node: the firings logged by every
	// process that ever ran, killed ones included, name each tick once,
	// and the sink saw no more polls than firings. A node logs its firing
	// before it polls, but the test reads that line from a pipe copied by
	// another goroutine, so a poll can reach the sink before its line
	// reaches the test: wait, with the sink unlocked so polls go on, until
	// the lines have caught up with the polls counted.
	fired := regexp.MustCompile(`"msg":"poll fired".*"flow":"` + poll.ID + `","firedAt":"([^"]+)"`)
	var (
		ticks   map[string]int
		firings int
	)
	readFirings := func() {
		ticks, firings = map[string]int{}, 0
		for _, p := range all {
			for _, m := range fired.FindAllStringSubmatch(p.stderr.String(), -1) {
				ticks[m[1]]++
				firings++
			}
		}
	}
	polls := sink.polls
	sink.mu.Unlock()
	// A wait that runs out is the sink having seen more polls than firings.
	testwait.Event(t, fmt.Sprintf("the %d polls the sink saw to be logged as firings", polls), func() bool {
		readFirings()
		return firings >= polls
	})
	sink.mu.Lock()
	for tick, n := range ticks {
		if n > 1 {
			t.Errorf("poll tick %s fired %d times across the nodes, want once", tick, n)
		}
	}
	t.Logf("%d poll firings logged, on %d distinct ticks", firings, len(ticks))
	if polls < 3 {
		t.Errorf("the sink saw %d polls; want at least 3", polls)
	}
}
