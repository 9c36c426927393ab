package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// webhookFlow is a workflow builder flow holding method (ANY or one of
// automation.WebhookMethods) on path, with a masked secret, steps carrying
// raw JSON, and an allowlist, so that every kind of field round-trips.
func webhookFlow(project, name, method, path string, created time.Time) automation.Flow {
	return automation.Flow{
		ID: automation.NewID(automation.PrefixFlow), Project: project,
		Name: name, Description: "the " + name + " flow",
		Status: automation.FlowInactive, Engine: automation.WorkflowBuilder,
		TriggerType: automation.TriggerWebhook, Created: created, Updated: created, Version: 1,
		Trigger: automation.Trigger{Type: automation.TriggerWebhook, Webhook: &automation.Webhook{
			HTTPMethod: method, Path: path, ResponseMode: automation.RespondImmediately,
			Authentication: &automation.Authentication{
				Type: automation.AuthHeader, Name: "X-Webhook-Secret", Value: automation.SecretMask},
			IdempotencyHeader: "Idempotency-Key",
		}},
		Steps: []automation.Step{
			{Name: "set", Type: automation.StepSet, Values: json.RawMessage(`{"a": 1, "b": ["x", null]}`)},
			{Name: "call", Type: automation.StepHTTP, Method: "POST",
				URL:     "https://api.example.com/items/{{ trigger.body.id }}",
				Headers: map[string]string{"X-Trace": "{{ trigger.headers.X-Trace }}"},
				Body:    json.RawMessage(`{"id": "{{ steps.set.a }}"}`), TimeoutMs: 5000},
			{Name: "respond", Type: automation.StepRespond, StatusCode: 202,
				Body: json.RawMessage(`{"status": "ok"}`)},
			// The flow language: nested steps, when, state and waits.
			{Name: "route", Type: automation.StepSwitch, When: "trigger.body.id != nil", Cases: []automation.Case{
				{When: "trigger.body.kind == 'order'", Steps: []automation.Step{
					{Name: "each", Type: automation.StepForEach, Items: json.RawMessage(`"trigger.body.items"`), Concurrency: 2,
						Steps: []automation.Step{{Name: "line", Type: automation.StepSet, Values: json.RawMessage(`{"i": "{{ index }}"}`)}}}}}},
				Default: []automation.Step{{Name: "remember", Type: automation.StepStore,
					Set: json.RawMessage(`{"last": "{{ trigger.body.id }}"}`), Delete: []string{"old"}}}},
			{Name: "pause", Type: automation.StepWait, Duration: "10m"},
		},
		OnError:    []automation.Step{{Name: "alert", Type: automation.StepSet, Values: json.RawMessage(`{"e": "{{ error.message }}"}`)}},
		AllowedIPs: []string{"203.0.113.0/24", "198.51.100.7"},
	}
}

// scheduleFlow is a flow builder flow on a schedule: it holds no route.
func scheduleFlow(project, name string, created time.Time) automation.Flow {
	return automation.Flow{
		ID: automation.NewID(automation.PrefixFlow), Project: project, Name: name,
		Status: automation.FlowInactive, Engine: automation.FlowBuilder,
		TriggerType: automation.TriggerSchedule, Created: created, Updated: created, Version: 1,
		Trigger: automation.Trigger{Type: automation.TriggerSchedule,
			Schedule: &automation.Schedule{Cron: "*/5 * * * *", Timezone: "Europe/Berlin"}},
		Steps: []automation.Step{{Name: "filter", Type: automation.StepFilter, Condition: "trigger.time != ''"}},
	}
}

// flowBuilderWebhook is a flow builder webhook flow: it answers at its ID
// and holds no route whatever its webhook says.
func flowBuilderWebhook(project, name string, created time.Time) automation.Flow {
	f := webhookFlow(project, name, "POST", "ignored/path", created)
	f.Engine = automation.FlowBuilder
	return f
}

// equalFlow compares everything a store keeps (see wantSame).
func equalFlow(t *testing.T, what string, got, want automation.Flow) {
	t.Helper()
	wantSame(t, what, got, want)
}

