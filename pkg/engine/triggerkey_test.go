package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

func TestTriggerKey(t *testing.T) {
	td := automation.TriggerData{Body: json.RawMessage(`{"id":"evt_1","n":7,"obj":{"a":1}}`),
		Headers: map[string]string{"x-id": "h-1"}, Params: map[string]string{"id": "42"}}
	for _, tt := range []struct{ expr, want string }{
		{"trigger.body.id", "evt_1"},
		{"trigger.body.n", "7"},
		{"trigger.body.obj", `{"a":1}`},
		{"trigger.body.missing", ""},
		{"trigger.headers['x-id'] + ':' + trigger.params.id", "h-1:42"},
	} {
		got, err := Checker{}.TriggerKey(context.Background(), tt.expr, td)
		if err != nil || got != tt.want {
			t.Errorf("TriggerKey(%q) = %q, %v; want %q", tt.expr, got, err, tt.want)
		}
	}
	if _, err := (Checker{}).TriggerKey(context.Background(), "trigger.body.(", td); err == nil {
		t.Error("a bad expression evaluated")
	}
	if _, err := (Checker{}).TriggerKey(context.Background(), "steps.x.y", td); err == nil {
		t.Error("steps are not in scope of a trigger key, yet it evaluated")
	}
}

// TestTriggerKeyBudget: the receiver's budget stops a heavy key
// expression after a few thousand iterations, where a step's budget would
// allow a million, and stops one that runs past its time; a light one
// still works. Each limit is tested with the other one out of reach, so
// that a loaded machine cannot make the clock win the iteration case.
func TestTriggerKeyBudget(t *testing.T) {
	td := automation.TriggerData{Body: json.RawMessage(`{"id":"evt_1"}`)}
	roomyTime := receiverBudget
	roomyTime.time = time.Hour
	roomyLoops := receiverBudget
	roomyLoops.time, roomyLoops.iterations = time.Nanosecond, MaxLoopIterations
	for _, tt := range []struct {
		expr string
		lim  receiverLimits
		want string
	}{
		{`string(len(filter(0..200000, # % 2 == 0)))`, roomyTime, "more than 10000 loop iterations"},
		{`string(reduce(0..50000, #acc + len(map(0..10, #)), 0))`, roomyTime, "more than 10000 loop iterations"},
		{`string(len(filter(0..200000, # % 2 == 0)))`, roomyLoops, "evaluation stopped"},
	} {
		if got, err := (Checker{}).triggerKey(context.Background(), tt.expr, td, tt.lim); err == nil {
			t.Errorf("TriggerKey(%s) = %q within the receiver's budget", tt.expr, got)
		} else if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("TriggerKey(%s): %v, want the budget's error (%s)", tt.expr, err, tt.want)
		}
	}
	if got, err := (Checker{}).triggerKey(context.Background(), `trigger.body.id + "-" + string(len(0..100))`, td, roomyTime); err != nil || got != "evt_1-101" {
		t.Errorf("light key = %q, %v", got, err)
	}
	if receiverBudget.iterations != 10_000 || receiverBudget.time != 5*time.Millisecond {
		t.Errorf("the receiver's budget is %+v; docs/reliability.md gives 10,000 iterations and 5 ms", receiverBudget)
	}
}
