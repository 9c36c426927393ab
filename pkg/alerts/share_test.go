package alerts_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/alerts"
	"flowservice/pkg/automation"
	"flowservice/pkg/engine"
	"flowservice/pkg/sqlitestore"
)

// hangingReceiver accepts every delivery and never answers until the test
// ends; it counts what it holds, in all and by path.
type hangingReceiver struct {
	srv     *httptest.Server
	arrived chan string // the path of each request, as it arrives
	release chan struct{}

	mu              sync.Mutex
	held, most      int
	byPath, mostPer map[string]int
}

func newHangingReceiver(t *testing.T) *hangingReceiver {
	h := &hangingReceiver{arrived: make(chan string, 1000), release: make(chan struct{}),
		byPath: map[string]int{}, mostPer: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.held++
		h.most = max(h.most, h.held)
		h.byPath[r.URL.Path]++
		h.mostPer[r.URL.Path] = max(h.mostPer[r.URL.Path], h.byPath[r.URL.Path])
		h.mu.Unlock()
		h.arrived <- r.URL.Path
		select {
		case <-h.release:
		case <-r.Context().Done():
		}
		h.mu.Lock()
		h.held--
		h.byPath[r.URL.Path]--
		h.mu.Unlock()
	}))
	t.Cleanup(func() {
		close(h.release)
		h.srv.Close()
	})
	return h
}

func (h *hangingReceiver) peaks() (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	per := 0
	for _, n := range h.mostPer {
		per = max(per, n)
	}
	return h.most, per
}

// goodReceiver answers 204 at once and reports each webhook-id and
// User-Agent it gets.
type goodReceiver struct {
	srv *httptest.Server
	got chan [2]string
}

func newGoodReceiver(t *testing.T) *goodReceiver {
	g := &goodReceiver{got: make(chan [2]string, 1000)}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		g.got <- [2]string{r.Header.Get(alerts.HeaderID), r.Header.Get("User-Agent")}
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// sender is a Service as flowd wires it (NewClient over the guarded
// transport, private addresses allowed for the test's receivers), sending
// with Run until the test ends.
func sender(t *testing.T, c *clock, cfg alerts.Config) (*alerts.Service, *sqlitestore.Store) {
	t.Helper()
	store, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "alerts.db"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Flows, cfg.Clock = store, store, c.now
	cfg.Client = alerts.NewClient(engine.GuardedTransport(true))
	svc, err := alerts.NewService(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		svc.Run(ctx, store.AlertsWritten(), time.Hour)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		store.Close()
	})
	return svc, store
}

// emit writes n run.failed events of the project, with their deliveries.
func emit(t *testing.T, store *sqlitestore.Store, c *clock, project string, n int) []string {
	t.Helper()
	ctx := context.Background()
	subs, err := store.Subscriptions(ctx, project)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range n {
		e, err := alerts.NewEvent(project, alerts.EventRunFailed, "flw_1", map[string]string{"id": fmt.Sprint("run_", i)}, c.now())
		if err != nil {
			t.Fatal(err)
		}
		if err := store.AddEvent(ctx, e, alerts.Fanout(e, subs)); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	return ids
}

// TestSlowProjectDoesNotStallOthers: project A has 20 subscriptions to a
// server that accepts connections and never answers, and 100 deliveries
// due; project B's 14 failure alerts, written once A's attempts hang, all
// arrive promptly, while A holds no more than its share of the senders
// and a subscription no more than its own.
func TestSlowProjectDoesNotStallOthers(t *testing.T) {
	ctx := context.Background()
	hang, good := newHangingReceiver(t), newGoodReceiver(t)
	c := &clock{}
	c.set(time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC))
	svc, store := sender(t, c, alerts.Config{})
	a, b := automation.Project{ID: "prj_a"}, automation.Project{ID: "prj_b"}
	for i := range alerts.MaxSubscriptions {
		if _, err := svc.CreateSubscription(ctx, a, alerts.Input{URL: fmt.Sprintf("%s/a%d", hang.srv.URL, i), Events: []string{alerts.EventRunFailed}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.CreateSubscription(ctx, b, alerts.Input{URL: good.srv.URL, Events: []string{alerts.EventRunFailed}}); err != nil {
		t.Fatal(err)
	}
	emit(t, store, c, a.ID, 5)
	for range alerts.PerProjectSenders {
		<-hang.arrived // A holds its share, hanging
	}

	start := time.Now()
	want := map[string]bool{}
	for _, id := range emit(t, store, c, b.ID, 14) {
		want[id] = true
	}
	limit := time.After(30 * time.Second) // fails the test; the figure is asserted below
	for len(want) > 0 {
		select {
		case got := <-good.got:
			delete(want, got[0])
		case <-limit:
			t.Fatalf("project B's alerts behind project A's hanging receivers: %d of 14 missing after 30 s", len(want))
		}
	}
	took := time.Since(start)
	t.Logf("project B's 14 alerts arrived in %v while project A's receivers hung", took)
	if took > 10*time.Second {
		t.Errorf("project B's 14 alerts took %v behind project A's hanging receivers, want a few seconds", took)
	}
	if most, per := hang.peaks(); most > alerts.PerProjectSenders || per > alerts.PerSubscription {
		t.Errorf("project A held %d senders (at most %d allowed), %d for one subscription (at most %d)",
			most, alerts.PerProjectSenders, per, alerts.PerSubscription)
	}
}

// TestSlowSubscriptionHoldsTwo: one subscription's receiver hangs with 6
// deliveries due: it holds 2 senders, and the project's other
// subscription still gets its events.
func TestSlowSubscriptionHoldsTwo(t *testing.T) {
	ctx := context.Background()
	hang, good := newHangingReceiver(t), newGoodReceiver(t)
	c := &clock{}
	c.set(time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC))
	svc, store := sender(t, c, alerts.Config{})
	p := automation.Project{ID: "prj_a"}
	slow, err := svc.CreateSubscription(ctx, p, alerts.Input{URL: hang.srv.URL, Events: []string{alerts.EventPing}})
	if err != nil {
		t.Fatal(err)
	}
	for range 6 {
		if _, err := svc.Test(ctx, p, slow.ID); err != nil {
			t.Fatal(err)
		}
	}
	for range alerts.PerSubscription {
		<-hang.arrived
	}
	if _, err := svc.CreateSubscription(ctx, p, alerts.Input{URL: good.srv.URL, Events: []string{alerts.EventRunFailed}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, id := range emit(t, store, c, p.ID, 3) {
		want[id] = true
	}
	for len(want) > 0 {
		select {
		case got := <-good.got:
			delete(want, got[0])
		case <-time.After(30 * time.Second):
			t.Fatalf("the project's good receiver behind its hanging one: %d of 3 missing", len(want))
		}
	}
	if most, per := hang.peaks(); most != alerts.PerSubscription || per != alerts.PerSubscription {
		t.Errorf("the hanging subscription held %d senders, want %d", most, alerts.PerSubscription)
	}
}