func equalStats(a, b automation.FlowStats) bool {
	if a.Finished != b.Finished || a.Succeeded != b.Succeeded || (a.LastRun == nil) != (b.LastRun == nil) {
		return false
	}
	return a.LastRun == nil || a.LastRun.Equal(*b.LastRun)
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return string(b)
}

// getFlow reads a flow that must exist.
func getFlow(t *testing.T, s automation.Store, project, id string) automation.Flow {
	t.Helper()
	f, err := s.Flow(context.Background(), project, id)
	if err != nil {
		t.Fatalf("Flow(%s): %v", id, err)
	}
	return f
}

// wantNoFlow fails unless the flow is gone, by project and by ID.
func wantNoFlow(t *testing.T, s automation.Store, project, id string) {
	t.Helper()
	ctx := context.Background()
	_, err := s.Flow(ctx, project, id)
	wantKind(t, "Flow of a flow that should not exist", err, automation.ErrNotFound, "FLOW_NOT_FOUND")
	_, err = s.FlowByID(ctx, id)
	wantKind(t, "FlowByID of a flow that should not exist", err, automation.ErrNotFound, "FLOW_NOT_FOUND")
}

// wantRoutes fails unless RouteFlows(path) is exactly want.
func wantRoutes(t *testing.T, s automation.Store, path string, want map[string]string) {
	t.Helper()
	got, err := s.RouteFlows(context.Background(), path)
	if err != nil {
		t.Fatalf("RouteFlows(%s): %v", path, err)
	}
	if len(got) != len(want) || !maps.Equal(got, want) {
		t.Fatalf("RouteFlows(%s) = %v, want %v", path, got, want)
	}
}

// allMethods is what an ANY route on one flow registers.
func allMethods(id string) map[string]string {
	m := map[string]string{}
	for _, method := range automation.WebhookMethods {
		m[method] = id
	}
	return m
}

func testFlowCreateGet(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p1, p2 := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)

	flows := []automation.Flow{
		webhookFlow(p1, "hook", automation.MethodAny, "create/get", base),
		scheduleFlow(p1, "cron", base.Add(time.Millisecond)),
		flowBuilderWebhook(p2, "builder", base.Add(2*time.Millisecond)),
	}
	for _, f := range flows {
		must(t, "CreateFlow "+f.Name, s.CreateFlow(ctx, f))
	}
	for _, f := range flows {
		equalFlow(t, "Flow("+f.Name+")", getFlow(t, s, f.Project, f.ID), f)
		got, err := s.FlowByID(ctx, f.ID)
		must(t, "FlowByID", err)
		equalFlow(t, "FlowByID("+f.Name+")", got, f)
	}

	// Another project's flow is not found, and says nothing more.
	_, err := s.Flow(ctx, p2, flows[0].ID)
	wantKind(t, "Flow of another project", err, automation.ErrNotFound, "FLOW_NOT_FOUND")
	unknown := automation.NewID(automation.PrefixFlow)
	_, err = s.Flow(ctx, p1, unknown)
	wantKind(t, "Flow(unknown)", err, automation.ErrNotFound, "FLOW_NOT_FOUND")
	_, err = s.FlowByID(ctx, unknown)
	wantKind(t, "FlowByID(unknown)", err, automation.ErrNotFound, "FLOW_NOT_FOUND")
}

