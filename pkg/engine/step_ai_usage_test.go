package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// meter is an automation.AIMeter over one count, as the Service's over a
// store: a turn is admitted while the count is under most.
type meter struct {
	mu     sync.Mutex
	most   int64
	used   int64
	asks   int
	counts []int64
}

func (m *meter) AdmitAITurn(context.Context, string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asks++
	if m.used >= m.most {
		return automation.AIQuotaExceeded(m.most, m.used, automation.PlanFree, time.Now())
	}
	return nil
}

func (m *meter) CountAITokens(_ context.Context, _ string, n int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.used += n
	m.counts = append(m.counts, n)
	return nil
}

// TestAITokenQuota: each turn's tokens are counted once journaled; the
// turn that takes the project over its limit finishes, and the next
// request is refused before it is sent: the step fails QUOTA_EXCEEDED,
// not retryable, its journal kept. The run's usage sums its AI steps'.
func TestAITokenQuota(t *testing.T) {
	m := newFakeModel(t, func(turn int, _ map[string]any) (int, http.Header, any) {
		if turn == 0 {
			return 200, nil, openaiAnswer("", "nothing_here", `{}`) // an unknown tool: one more turn
		}
		return 200, nil, openaiAnswer("done", "", "")
	})
	creds := aiCreds{newCredentials()}
	creds.addModel("con_ai", "llm", automation.ConnectionOpenAI, "sk-q-123456", m.URL+"/v1")
	e := newAIEngine(creds, nil, nil)
	mt := &meter{most: 15} // one turn is 15 tokens (openaiAnswer): the first reaches it
	e.aiTokens = mt
	f := flowOf(aiStep(nil))
	res := e.ExecuteJournaled(context.Background(), f, runOf(`{"text":"x"}`), nil)
	r := res.Run
	if r.Status != automation.RunFailed || res.Retryable || !strings.Contains(r.Steps[0].Error, "QUOTA_EXCEEDED") ||
		!strings.Contains(r.Steps[0].Error, "aiTokensPerDay") {
		t.Fatalf("run %s (retryable %v) step error %q: want FAILED, QUOTA_EXCEEDED naming aiTokensPerDay", r.Status, res.Retryable, r.Steps[0].Error)
	}
	if got := m.counts(); fmt.Sprint(got) != "map[0:1]" {
		t.Errorf("requests per turn %v: want the first turn only", got)
	}
	if fmt.Sprint(mt.counts) != "[15]" || mt.asks != 2 {
		t.Errorf("counted %v after %d asks: want [15] after 2", mt.counts, mt.asks)
	}
	if r.Usage == nil || *r.Usage != (automation.RunUsage{InputTokens: 10, OutputTokens: 5}) {
		t.Errorf("run usage %+v: want 10 in, 5 out (the failed step's journal)", r.Usage)
	}

	// Under the limit the same flow finishes: two turns, two counts,
	// and the run's usage is their sum.
	mt2 := &meter{most: 1000}
	e.aiTokens = mt2
	r = e.ExecuteJournaled(context.Background(), f, runOf(`{"text":"x"}`), nil).Run
	if r.Status != automation.RunSucceeded || fmt.Sprint(mt2.counts) != "[15 15]" {
		t.Fatalf("run %s %q, counted %v: want SUCCEEDED, [15 15]", r.Status, r.Error, mt2.counts)
	}
	if r.Usage == nil || *r.Usage != (automation.RunUsage{InputTokens: 20, OutputTokens: 10}) {
		t.Errorf("run usage %+v: want 20 in, 10 out", r.Usage)
	}
	b, _ := json.Marshal(r.Public())
	if !strings.Contains(string(b), `"usage":{"inputTokens":20,"outputTokens":10}`) {
		t.Errorf("run JSON %s: want its usage", b)
	}
	noAI := e.ExecuteJournaled(context.Background(), flowOf(automation.Step{Name: "s", Type: automation.StepSet, Values: raw(`{"a": 1}`)}), runOf(`{}`), nil).Run
	if noAI.Usage != nil {
		t.Errorf("a run without AI steps has usage %+v, want none", noAI.Usage)
	}
}

// TestAIContinuesInNextAttempt: an attempt whose deadline leaves less
// than AIModelTimeout hands the loop over once it made progress: the run
// is parked due at once (RUNNING, WaitUntil now) with the step's journal
// and {"continue": true}; the next attempt goes on from the journal,
// asking no turn again, and the step's attempts count the hand-over, as a
// waited call's do, so that it is not taken for a retry.
func TestAIContinuesInNextAttempt(t *testing.T) {
	m := newFakeModel(t, func(turn int, _ map[string]any) (int, http.Header, any) {
		if turn < 2 {
			return 200, nil, openaiAnswer("", "nothing_here", `{}`)
		}
		return 200, nil, openaiAnswer("done", "", "")
	})
	creds := aiCreds{newCredentials()}
	creds.addModel("con_ai", "llm", automation.ConnectionOpenAI, "sk-c-123456", m.URL+"/v1")
	e := newAIEngine(creds, nil, nil)
	f := flowOf(aiStep(nil), automation.Step{Name: "after", Type: automation.StepSet, Values: raw(`{"t": "{{ steps.triage.text }}"}`)})
	journaled := 0
	journal := func(context.Context, []automation.StepResult) error {
		journaled++
		return nil
	}
	r := runOf(`{"text":"x"}`)
	handovers := 0
	for i := 0; ; i++ {
		if i > 10 {
			t.Fatal("the run did not end in 10 attempts")
		}
		// Less time than one model request may take: each attempt asks
		// one turn, then hands over.
		ctx, cancel := context.WithTimeout(context.Background(), AIModelTimeout/2)
		res := e.ExecuteJournaled(ctx, f, r, journal)
		cancel()
		r = res.Run
		if res.WaitUntil == nil {
			break
		}
		handovers++
		if r.Status != automation.RunRunning || !automation.AIContinues(r.Steps[0]) || len(res.Calls) != 0 {
			t.Fatalf("hand-over %d: run %s, step %s %s: want RUNNING with the step continuing", handovers, r.Status, r.Steps[0].Status, r.Steps[0].Output)
		}
		if time.Until(*res.WaitUntil) > time.Second {
			t.Fatalf("hand-over due at %s: want now", res.WaitUntil)
		}
		if r.Usage == nil || r.Usage.InputTokens != int64(10*handovers) {
			t.Fatalf("hand-over %d: run usage %+v, want the turns so far", handovers, r.Usage)
		}
	}
	if r.Status != automation.RunSucceeded || stepOutput(t, r, 1)["t"] != "done" {
		t.Fatalf("run %s %q: want SUCCEEDED with the final answer", r.Status, r.Error)
	}
	if handovers != 2 || r.Steps[0].Attempts != 3 {
		t.Errorf("hand-overs %d, step attempts %d: want 2 and 3", handovers, r.Steps[0].Attempts)
	}
	if got := m.counts(); fmt.Sprint(got) != "map[0:1 1:1 2:1]" {
		t.Errorf("requests per turn %v: want each turn asked exactly once", got)
	}
	if r.Usage == nil || *r.Usage != (automation.RunUsage{InputTokens: 30, OutputTokens: 15}) {
		t.Errorf("run usage %+v: want 30 in, 15 out", r.Usage)
	}
	if journaled < 5 { // three turns, two tool results
		t.Errorf("%d journal writes: want one per turn and tool result", journaled)
	}
}
