package dashboard

import (
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// TestDraftPublishAndVersions: the editor saves a draft (nothing that runs
// changes), the flow page publishes or discards it, the versions page
// lists the history as published by "dashboard", shows two versions side
// by side, and restores one.
func TestDraftPublishAndVersions(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	name, eng := "Versioned", automation.FlowBuilder
	steps := []automation.Step{{Name: "first", Type: automation.StepSet, Values: json.RawMessage(`{"v":1}`)}}
	f, err := e.svc.CreateFlow(ctx, e.p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps})
	if err != nil {
		t.Fatal(err)
	}
	path := "/ui/flows/" + f.ID
	editText := func() string {
		edit := b.get(path + "/edit")
		return html.UnescapeString(regexp.MustCompile(`(?s)<textarea id="definition"[^>]*>(.*?)</textarea>`).FindStringSubmatch(edit.body)[1])
	}
	wantPage(t, b.get(path+"/edit"), http.StatusOK, "Save draft", "runs execute version 1 until you publish it")
	text := strings.Replace(editText(), `"first"`, `"second"`, 1)
	wantRedirect(t, b.post(path+"/edit", path+"/edit", url.Values{"definition": {text}}), path+"?done=draftsaved")
	if got, err := e.svc.Flow(ctx, e.p, f.ID); err != nil || got.LiveVersion != 1 || got.Steps[0].Name != "first" || !got.HasDraft {
		t.Fatalf("after saving a draft: version %d steps %v hasDraft %v, %v", got.LiveVersion, got.Steps, got.HasDraft, err)
	}
	wantPage(t, b.get(path+"?done=draftsaved"), http.StatusOK, "Draft saved", "A draft is saved", "Publish", "Discard draft")
	if !strings.Contains(editText(), `"second"`) {
		t.Fatal("the editor does not show the draft")
	}

	// Discard, then save and publish.
	wantRedirect(t, b.post(path, path+"/draft/discard", nil), path+"?done=discarded")
	if got, _ := e.svc.Flow(ctx, e.p, f.ID); got.HasDraft {
		t.Fatal("the draft is still there after Discard")
	}
	wantRedirect(t, b.post(path+"/edit", path+"/edit", url.Values{"definition": {text}}), path+"?done=draftsaved")
	wantRedirect(t, b.post(path, path+"/publish", url.Values{"message": {"rename the step"}}), path+"?done=published")
	if got, err := e.svc.Flow(ctx, e.p, f.ID); err != nil || got.LiveVersion != 2 || got.Steps[0].Name != "second" || got.HasDraft {
		t.Fatalf("after publishing: version %d steps %v hasDraft %v, %v", got.LiveVersion, got.Steps, got.HasDraft, err)
	}
	// Publishing again has no draft: the flow page says so.
	wantPage(t, b.post(path, path+"/publish", nil), http.StatusConflict, "has no draft")

	page := b.get(path + "/versions")
	wantPage(t, page, http.StatusOK, "rename the step", automation.PublisherDashboard, "Version 1 and version 2",
		`<tr class="change">`, html.EscapeString(`"name": "first",`), html.EscapeString(`"name": "second",`), "Restore")
	wantPage(t, b.get(path+"/versions?a=2&b=2"), http.StatusOK, "Version 2 and version 2")
	if p := b.get(path + "/versions?a=2&b=2"); strings.Contains(p.body, `class="change"`) || strings.Contains(p.body, `class="add"`) {
		t.Error("a version compared with itself shows changes")
	}
	wantPage(t, b.get(path+"/versions?a=x"), http.StatusBadRequest, "a must be a version number")
	wantPage(t, b.get(path+"/versions?a=9"), http.StatusNotFound)

	wantRedirect(t, b.post(path+"/versions", path+"/versions/1/restore", nil), path+"?done=restored")
	if got, err := e.svc.Flow(ctx, e.p, f.ID); err != nil || got.LiveVersion != 3 || got.Steps[0].Name != "first" {
		t.Fatalf("after restoring 1: version %d steps %v, %v", got.LiveVersion, got.Steps, err)
	}
	v3, err := e.svc.FlowVersion(ctx, e.p, f.ID, 3)
	if err != nil || v3.CreatedBy != automation.PublisherDashboard || v3.Message != "restored from version 1" {
		t.Fatalf("version 3 = %+v, %v", v3, err)
	}
}

// TestRunsShowTheirVersion: the runs list and a run's page say which
// version a run executed, and mark a test run of the draft.
func TestRunsShowTheirVersion(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	name, eng := "Marked", automation.FlowBuilder
	steps := []automation.Step{{Name: "first", Type: automation.StepSet, Values: json.RawMessage(`{"v":1}`)}}
	f, err := e.svc.CreateFlow(ctx, e.p, automation.FlowInput{Name: &name, Engine: &eng, Steps: &steps})
	if err != nil {
		t.Fatal(err)
	}
	live, err := e.svc.StartRun(ctx, f, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SaveDraft(ctx, e.p, f.ID, automation.DraftInput{Steps: &steps}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.ArmWebhookTest(ctx, e.p, f.ID); err != nil {
		t.Fatal(err)
	}
	g, err := e.svc.WebhookFlow(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	test, err := receiveWebhook(ctx, e.svc, g, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{}`)})
	if err != nil || !test.Draft {
		t.Fatalf("test run %+v, %v", test, err)
	}
	path := "/ui/flows/" + f.ID
	wantPage(t, b.get(path+"/runs"), http.StatusOK, `<span class="badge">draft</span>`, `<span class="badge">v1</span>`)
	wantPage(t, b.get(path+"/runs/"+test.ID), http.StatusOK, `<span class="badge">draft</span>`)
	wantPage(t, b.get(path+"/runs/"+live.ID), http.StatusOK, `<span class="badge">version 1</span>`)
}

func TestLineDiff(t *testing.T) {
	kinds := func(rows []diffRow) string {
		var out []string
		for _, r := range rows {
			out = append(out, r.Kind)
		}
		return strings.Join(out, " ")
	}
	tests := []struct {
		a, b, want string
	}{
		{"x y z", "x y z", "same same same"},
		{"x y z", "x q z", "same change same"},
		{"x z", "x y z", "same add same"},
		{"x y z", "x z", "same del same"},
		{"", "a", "add"},
		{"a b", "c", "change del"},
	}
	for _, tt := range tests {
		if got := kinds(lineDiff(strings.Fields(tt.a), strings.Fields(tt.b))); got != tt.want {
			t.Errorf("lineDiff(%q, %q) = %s, want %s", tt.a, tt.b, got, tt.want)
		}
	}
	long := make([]string, maxDiffLines+5)
	if rows := lineDiff(long, long); len(rows) != maxDiffLines+1 || !strings.Contains(rows[maxDiffLines].Left, "5 more lines") {
		t.Errorf("a long text: %d rows", len(rows))
	}
}