func testFlowPut(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p1, p2 := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)
	f := webhookFlow(p1, "deploy", "POST", "put/deploy", base)
	must(t, "CreateFlow", s.CreateFlow(ctx, f))

	g := f
	g.Name, g.Description, g.Status = "deploy v2", "", automation.FlowActive
	g.AllowedIPs = []string{"192.0.2.0/24"}
	g.Steps = []automation.Step{{Name: "only", Type: automation.StepCode, Code: "return {ok: true}"}}
	g.Updated = base.Add(time.Second)
	g.Version = 2
	must(t, "PutFlow v2", s.PutFlow(ctx, g))
	equalFlow(t, "after PutFlow v2", getFlow(t, s, p1, f.ID), g)

	tests := []struct {
		name    string
		change  func(*automation.Flow)
		kind    error
		code    string
		changed bool
	}{
		{"stale version", func(x *automation.Flow) { x.Version = 2; x.Name = "stale" },
			automation.ErrConflict, "FLOW_MODIFIED", false},
		{"version skipped", func(x *automation.Flow) { x.Version = 4; x.Name = "skipped" },
			automation.ErrConflict, "FLOW_MODIFIED", false},
		{"missing flow", func(x *automation.Flow) { x.ID = automation.NewID(automation.PrefixFlow); x.Version = 3 },
			automation.ErrNotFound, "FLOW_NOT_FOUND", false},
		{"another project's flow", func(x *automation.Flow) { x.Project = p2; x.Version = 3; x.Name = "stolen" },
			automation.ErrNotFound, "FLOW_NOT_FOUND", false},
		{"allowlist cleared", func(x *automation.Flow) { x.Version = 3; x.AllowedIPs = nil },
			nil, "", true},
	}
	cur := g
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := cur
			tt.change(&h)
			err := s.PutFlow(ctx, h)
			if tt.kind == nil {
				must(t, "PutFlow", err)
			} else {
				wantKind(t, "PutFlow", err, tt.kind, tt.code)
			}
			if tt.changed {
				cur = h
			}
			equalFlow(t, "stored flow", getFlow(t, s, p1, f.ID), cur)
		})
	}
	if _, err := s.Flow(ctx, p2, f.ID); !automation.IsNotFound(err) {
		t.Errorf("a PutFlow for another project made the flow visible there: %v", err)
	}
}

func testFlowPutKeepsStats(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p := automation.NewID(automation.PrefixProject)
	f := scheduleFlow(p, "stats", base)
	must(t, "CreateFlow", s.CreateFlow(ctx, f))

	// A writer that read the flow before some runs finished, or that sends
	// nonsense, must not overwrite the counters runs maintain.
	last := base.Add(time.Minute)
	g := f
	g.Version = 2
	g.Name = "stats v2"
	g.Stats = automation.FlowStats{Finished: 10, Succeeded: 9, LastRun: &last}
	g = g.WithStats()
	must(t, "PutFlow", s.PutFlow(ctx, g))
	got := getFlow(t, s, p, f.ID)
	if got.Name != "stats v2" || got.Version != 2 {
		t.Fatalf("PutFlow did not apply: name %q version %d", got.Name, got.Version)
	}
	if !equalStats(got.Stats, automation.FlowStats{}) {
		t.Errorf("PutFlow wrote run stats: Stats = %+v, want zero", got.Stats)
	}
	if w := got.WithStats(); w.RunCount != 0 || w.SuccessRate != 0 || w.LastRun != nil {
		t.Errorf("PutFlow wrote run stats: %d runs, %v%%, last %v", w.RunCount, w.SuccessRate, w.LastRun)
	}
}

