package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"flowservice/pkg/automation"
)

// logFlood is a CodeRunner whose every script logs all a sandbox lets it
// (100 lines of 2 KiB).
type logFlood struct{}

func (logFlood) RunCode(context.Context, automation.CodeRequest) (automation.CodeResult, error) {
	logs := make([]string, 100)
	for i := range logs {
		logs[i] = strings.Repeat("l", 2<<10)
	}
	return automation.CodeResult{Output: raw(`{"ok":true}`), Logs: logs}, nil
}

// TestCodeLogsCountAgainstRunBudget: the log-flood FOR_EACH (250 items,
// 10 at once, each logging 100 lines of 2 KiB: 51 MB of logs) records a
// run within its output budget; the items past the budget keep a line
// saying their logs were dropped, and the run still succeeds.
func TestCodeLogsCountAgainstRunBudget(t *testing.T) {
	e := New(Config{Code: logFlood{}})
	f := flowOf(automation.Step{Name: "each", Type: automation.StepForEach, Items: raw(`"trigger.body.xs"`), Concurrency: 10,
		Steps: []automation.Step{{Name: "log", Type: automation.StepCode, Code: "console.log('x'.repeat(2048))"}}})
	xs, _ := json.Marshal(make([]int, 250))
	res := e.Execute(context.Background(), f, runOf(`{"xs":`+string(xs)+`}`))
	if res.Run.Status != automation.RunSucceeded {
		t.Fatalf("run %s: %s", res.Run.Status, res.Run.Error)
	}
	doc, err := json.Marshal(res.Run)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(doc); n > DefaultMaxRunOutputBytes+256<<10 {
		t.Errorf("run record is %d bytes, over its budget of %d and the loop's structure", n, DefaultMaxRunOutputBytes)
	}
	dropped := 0
	for _, it := range res.Run.Steps[0].Iterations {
		logs := it.Steps[0].Logs
		if len(logs) > 0 && strings.Contains(logs[len(logs)-1], "output budget") {
			dropped++
		}
	}
	if dropped < 200 {
		t.Errorf("%d items say their logs were dropped; want the ~210 past the first 8 MiB", dropped)
	}
}
