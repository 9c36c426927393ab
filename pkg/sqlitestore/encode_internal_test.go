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
			Body:   json.RawMessage("{ \"html\" : \"<script>&</script>\",\n \"n\": [1, 2] }"),
			Caller: &automation.Caller{RunID: "run_p", FlowID: "flw_p", Wait: true}},
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

// finishedRun is a run of the end-to-end benchmark's flow (a SET, then an
// HTTP call) as FinishRun writes it.
func finishedRun() automation.Run {
	now := time.Date(2026, 11, 22, 23, 0, 0, 123000000, time.UTC)
	fin := now.Add(3 * time.Millisecond)
	d := int64(3)
	return automation.Run{
		ID: "run_01KAQ5V8W3J2M9X1Y4Z6B7C8D9", Project: "prj_x", FlowID: "flw_01KAQ5V8W3J2M9X1Y4Z6B7C8D9", Status: automation.RunSucceeded,
		Created: now, Started: &now, Finished: &fin, DurationMs: &d, Attempts: 1,
		Trigger: automation.TriggerData{Method: "POST", Path: "/api/v1/webhooks/flw_01KAQ5V8W3J2M9X1Y4Z6B7C8D9",
			Headers: map[string]string{"accept-encoding": "gzip", "content-length": "76", "content-type": "application/json", "user-agent": "Go-http-client/1.1"},
			Query:   map[string]string{},
			Body:    json.RawMessage(`{"event":"push","ref":"refs/heads/main","data":{"id":12345,"user":"octo"}}`)},
		Steps: []automation.StepResult{
			{Name: "s", Type: automation.StepSet, Status: automation.StepSucceeded, Output: json.RawMessage(`{"ref":"refs/heads/main"}`),
				StartedAt: &now, FinishedAt: &now, Attempts: 1},
			{Name: "call", Type: automation.StepHTTP, Status: automation.StepSucceeded,
				Output:    json.RawMessage(`{"body":{"ok":true},"headers":{"content-length":"11","content-type":"application/json","date":"Sun, 22 Nov 2026 23:00:00 GMT"},"status":200}`),
				StartedAt: &now, FinishedAt: &fin, DurationMs: 3, Attempts: 1},
		},
		Response: &automation.RunResponse{StatusCode: 200, Body: json.RawMessage(`{"body":{"ok":true},"headers":{"content-length":"11"},"status":200}`)},
	}
}

// BenchmarkEncodeFinish is the JSON a finish writes: the document and the
// summary.
func BenchmarkEncodeFinish(b *testing.B) {
	r := finishedRun()
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := encodeRunAndSummary(r); err != nil {
			b.Fatal(err)
		}
	}
}