func testRoutes(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p1, p2 := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)

	holder := webhookFlow(p1, "holder", automation.MethodAny, "hooks/deploy", base)
	must(t, "create ANY hooks/deploy", s.CreateFlow(ctx, holder))
	wantRoutes(t, s, "hooks/deploy", allMethods(holder.ID))

	refused := []struct {
		name string
		f    automation.Flow
	}{
		{"GET beside ANY, same project", webhookFlow(p1, "get", "GET", "hooks/deploy", base)},
		{"POST beside ANY, another project", webhookFlow(p2, "other", "POST", "hooks/deploy", base)},
		{"ANY beside ANY", webhookFlow(p2, "any", automation.MethodAny, "hooks/deploy", base)},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			e := wantKind(t, "CreateFlow", s.CreateFlow(ctx, tt.f), automation.ErrConflict, "ROUTE_CONFLICT")
			if !strings.Contains(e.Message, "hooks/deploy") {
				t.Errorf("conflict message %q does not name the path", e.Message)
			}
			if !strings.Contains(e.Message, "GET") && !strings.Contains(e.Message, "POST") &&
				!strings.Contains(e.Message, "PUT") && !strings.Contains(e.Message, "DELETE") {
				t.Errorf("conflict message %q does not name the method", e.Message)
			}
			if strings.Contains(e.Message, holder.ID) {
				t.Errorf("conflict message %q leaks the holder's flow ID", e.Message)
			}
			// The failed write left nothing behind.
			wantNoFlow(t, s, tt.f.Project, tt.f.ID)
			wantRoutes(t, s, "hooks/deploy", allMethods(holder.ID))
		})
	}
	page, err := s.ListFlows(ctx, p2, automation.ListQuery{Limit: 10})
	must(t, "ListFlows(p2)", err)
	if len(page.Items) != 0 {
		t.Errorf("refused flows are listed: %d items", len(page.Items))
	}

	// Different methods on one path belong to different flows of one
	// project; then ANY there clashes.
	get := webhookFlow(p1, "split get", "GET", "hooks/split", base)
	post := webhookFlow(p1, "split post", "POST", "hooks/split", base)
	must(t, "create GET hooks/split", s.CreateFlow(ctx, get))
	must(t, "create POST hooks/split", s.CreateFlow(ctx, post))
	wantRoutes(t, s, "hooks/split", map[string]string{"GET": get.ID, "POST": post.ID})
	anySplit := webhookFlow(p1, "split any", automation.MethodAny, "hooks/split", base)
	wantKind(t, "create ANY hooks/split", s.CreateFlow(ctx, anySplit), automation.ErrConflict, "ROUTE_CONFLICT")
	wantNoFlow(t, s, p1, anySplit.ID)
	// A partial reservation (PUT and DELETE were free) was rolled back too.
	wantRoutes(t, s, "hooks/split", map[string]string{"GET": get.ID, "POST": post.ID})

	// Flows without workflow builder webhooks hold nothing.
	for _, f := range []automation.Flow{
		flowBuilderWebhook(p1, "fb1", base), flowBuilderWebhook(p2, "fb2", base), scheduleFlow(p1, "cron", base),
	} {
		must(t, "create "+f.Name, s.CreateFlow(ctx, f))
	}
	wantRoutes(t, s, "ignored/path", map[string]string{})
	wantRoutes(t, s, "hooks/none", map[string]string{})
}

func testRoutesMove(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p := automation.NewID(automation.PrefixProject)

	f := webhookFlow(p, "mover", automation.MethodAny, "a/b", base)
	must(t, "create ANY a/b", s.CreateFlow(ctx, f))

	// Moving to another path and method frees the old routes.
	f.Version = 2
	f.Trigger.Webhook = &automation.Webhook{HTTPMethod: "GET", Path: "c/d"}
	must(t, "move to GET c/d", s.PutFlow(ctx, f))
	wantRoutes(t, s, "a/b", map[string]string{})
	wantRoutes(t, s, "c/d", map[string]string{"GET": f.ID})

	other := webhookFlow(p, "taker", "POST", "a/b", base)
	must(t, "create POST a/b after the move", s.CreateFlow(ctx, other))
	wantRoutes(t, s, "a/b", map[string]string{"POST": other.ID})

	// Moving onto a held route fails and changes nothing.
	g := f
	g.Version = 3
	g.Name = "should not stick"
	g.Trigger.Webhook = &automation.Webhook{HTTPMethod: automation.MethodAny, Path: "a/b"}
	wantKind(t, "move onto POST a/b", s.PutFlow(ctx, g), automation.ErrConflict, "ROUTE_CONFLICT")
	equalFlow(t, "flow after a refused move", getFlow(t, s, p, f.ID), f)
	wantRoutes(t, s, "c/d", map[string]string{"GET": f.ID})
	wantRoutes(t, s, "a/b", map[string]string{"POST": other.ID})

	// Widening to ANY on its own path is fine: it does not clash with itself.
	f.Version = 3
	f.Trigger.Webhook = &automation.Webhook{HTTPMethod: automation.MethodAny, Path: "c/d"}
	must(t, "widen to ANY c/d", s.PutFlow(ctx, f))
	wantRoutes(t, s, "c/d", allMethods(f.ID))

	// A stale write moves nothing.
	stale := f
	stale.Version = 3
	stale.Trigger.Webhook = &automation.Webhook{HTTPMethod: "PUT", Path: "e/f"}
	wantKind(t, "stale move", s.PutFlow(ctx, stale), automation.ErrConflict, "FLOW_MODIFIED")
	wantRoutes(t, s, "e/f", map[string]string{})
	wantRoutes(t, s, "c/d", allMethods(f.ID))

	// Turning into a schedule flow releases every route.
	f.Version = 4
	f.TriggerType = automation.TriggerSchedule
	f.Trigger = automation.Trigger{Type: automation.TriggerSchedule, Schedule: &automation.Schedule{Cron: "0 * * * *"}}
	must(t, "switch to a schedule", s.PutFlow(ctx, f))
	wantRoutes(t, s, "c/d", map[string]string{})
}

