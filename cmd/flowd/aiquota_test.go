package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// scriptedOpenAI is an OpenAI-compatible model on 127.0.0.1 whose every
// answer uses in+out tokens: the first turn of a conversation calls a tool
// no flow offers (so the step asks a second turn), the next one answers.
// requests counts what it was asked.
func scriptedOpenAI(t *testing.T, in, out int64) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		var req struct{ Messages []struct{ Role string } }
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil {
			http.Error(w, "bad json", 400)
			return
		}
		turn := 0
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				turn++
			}
		}
		msg := map[string]any{"role": "assistant", "content": "done"}
		finish := "stop"
		if turn == 0 && strings.Contains(string(b), "two turns") {
			msg = map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "call_1", "type": "function",
				"function": map[string]any{"name": "not_a_tool", "arguments": "{}"}}}}
			finish = "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "cmpl", "object": "chat.completion", "created": 1, "model": "gpt-fake",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": in, "completion_tokens": out, "total_tokens": in + out}})
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

// TestAITokenQuotaOnFlowd: a FREE project (aiTokensPerDay 100,000) on a
// real flowd with a scripted model whose turns use 95,000 tokens each.
// The first run's one turn uses most of the day's budget and succeeds,
// its usage in GET run; the second run's first turn is still admitted
// and takes the project over (it finishes: its tokens were spent), its
// next turn is refused, failing the step with QUOTA_EXCEEDED; a third
// run asks the model nothing. GET /api/v1/project shows the day's sum
// beside the limit.
func TestAITokenQuotaOnFlowd(t *testing.T) {
	model, requests := scriptedOpenAI(t, 60_000, 35_000)
	dir := filepath.Join(t.TempDir(), "data")
	p := startFlowd(t, dir, "FLOWD_LOG_LEVEL=warn", "FLOWD_ALLOW_PRIVATE_NETWORKS=true")
	if _, err := flowctl(t, dir, "projects", "create", "tenant-ai", "--plan", "FREE"); err != nil {
		t.Fatal(err)
	}
	key, err := flowctl(t, dir, "keys", "create", "--project", "tenant-ai")
	if err != nil {
		t.Fatal(err)
	}
	key = strings.TrimSpace(key)
	api(t, p, key, "POST", "/api/v1/connections", fmt.Sprintf(`{"name": "llm", "app": "openai", "type": "OPENAI", "value": {"apiKey": "sk-fake-0123456789", "baseUrl": %q}}`, model.URL+"/v1"), 201, nil)
	var f struct{ ID string }
	api(t, p, key, "POST", "/api/v1/flows", `{"name": "agent", "engine": "FLOW_BUILDER", "steps": [
		{"name": "ask", "type": "AI", "connection": "llm", "model": "gpt-fake", "prompt": "{{ trigger.body.prompt }}"}]}`, 201, &f)
	api(t, p, key, "POST", "/api/v1/flows/"+f.ID+"/enable", "", 200, nil)

	type run struct {
		Status, Error string
		Usage         *struct{ InputTokens, OutputTokens int64 }
		Steps         []struct{ Status, Error string }
	}
	start := func(prompt string) run {
		t.Helper()
		resp, err := http.Post(p.base+"/api/v1/webhooks/"+f.ID, "application/json", strings.NewReader(`{"prompt": "`+prompt+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get("X-Run-Id")
		if resp.StatusCode != 200 || id == "" {
			t.Fatalf("webhook = %d, run %q", resp.StatusCode, id)
		}
		waitRun(t, p, key, f.ID, id)
		var r run
		api(t, p, key, "GET", "/api/v1/flows/"+f.ID+"/runs/"+id, "", 200, &r)
		return r
	}
	type info struct {
		Limits struct{ AITokensPerDay *int64 }
		Usage  struct{ AITokensToday int64 }
	}
	var pi info
	api(t, p, key, "GET", "/api/v1/project", "", 200, &pi)
	if pi.Limits.AITokensPerDay == nil || *pi.Limits.AITokensPerDay != 100_000 || pi.Usage.AITokensToday != 0 {
		t.Fatalf("FREE project before any AI step: %+v, want aiTokensPerDay 100000 and none used", pi)
	}

	first := start("one turn")
	if first.Status != "SUCCEEDED" || first.Usage == nil || first.Usage.InputTokens != 60_000 || first.Usage.OutputTokens != 35_000 {
		t.Fatalf("first run %s %q usage %+v: want SUCCEEDED using 60000 in, 35000 out", first.Status, first.Error, first.Usage)
	}
	second := start("two turns")
	if second.Status != "FAILED" || len(second.Steps) != 1 || !strings.Contains(second.Steps[0].Error, "QUOTA_EXCEEDED") ||
		!strings.Contains(second.Steps[0].Error, "aiTokensPerDay") {
		t.Fatalf("second run %s %q steps %+v: want FAILED with QUOTA_EXCEEDED (aiTokensPerDay)", second.Status, second.Error, second.Steps)
	}
	if second.Usage == nil || second.Usage.InputTokens != 60_000 {
		t.Errorf("second run usage %+v: want its one finished turn, 60000 in", second.Usage)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("model asked %d times, want 2 (the refused turn is not sent)", n)
	}
	third := start("one turn")
	if third.Status != "FAILED" || !strings.Contains(third.Error, "QUOTA_EXCEEDED") || requests.Load() != 2 {
		t.Fatalf("third run %s %q after %d requests: want FAILED QUOTA_EXCEEDED asking nothing", third.Status, third.Error, requests.Load())
	}
	api(t, p, key, "GET", "/api/v1/project", "", 200, &pi)
	if pi.Usage.AITokensToday != 190_000 {
		t.Errorf("usage.aiTokensToday = %d, want 190000 (two turns of 95000)", pi.Usage.AITokensToday)
	}
}
