package engine

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestAIModelThatNeverAnswers: a model request that hangs is cut at the
// run's timeout (the context the engine runs under): the run ends TIMEOUT
// naming the AI step, the request was made once, no turn is journaled and
// no key shows. Once the model answers, the same flow succeeds. The
// deadline is the event waited on; nothing here races it.
func TestAIModelThatNeverAnswers(t *testing.T) {
	release := make(chan struct{})
	answered := make(chan struct{})
	m := newFakeModel(t, func(turn int, _ map[string]any) (int, http.Header, any) {
		select {
		case <-answered: // the second attempt: the model answers
			return 200, nil, openaiAnswer("done", "", "")
		default:
		}
		<-release // the first: no answer until the attempt has ended
		return 200, nil, openaiAnswer("too late", "", "")
	})
	creds := aiCreds{newCredentials()}
	creds.addModel("con_ai", "llm", automation.ConnectionOpenAI, "sk-h-123456", m.URL+"/v1")
	e := newAIEngine(creds, nil, nil)
	f := flowOf(aiStep(nil))
	journaled := 0
	journal := func(context.Context, []automation.StepResult) error {
		journaled++
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	res := e.ExecuteJournaled(ctx, f, runOf(`{"text":"x"}`), journal)
	cancel()
	close(release)
	if res.Run.Status != automation.RunTimeout || !strings.Contains(res.Run.Error, "step triage") {
		t.Fatalf("run %s %q: want TIMEOUT naming the step", res.Run.Status, res.Run.Error)
	}
	if strings.Contains(res.Run.Error, "sk-h-123456") {
		t.Fatalf("the error shows the key: %q", res.Run.Error)
	}
	if got := m.counts(); fmt.Sprint(got) != "map[0:1]" {
		t.Fatalf("requests per turn %v: want the first turn asked once", got)
	}
	if journaled != 0 {
		t.Fatalf("%d journal writes for a turn never answered", journaled)
	}

	close(answered)
	r := e.Execute(context.Background(), f, runOf(`{"text":"x"}`)).Run
	if r.Status != automation.RunSucceeded {
		t.Fatalf("once the model answers: run %s %q", r.Status, r.Error)
	}
	if got := m.counts(); fmt.Sprint(got) != "map[0:2]" {
		t.Errorf("requests per turn %v: want the first turn asked once more", got)
	}
}