func testFlowDelete(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p1, p2 := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)
	f1 := webhookFlow(p1, "doomed", automation.MethodAny, "del/me", base)
	f2 := scheduleFlow(p1, "kept", base.Add(time.Millisecond))
	must(t, "create f1", s.CreateFlow(ctx, f1))
	must(t, "create f2", s.CreateFlow(ctx, f2))

	wantKind(t, "DeleteFlow of another project", s.DeleteFlow(ctx, p2, f1.ID), automation.ErrNotFound, "FLOW_NOT_FOUND")
	equalFlow(t, "flow after another project's delete", getFlow(t, s, p1, f1.ID), f1)
	wantRoutes(t, s, "del/me", allMethods(f1.ID))

	must(t, "DeleteFlow", s.DeleteFlow(ctx, p1, f1.ID))
	wantNoFlow(t, s, p1, f1.ID)
	wantRoutes(t, s, "del/me", map[string]string{})
	wantKind(t, "DeleteFlow again", s.DeleteFlow(ctx, p1, f1.ID), automation.ErrNotFound, "FLOW_NOT_FOUND")

	// Its routes are free again.
	f3 := webhookFlow(p2, "successor", automation.MethodAny, "del/me", base.Add(2*time.Millisecond))
	must(t, "create on the freed path", s.CreateFlow(ctx, f3))
	wantRoutes(t, s, "del/me", allMethods(f3.ID))

	equalFlow(t, "the other flow", getFlow(t, s, p1, f2.ID), f2)
	page, err := s.ListFlows(ctx, p1, automation.ListQuery{Limit: 10})
	must(t, "ListFlows", err)
	if ids := flowIDs(page.Items); !slices.Equal(ids, []string{f2.ID}) {
		t.Errorf("ListFlows after delete = %v, want [%s]", ids, f2.ID)
	}
}

func flowIDs(fs []automation.Flow) []string {
	ids := make([]string, len(fs))
	for i, f := range fs {
		ids[i] = f.ID
	}
	return ids
}

// walk follows Next from the first page until a page says there is no
// more, and returns the items and the size of each page.
func walk[T any](t *testing.T, what string, list func(after string) (automation.Page[T], error)) ([]T, []int) {
	t.Helper()
	var items []T
	var sizes []int
	after := ""
	for range 1000 {
		page, err := list(after)
		if err != nil {
			t.Fatalf("%s after %q: %v", what, after, err)
		}
		items = append(items, page.Items...)
		sizes = append(sizes, len(page.Items))
		if page.Next == "" {
			return items, sizes
		}
		if len(page.Items) == 0 {
			t.Fatalf("%s after %q: an empty page with Next %q", what, after, page.Next)
		}
		after = page.Next
	}
	t.Fatalf("%s: more than 1000 pages; Next never ends", what)
	return nil, nil
}

// pageSizes is what walking n items with limit gives: full pages and a last
// one with the rest (an empty list is one empty page).
func pageSizes(n, limit int) []int {
	var sizes []int
	for ; n > limit; n -= limit {
		sizes = append(sizes, limit)
	}
	return append(sizes, n)
}

