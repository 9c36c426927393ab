package sqlitestore

import (
	"encoding/json"
	"flowservice/pkg/rundoc"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// summaryCases are runs in every shape a summary cuts: nested results,
// error steps, a response, null steps, and text that looks like the keys
// cut (in strings, escaped, in raw bodies and outputs).
func summaryCases() []automation.Run {
	now := time.Date(2026, 11, 22, 23, 0, 0, 120000000, time.UTC)
	fin := now.Add(1500 * time.Millisecond)
	d := int64(1500)
	tricky := json.RawMessage(`{"body":"x","rawBody":"\"output\":{}","steps":[{"output":1}],"s":"a\\\"b}]","n":[1,{"iterations":null}]}`)
	full := automation.Run{
		ID: "run_x", Project: "prj_x", FlowID: "flw_x", Status: automation.RunFailed, Error: `step "call": answered 500 <html>`,
		Created: now, Started: &now, Finished: &fin, DurationMs: &d, Attempts: 2, NextAttemptAt: &fin,
		ResumedFrom: "run_w", StoppedAt: "f",
		Trigger: automation.TriggerData{Method: "POST", Path: "/hook/\"q\"", Headers: map[string]string{"x-a": "<b>&", "x-body": `"body":1`},
			Query: map[string]string{"steps": "1"}, Body: json.RawMessage("{ \"html\" : \"<script>&</script>\",\n \"n\": [1, 2] }"),
			RawBody: "{ \"html\" : 1 }", Params: map[string]string{"id": "7"},
			Files:      []automation.TriggerFile{{Field: "f", Filename: "a.txt", ContentType: "text/plain", Size: 3, Base64: "YWJj"}},
			BodyBase64: "AAEC"},
		Steps: []automation.StepResult{
			{Name: "call", Type: automation.StepHTTP, Status: automation.StepFailed, Error: "answered 500",
				Output: json.RawMessage(`{"status": 500, "body": {"a": "<i>"}}`), StartedAt: &now, FinishedAt: &fin, DurationMs: 1500, Attempts: 3,
				Logs:  []string{"one", `two "quoted"`},
				Steps: []automation.StepResult{{Name: "inner", Type: automation.StepSet, Status: automation.StepSucceeded, Output: json.RawMessage(`{"x" : "&"}`)}}},
			{Name: "each", Type: automation.StepForEach, Status: automation.StepSucceeded, Output: tricky,
				Iterations: []automation.Iteration{{Index: 0, Status: automation.StepSucceeded, Steps: []automation.StepResult{{Name: "i", Type: automation.StepSet, Status: automation.StepSucceeded}}}}},
			{Name: "later", Type: automation.StepSet, Status: automation.StepSkipped},
		},
		OnErrorSteps: []automation.StepResult{{Name: "alert", Type: automation.StepHTTP, Status: automation.StepSucceeded, Output: json.RawMessage(`{}`)}},
		Response:     &automation.RunResponse{StatusCode: 201, Body: tricky, Headers: map[string]string{"body": "b"}, ContentType: "text/plain", Text: true},
	}
	fresh := automation.Run{ID: "run_y", Project: "prj_x", FlowID: "flw_x", Status: automation.RunRunning, Created: now,
		Trigger: automation.TriggerData{Method: "GET", Path: "/h"}}
	emptySteps := fresh
	emptySteps.Steps = []automation.StepResult{}
	emptySteps.OnErrorSteps = []automation.StepResult{}
	nullResponse := full
	nullResponse.Response = &automation.RunResponse{StatusCode: 200}
	called, calledNoWait := fresh, fresh // runs a CALL_FLOW started
	called.Trigger.Caller = &automation.Caller{RunID: "run_p", FlowID: "flw_\"wait\"", Wait: true}
	calledNoWait.Trigger.Caller = &automation.Caller{RunID: "run_p", FlowID: "flw_p"}
	return []automation.Run{full, fresh, emptySteps, nullResponse, finishedRun(), {}, called, calledNoWait}
}

// TestSummaryFromDoc: the summary cut out of a run's document is byte for
// byte encodeSummary's, which encodes Run.Summary.
func TestSummaryFromDoc(t *testing.T) {
	for i, r := range summaryCases() {
		want, err := encodeSummary(r)
		if err != nil {
			t.Fatal(err)
		}
		doc, sum, err := encodeRunAndSummary(r)
		if err != nil {
			t.Fatal(err)
		}
		if wantDoc, _ := encodeRun(r); doc != wantDoc {
			t.Errorf("case %d: document =\n%s\nwant\n%s", i, doc, wantDoc)
		}
		got, err := rundoc.SummaryFromDoc([]byte(doc))
		if err != nil {
			t.Fatalf("case %d: %v (document %s)", i, err, doc)
		}
		if string(got) != want || sum != want {
			t.Errorf("case %d: summary =\n%s\nwant\n%s", i, got, want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"a":}`, `{"a":1,}`, `{"a" 1}`, `{"trigger":{"body":"x}`, `{"steps":[1,]}`, `{"steps":{}}`} {
		if got, err := rundoc.SummaryFromDoc([]byte(bad)); err == nil {
			t.Errorf("rundoc.SummaryFromDoc(%q) = %s; want an error", bad, got)
		}
	}
}

// FuzzSummaryFromDoc varies the free text of a run (bodies, outputs,
// header values, errors) and compares with encodeSummary.
func FuzzSummaryFromDoc(f *testing.F) {
	f.Add(`{"a":1}`, `{"body":"}"}`, `x"y`, "\\", `"steps":[`)
	f.Add(`"\u2028<>&"`, `[{"output":{}}]`, "\xff", "é", `}`)
	f.Fuzz(func(t *testing.T, body, output, header, msg, key string) {
		r := summaryCases()[0]
		if json.Valid([]byte(body)) {
			r.Trigger.Body = json.RawMessage(body)
		}
		if json.Valid([]byte(output)) {
			r.Steps[0].Output = json.RawMessage(output)
			r.Response.Body = json.RawMessage(output)
		}
		r.Trigger.Headers = map[string]string{key: header}
		r.Trigger.RawBody, r.Error, r.Steps[1].Error = msg, msg, header
		r.Steps[2].Logs = []string{key, msg}
		want, err := encodeSummary(r)
		if err != nil {
			t.Skip() // not encodable at all
		}
		doc, err := encodeRun(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rundoc.SummaryFromDoc([]byte(doc))
		if err != nil || string(got) != want {
			t.Fatalf("summary = %s, %v\nwant %s", got, err, want)
		}
	})
}

// BenchmarkSummaryFromDoc is the summary of a finished run of the
// end-to-end flow, cut from its document.
func BenchmarkSummaryFromDoc(b *testing.B) {
	doc, err := encodeRun(finishedRun())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rundoc.SummaryFromDoc([]byte(doc)); err != nil {
			b.Fatal(err)
		}
	}
}
