package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// TestFlowListMarksDrafts: the flow list shows each flow's live version and
// marks the flows that have a draft saved, and only those.
func TestFlowListMarksDrafts(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	set := automation.Step{Name: "v", Type: automation.StepSet, Values: json.RawMessage(`{"v": 1}`)}
	drafted := e.flow(t, e.p, "Drafted", set)
	e.flow(t, e.p, "Published only", set)
	steps := []automation.Step{{Name: "w", Type: automation.StepSet, Values: json.RawMessage(`{"v": 2}`)}}
	if _, err := e.svc.SaveDraft(ctx, e.p, drafted.ID, automation.DraftInput{Steps: &steps}); err != nil {
		t.Fatal(err)
	}
	const marker = `<span class="badge draft" title="a draft is saved: it runs from the test URL until it is published">draft</span>`
	p := b.get("/ui/flows")
	wantPage(t, p, http.StatusOK, `>Drafted</a> <span><span class="badge" title="the live version">v1</span> `+marker)
	if n := strings.Count(p.body, marker); n != 1 {
		t.Errorf("%d draft markers on the flow list, want 1 (Drafted's)", n)
	}
	if _, err := e.svc.Publish(ctx, e.p, drafted.ID, automation.PublishRequest{}); err != nil {
		t.Fatal(err)
	}
	p = b.get("/ui/flows")
	wantPage(t, p, http.StatusOK, `>Drafted</a> <span><span class="badge" title="the live version">v2</span></span>`)
	if strings.Contains(p.body, marker) {
		t.Errorf("a draft marker is left after the publish")
	}
}