func testListFlows(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p1, p2 := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)
	var want []automation.Flow
	for i := range 33 {
		created := base.Add(time.Duration(i) * time.Millisecond)
		if i%4 == 3 { // another project's flows in between
			must(t, "create p2 flow", s.CreateFlow(ctx, scheduleFlow(p2, fmt.Sprintf("other %d", i), created)))
			continue
		}
		f := scheduleFlow(p1, fmt.Sprintf("flow %02d", i), created)
		if i%2 == 0 {
			f = webhookFlow(p1, fmt.Sprintf("flow %02d", i), "POST", fmt.Sprintf("list/%d", i), created)
		}
		must(t, "create p1 flow", s.CreateFlow(ctx, f))
		want = append(want, f)
	}
	if len(want) != 25 {
		t.Fatalf("setup made %d flows, want 25", len(want))
	}

	for _, limit := range []int{7, 5, 1, 25, 100} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			got, sizes := walk(t, "ListFlows", func(after string) (automation.Page[automation.Flow], error) {
				return s.ListFlows(ctx, p1, automation.ListQuery{Limit: limit, After: after})
			})
			if ws := pageSizes(len(want), limit); !slices.Equal(sizes, ws) {
				t.Errorf("page sizes = %v, want %v", sizes, ws)
			}
			if g, w := flowIDs(got), flowIDs(want); !slices.Equal(g, w) {
				t.Fatalf("walked IDs = %v\nwant (creation order) %v", g, w)
			}
			for i := range want {
				equalFlow(t, fmt.Sprintf("item %d", i), got[i], want[i])
			}
		})
	}

	t.Run("empty project", func(t *testing.T) {
		page, err := s.ListFlows(ctx, automation.NewID(automation.PrefixProject), automation.ListQuery{Limit: 10})
		must(t, "ListFlows", err)
		if len(page.Items) != 0 || page.Next != "" {
			t.Errorf("empty project: %d items, Next %q; want none and \"\"", len(page.Items), page.Next)
		}
	})

	// A position stays valid when the item it points at is deleted.
	t.Run("anchor deleted", func(t *testing.T) {
		first, err := s.ListFlows(ctx, p1, automation.ListQuery{Limit: 7})
		must(t, "first page", err)
		if len(first.Items) != 7 || first.Next == "" {
			t.Fatalf("first page: %d items, Next %q", len(first.Items), first.Next)
		}
		must(t, "delete the anchor", s.DeleteFlow(ctx, p1, want[6].ID))
		must(t, "delete the next", s.DeleteFlow(ctx, p1, want[7].ID))
		rest, _ := walk(t, "ListFlows", func(after string) (automation.Page[automation.Flow], error) {
			if after == "" {
				after = first.Next
			}
			return s.ListFlows(ctx, p1, automation.ListQuery{Limit: 7, After: after})
		})
		if g, w := flowIDs(rest), flowIDs(want[8:]); !slices.Equal(g, w) {
			t.Errorf("after deleting the anchor: IDs = %v, want %v", g, w)
		}
	})
}

func testListFlowsStatus(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	p := automation.NewID(automation.PrefixProject)
	var all []automation.Flow
	for i := range 20 {
		f := scheduleFlow(p, fmt.Sprintf("flow %02d", i), base.Add(time.Duration(i)*time.Millisecond))
		if i%3 == 0 {
			f.Status = automation.FlowActive
		}
		must(t, "CreateFlow", s.CreateFlow(ctx, f))
		all = append(all, f)
	}
	byStatus := func(st automation.FlowStatus) []automation.Flow {
		var out []automation.Flow
		for _, f := range all {
			if f.Status == st {
				out = append(out, f)
			}
		}
		return out
	}
	check := func(t *testing.T, st automation.FlowStatus, limit int) {
		t.Helper()
		want := byStatus(st)
		got, sizes := walk(t, "ListFlows "+string(st), func(after string) (automation.Page[automation.Flow], error) {
			return s.ListFlows(ctx, p, automation.ListQuery{Limit: limit, After: after, Status: string(st)})
		})
		if ws := pageSizes(len(want), limit); !slices.Equal(sizes, ws) {
			t.Errorf("%s limit %d: page sizes = %v, want %v (full pages despite the filter)", st, limit, sizes, ws)
		}
		if g, w := flowIDs(got), flowIDs(want); !slices.Equal(g, w) {
			t.Errorf("%s limit %d: IDs = %v, want %v", st, limit, g, w)
		}
	}
	check(t, automation.FlowActive, 3)   // 7 active: 3, 3, 1
	check(t, automation.FlowInactive, 4) // 13 inactive: 4, 4, 4, 1
	check(t, automation.FlowActive, 7)   // exactly one full page

	// The filter follows PutFlow.
	f := all[1]
	f.Status, f.Version = automation.FlowActive, 2
	must(t, "enable", s.PutFlow(ctx, f))
	all[1] = f
	check(t, automation.FlowActive, 3)
	check(t, automation.FlowInactive, 4)
}

