package automation_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/flowtest"
)

// TestPollFlow drives Service.PollFlow over the real store and engine
// against a feed whose items change: the first poll records, each new key
// starts one run with the item as trigger.body (a key repeated within a
// poll once), a poll whose request, items or key changed records again
// before it starts runs, and a failing poll is the flow's lastError.
func TestPollFlow(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	items := []map[string]any{{"id": "a"}, {"id": "b"}}
	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"data": items, "also": items})
	}))
	t.Cleanup(feed.Close)
	set := func(ids ...string) {
		mu.Lock()
		defer mu.Unlock()
		items = nil
		for _, id := range ids {
			items = append(items, map[string]any{"id": id})
		}
	}

	fe := flowtest.New(t, flowtest.Options{})
	p, _ := fe.Project(t, "acme", automation.PlanEnterprise)
	name, eng, steps := "Feed", automation.FlowBuilder, []automation.Step{}
	trigger := func(items string) *automation.Trigger {
		return &automation.Trigger{Type: automation.TriggerPoll, Poll: &automation.Poll{Every: "1m",
			Request: automation.PollRequest{URL: feed.URL + "/items"}, Items: items, Key: "item.id"}}
	}
	f, err := fe.Svc.CreateFlow(ctx, p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps, Trigger: trigger("response.body.data")})
	if err != nil {
		t.Fatal(err)
	}
	if err := fe.Svc.PollFlow(ctx, p.ID, f.ID); !automation.IsFlowNotScheduled(err) {
		t.Errorf("polling an inactive flow = %v, want FLOW_NOT_SCHEDULED", err)
	}
	if _, err := fe.Svc.EnableFlow(ctx, p, f.ID); err != nil {
		t.Fatal(err)
	}
	poll := func() *automation.PollStatus {
		t.Helper()
		if err := fe.Svc.PollFlow(ctx, p.ID, f.ID); err != nil {
			t.Fatal(err)
		}
		g, err := fe.Svc.Flow(ctx, p, f.ID)
		if err != nil || g.Poll == nil {
			t.Fatalf("flow %+v %v: no poll status", g, err)
		}
		return g.Poll
	}
	runs := func() []string {
		t.Helper()
		page, err := fe.Store.ListRuns(ctx, p.ID, f.ID, automation.ListQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range page.Items {
			full, err := fe.Store.Run(ctx, p.ID, f.ID, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			var body struct{ ID string }
			json.Unmarshal(full.Trigger.Body, &body)
			if full.Trigger.Method != "POLL" {
				t.Errorf("run %s trigger method %q", r.ID, full.Trigger.Method)
			}
			ids = append(ids, body.ID)
		}
		return ids
	}

	if st := poll(); !st.Primed || st.SeenKeys != 2 || st.LastRuns != 0 || len(runs()) != 0 {
		t.Fatalf("first poll: %+v, runs %v", *st, runs())
	}
	set("c", "c", "b", "a")
	if st := poll(); st.LastRuns != 1 || st.SeenKeys != 3 {
		t.Fatalf("a new key, twice in one poll: %+v", *st)
	}
	if got := runs(); len(got) != 1 || got[0] != "c" {
		t.Fatalf("runs %v, want one for c", got)
	}
	if st := poll(); st.LastRuns != 0 || len(runs()) != 1 {
		t.Fatalf("nothing new: %+v, runs %v", *st, runs())
	}

	// Another source: its items are recorded, not run.
	if _, err := fe.Svc.UpdateFlow(ctx, p, f.ID, automation.FlowInput{Trigger: trigger("response.body.also")}); err != nil {
		t.Fatal(err)
	}
	if g, _ := fe.Svc.Flow(ctx, p, f.ID); g.Poll.Primed {
		t.Error("a changed poll shows primed before it recorded")
	}
	set("d", "c")
	if st := poll(); st.LastRuns != 0 || !st.Primed || len(runs()) != 1 {
		t.Fatalf("first poll of a changed source: %+v, runs %v", *st, runs())
	}
	set("e", "d")
	if st := poll(); st.LastRuns != 1 || len(runs()) != 2 {
		t.Fatalf("then a new key: %+v, runs %v", *st, runs())
	}

	// A key that names nothing fails the poll, shown on the flow.
	mu.Lock()
	items = append(items, map[string]any{"name": "no id"})
	mu.Unlock()
	st := poll()
	if st.LastError == nil || !strings.Contains(*st.LastError, "key of item 2 is empty") || st.LastErrorAt == nil {
		t.Fatalf("a bad item: %+v", *st)
	}
	set("e")
	if st := poll(); st.LastError != nil {
		t.Errorf("a good poll kept lastError %q", *st.LastError)
	}
}
