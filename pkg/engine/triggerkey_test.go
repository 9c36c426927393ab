package engine

import (
	"context"
	"encoding/json"
	"testing"

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