// testRoutesNamespace: a workflow builder path belongs to one project. Any
// method on a path a flow of another project holds is ROUTE_CONFLICT, at
// create and at update, and the path is free again once the last of its
// project's flows leaves it.
func testRoutesNamespace(t *testing.T, s automation.Store) {
	ctx := context.Background()
	base := now()
	a, c := automation.NewID(automation.PrefixProject), automation.NewID(automation.PrefixProject)

	greet := webhookFlow(a, "greet", "POST", "greet", base)
	must(t, "create A POST greet", s.CreateFlow(ctx, greet))

	// The repro: C saves a GET flow on A's POST path.
	for _, m := range []string{"GET", "PUT", automation.MethodAny} {
		intruder := webhookFlow(c, "intruder", m, "greet", base)
		e := wantKind(t, "C "+m+" greet", s.CreateFlow(ctx, intruder), automation.ErrConflict, "ROUTE_CONFLICT")
		if !strings.Contains(e.Message, "greet") || strings.Contains(e.Message, greet.ID) || strings.Contains(e.Message, a) {
			t.Errorf("conflict message %q: want the path, not the holder", e.Message)
		}
		wantNoFlow(t, s, c, intruder.ID)
	}
	wantRoutes(t, s, "greet", map[string]string{"POST": greet.ID})

	// The same project may put another method there.
	greetGet := webhookFlow(a, "greet get", "GET", "greet", base)
	must(t, "create A GET greet", s.CreateFlow(ctx, greetGet))

	// Moving C's flow onto the path is refused and changes nothing.
	mover := webhookFlow(c, "mover", "PUT", "elsewhere", base)
	must(t, "create C PUT elsewhere", s.CreateFlow(ctx, mover))
	moved := mover
	moved.Version = 2
	moved.Trigger.Webhook = &automation.Webhook{HTTPMethod: "PUT", Path: "greet"}
	wantKind(t, "move C onto greet", s.PutFlow(ctx, moved), automation.ErrConflict, "ROUTE_CONFLICT")
	equalFlow(t, "C's flow after a refused move", getFlow(t, s, c, mover.ID), mover)
	wantRoutes(t, s, "elsewhere", map[string]string{"PUT": mover.ID})

	// While one of A's flows is still there, the path stays A's.
	greet.Version = 2
	greet.Trigger.Webhook = &automation.Webhook{HTTPMethod: "POST", Path: "greet2"}
	must(t, "move A POST away", s.PutFlow(ctx, greet))
	wantKind(t, "C onto greet with A GET left", s.PutFlow(ctx, moved), automation.ErrConflict, "ROUTE_CONFLICT")

	// A's last flow leaves (deleted): the path is free for C.
	must(t, "delete A GET greet", s.DeleteFlow(ctx, a, greetGet.ID))
	must(t, "move C onto the freed path", s.PutFlow(ctx, moved))
	wantRoutes(t, s, "greet", map[string]string{"PUT": mover.ID})
	// Now A is the other project there.
	back := greet
	back.Version = 3
	back.Trigger.Webhook = &automation.Webhook{HTTPMethod: "POST", Path: "greet"}
	wantKind(t, "A back onto C's path", s.PutFlow(ctx, back), automation.ErrConflict, "ROUTE_CONFLICT")

	// A flow moved away (not deleted) frees the path too.
	moved.Version = 3
	moved.Trigger.Webhook = &automation.Webhook{HTTPMethod: "PUT", Path: "c-only"}
	must(t, "move C away", s.PutFlow(ctx, moved))
	must(t, "A back onto the freed path", s.PutFlow(ctx, back))
	wantRoutes(t, s, "greet", map[string]string{"POST": greet.ID})
}
