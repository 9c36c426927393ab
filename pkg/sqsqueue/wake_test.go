package sqsqueue_test

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"flowservice/pkg/automation"
)

// TestWakeRun sends, on moto, a message for a run waiting for its child,
// visible at once and due now (no notBefore): the runner claims the run
// as soon as it receives it.
func TestWakeRun(t *testing.T) {
	e := newEnv(t, nil)
	if err := e.queue.WakeRun(t.Context(), "prj_1", "run_parent"); err != nil {
		t.Fatal(err)
	}
	m, ok := receive(t, e.sqs, e.url)
	if !ok {
		t.Fatal("no message visible after WakeRun")
	}
	var got automation.QueueMessage
	if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &got); err != nil {
		t.Fatal(err)
	}
	if got.Kind != automation.MessageRun || got.Project != "prj_1" || got.RunID != "run_parent" || got.NotBefore != nil {
		t.Errorf("message %s, want a run message for run_parent of prj_1, due now", aws.ToString(m.Body))
	}
}
