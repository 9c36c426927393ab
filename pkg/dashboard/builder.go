package dashboard

import (
	"encoding/json"
	"net/http"

	"flowservice/pkg/automation"
)

// The visual editor (static/builder.js) edits the same definition as the
// JSON view. Beyond the forms (forms.go) it needs from the server the data
// a step reads before any real run, and a way to try one step.

// stepTestData is the trigger data and the earlier outputs a step test
// reads when the editor sends none: the flow's last run, else its
// captured sample.
func (d *Dashboard) stepTestData(r *http.Request, flowID string) (automation.TriggerData, map[string]json.RawMessage) {
	td := automation.TriggerData{Body: json.RawMessage(`{}`)}
	outs := map[string]json.RawMessage{}
	if flowID == "" {
		return td, outs
	}
	p := project(r)
	if l, err := d.svc.ListRuns(r.Context(), p, flowID, automation.PageRequest{}); err == nil && len(l.Data) > 0 {
		if run, err := d.svc.Run(r.Context(), p, flowID, l.Data[0].ID); err == nil {
			var walk func(rs []automation.StepResult)
			walk = func(rs []automation.StepResult) {
				for _, s := range rs {
					if s.Status == automation.StepSucceeded && len(s.Output) > 0 {
						outs[s.Name] = s.Output
					}
					walk(s.Steps)
				}
			}
			walk(run.Steps)
			return run.Trigger, outs
		}
	}
	if s, err := d.svc.WebhookSample(r.Context(), p, flowID); err == nil {
		return s.Trigger, outs
	}
	return td, outs
}

// stepTestAnswer is what POST /ui/step-test answers: the step's result.
type stepTestAnswer struct {
	Status     automation.StepStatus `json:"status"`
	Output     json.RawMessage       `json:"output,omitempty"`
	Error      string                `json:"error,omitempty"`
	DurationMs int64                 `json:"durationMs"`
	// Data says what the step read: "last run", "sample" or "none".
	Data string `json:"data"`
}

// stepTest tries one step of the editor alone (automation.TestStep): form
// fields step (the step as JSON), flowId (may be empty), engine, and
// outputs (earlier steps' outputs the editor got from step tests, which
// win over the last run's).
func (d *Dashboard) stepTest(w http.ResponseWriter, r *http.Request) {
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	bad := func(msg string) {
		answer(http.StatusBadRequest, map[string]string{"error": "INVALID", "message": msg})
	}
	var t automation.StepTest
	if err := json.Unmarshal([]byte(r.PostFormValue("step")), &t.Step); err != nil {
		bad("step: want the step as a JSON object: " + err.Error())
		return
	}
	var outs map[string]json.RawMessage
	if o := r.PostFormValue("outputs"); o != "" {
		if err := json.Unmarshal([]byte(o), &outs); err != nil {
			bad("outputs: want a JSON object of step outputs by name: " + err.Error())
			return
		}
	}
	t.FlowID, t.Engine = r.PostFormValue("flowId"), automation.Engine(r.PostFormValue("engine"))
	var data string
	t.Trigger, t.Outputs = d.stepTestData(r, t.FlowID)
	switch {
	case len(t.Outputs) > 0 || t.Trigger.Method != "":
		data = "the last run or the sample"
	default:
		data = "an empty trigger body"
	}
	if b := r.PostFormValue("trigger"); b != "" {
		var body json.RawMessage
		if json.Unmarshal([]byte(b), &body) != nil {
			bad("trigger: want the trigger body as JSON")
			return
		}
		t.Trigger.Body, data = body, "the trigger body given"
	}
	for k, v := range outs {
		t.Outputs[k] = v
	}
	res, err := d.svc.TestStep(r.Context(), project(r), t)
	if err != nil {
		status, msg := d.problem(r, err)
		answer(status, map[string]string{"error": http.StatusText(status), "message": msg})
		return
	}
	answer(http.StatusOK, stepTestAnswer{Status: res.Status, Output: res.Output, Error: res.Error, DurationMs: res.DurationMs, Data: data})
}
