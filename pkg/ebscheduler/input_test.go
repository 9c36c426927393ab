package ebscheduler

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// checkInput fails unless input is a valid "schedule" QueueMessage template
// for the flow: valid JSON as it stands, holding the context attributes
// literally, and still the right message once EventBridge Scheduler has
// replaced them with a firing's values.
func checkInput(t *testing.T, what, input, project, flowID string) {
	t.Helper()
	if !json.Valid([]byte(input)) {
		t.Fatalf("%s: input %q is not JSON", what, input)
	}
	for _, attr := range []string{ExecutionIDAttribute, ScheduledTimeAttribute} {
		if !strings.Contains(input, attr) {
			t.Errorf("%s: input %q lacks the literal attribute %s", what, input, attr)
		}
	}
	var m automation.QueueMessage
	if err := json.Unmarshal([]byte(input), &m); err != nil {
		t.Fatalf("%s: input %q: %v", what, input, err)
	}
	want := automation.QueueMessage{Kind: automation.MessageSchedule, Project: project, FlowID: flowID,
		ExecutionID: ExecutionIDAttribute, ScheduledTime: ScheduledTimeAttribute}
	if m != want {
		t.Errorf("%s: input = %+v, want %+v", what, m, want)
	}

	// As EventBridge Scheduler sends it (values from its documentation).
	sent := strings.NewReplacer(ExecutionIDAttribute, "d32c5kddcf5bb8c3",
		ScheduledTimeAttribute, "2022-03-22T18:59:43Z").Replace(input)
	m = automation.QueueMessage{}
	if err := json.Unmarshal([]byte(sent), &m); err != nil {
		t.Fatalf("%s: message as sent %q: %v", what, sent, err)
	}
	if m.Kind != automation.MessageSchedule || m.Project != project || m.FlowID != flowID || m.ExecutionID != "d32c5kddcf5bb8c3" {
		t.Errorf("%s: message as sent = %+v", what, m)
	}
	if _, err := time.Parse(time.RFC3339, m.ScheduledTime); err != nil {
		t.Errorf("%s: scheduledTime as sent: %v", what, err)
	}
}

func TestInput(t *testing.T) {
	in, err := Input("prj_abc", "flw_def")
	if err != nil {
		t.Fatal(err)
	}
	checkInput(t, "Input", in, "prj_abc", "flw_def")
	if strings.Contains(in, `\u003c`) || strings.Contains(in, "\n") {
		t.Errorf("Input = %q: escaped attributes or a trailing newline", in)
	}
}
