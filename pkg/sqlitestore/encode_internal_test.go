package sqlitestore

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestEncodeRunIsJSONMarshal: encodeRun skips json.Marshal's second pass
// over the document, and must still write exactly its bytes (compact,
// HTML-escaped), whitespace and markup in raw parts included.
func TestEncodeRunIsJSONMarshal(t *testing.T) {
	now := time.Date(2026, 11, 22, 23, 0, 0, 123456789, time.UTC)
	fin := now.Add(1500 * time.Millisecond)
	d := int64(1500)
	r := automation.Run{
		ID: "run_x", Project: "prj_x", FlowID: "flw_x", Status: automation.RunSucceeded, Created: now,
		Started: &now, Finished: &fin, DurationMs: &d, Attempts: 2,
		Trigger: automation.TriggerData{Method: "POST", Headers: map[string]string{"x-a": "<b>&"},
			Body: json.RawMessage("{ \"html\" : \"<script>&</script>\",\n \"n\": [1, 2] }")},
		Steps: []automation.StepResult{{Name: "call", Type: automation.StepHTTP, Status: automation.StepSucceeded,
			Output: json.RawMessage(`{"status": 200, "body": {"a": "<i>"}}`), StartedAt: &now, FinishedAt: &fin,
			Steps: []automation.StepResult{{Name: "inner", Type: automation.StepSet, Status: automation.StepSucceeded, Output: json.RawMessage(`{"x" : "&"}`)}}}},
		Response: &automation.RunResponse{StatusCode: 201, Body: json.RawMessage(` {"ok" : true} `)},
	}
	want, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	got, err := encodeRun(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, `\u003cscript`) {
		t.Fatalf("the document keeps markup unescaped: %s", got)
	}
	if got != string(want) {
		t.Fatalf("encodeRun =\n%s\nwant json.Marshal's\n%s", got, want)
	}
}
