package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestWaitingRunsSayWhy: a run at a WAIT step and a run over its flow's
// concurrency limit are RUNNING without executing; the run page, the run
// list and the run's picture say what each waits for.
func TestWaitingRunsSayWhy(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")

	start := func(f automation.Flow) automation.Run {
		t.Helper()
		if _, err := e.svc.EnableFlow(ctx, e.p, f.ID); err != nil {
			t.Fatal(err)
		}
		wf, err := e.svc.WebhookFlow(ctx, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		r, err := receiveWebhook(ctx, e.svc, wf, automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/" + f.ID, Body: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		// A run that waits comes back as an error saying until when: the
		// queue keeps it; the run record is what the test checks.
		e.svc.ExecuteRun(ctx, e.p.ID, r.ID)
		if r, err = e.svc.Run(ctx, e.p, f.ID, r.ID); err != nil {
			t.Fatal(err)
		}
		return r
	}

	paused := e.flow(t, e.p, "Paused", automation.Step{Name: "later", Type: automation.StepWait, Duration: "1h"})
	r := start(paused)
	if r.Status != automation.RunRunning || r.WaitingFor != automation.WaitingWait {
		t.Fatalf("run at a WAIT step: %s waiting for %q", r.Status, r.WaitingFor)
	}
	path := "/ui/flows/" + paused.ID + "/runs"
	wantPage(t, b.get(path+"/"+r.ID), http.StatusOK,
		`<dt>Waiting for</dt><dd><span class="status waiting">WAIT</span> a WAIT step, or a flow a CALL_FLOW step called</dd>`, `>waiting: WAIT</text>`)
	wantPage(t, b.get(path), http.StatusOK, `<span class="status waiting" title="a WAIT step, or a flow a CALL_FLOW step called">waiting: WAIT</span>`)

	limited := e.flow(t, e.p, "Limited", automation.Step{Name: "v", Type: automation.StepSet, Values: json.RawMessage(`{"v": 1}`)})
	limited, err := e.svc.UpdateFlow(ctx, e.p, limited.ID, automation.FlowInput{
		Concurrency: automation.Nullable[automation.Concurrency]{Set: true, Value: &automation.Concurrency{Limit: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	// Another run's attempt holds the flow's one slot until its lease ends.
	if err := e.store.UpdateSlots(ctx, e.p.ID, "c:"+limited.ID, func(automation.Slots) (automation.Slots, error) {
		return automation.Slots{Held: map[string]int64{"run_other": time.Now().Add(time.Hour).UnixMilli()}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	r = start(limited)
	if r.Status != automation.RunRunning || r.WaitingFor != automation.WaitingConcurrency {
		t.Fatalf("run over the concurrency limit: %s waiting for %q", r.Status, r.WaitingFor)
	}
	path = "/ui/flows/" + limited.ID + "/runs"
	wantPage(t, b.get(path+"/"+r.ID), http.StatusOK,
		`<span class="status waiting">CONCURRENCY</span> the flow&#39;s concurrency limit`, `>waiting: CONCURRENCY</text>`)
	wantPage(t, b.get(path), http.StatusOK, `waiting: CONCURRENCY</span>`)
}
