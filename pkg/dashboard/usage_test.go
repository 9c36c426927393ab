package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// The run page shows the model tokens a run's AI steps used, on one line,
// and nothing of the kind for a run without AI steps.
func TestRunPageShowsModelTokens(t *testing.T) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "cmpl", "object": "chat.completion", "created": 1, "model": "gpt-fake",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": "ok"}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 1234, "completion_tokens": 567, "total_tokens": 1801}})
	}))
	defer model.Close()
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.svc.CreateConnection(ctx, e.p, automation.ConnectionInput{Name: "llm", App: "openai", Type: automation.ConnectionOpenAI,
		Value: json.RawMessage(`{"apiKey": "sk-fake-0123456789", "baseUrl": "` + model.URL + `/v1"}`)}); err != nil {
		t.Fatal(err)
	}
	run := func(steps ...automation.Step) (string, string) {
		t.Helper()
		f := e.flow(t, e.p, "f"+steps[0].Name, steps...)
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
		if _, err := e.svc.ExecuteRun(ctx, e.p.ID, r.ID); err != nil {
			t.Fatal(err)
		}
		return f.ID, r.ID
	}
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	flow, id := run(automation.Step{Name: "ask", Type: automation.StepAI, Connection: "llm", Model: "gpt-fake", Prompt: "hi"})
	wantPage(t, b.get("/ui/flows/"+flow+"/runs/"+id), http.StatusOK, "SUCCEEDED", "Model tokens", "1,234 in / 567 out")
	flow, id = run(automation.Step{Name: "set", Type: automation.StepSet, Values: json.RawMessage(`{}`)})
	if page := b.get("/ui/flows/" + flow + "/runs/" + id); strings.Contains(page.body, "Model tokens") {
		t.Errorf("a run without AI steps shows model tokens:\n%s", page.body)
	}
}
