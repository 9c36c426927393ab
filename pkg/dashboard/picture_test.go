package dashboard

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// svgBox is a step's box as the picture drew it.
type svgBox struct {
	class string
	x, y  float64
}

// parseSVG reads a picture as XML (so it must be well-formed) and returns
// its boxes by data-step ("" is the trigger) and all its text.
func parseSVG(t *testing.T, svg string) (map[string]svgBox, string) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(svg))
	boxes := map[string]svgBox{}
	var stack []string // data-step of the enclosing <g>s
	var all strings.Builder
	for {
		tok, err := dec.Token()
		if err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("the picture is not well-formed XML: %v\n%s", err, svg)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			attr := func(n string) string {
				for _, a := range el.Attr {
					if a.Name.Local == n {
						return a.Value
					}
				}
				return ""
			}
			switch el.Name.Local {
			case "g":
				stack = append(stack, attr("data-step"))
				if c := attr("class"); strings.HasPrefix(c, "node") {
					boxes[attr("data-step")] = svgBox{class: c}
				}
			case "rect":
				if attr("class") == "box" && len(stack) > 0 {
					b := boxes[stack[len(stack)-1]]
					b.x, _ = strconv.ParseFloat(attr("x"), 64)
					b.y, _ = strconv.ParseFloat(attr("y"), 64)
					boxes[stack[len(stack)-1]] = b
				}
			case "script", "foreignObject":
				t.Fatalf("the picture holds a <%s>:\n%s", el.Name.Local, svg)
			}
		case xml.EndElement:
			if el.Name.Local == "g" {
				stack = stack[:len(stack)-1]
			}
		case xml.CharData:
			all.Write(el)
			all.WriteString("\n")
		}
	}
	return boxes, all.String()
}

// nestedFlow has every shape the picture draws, and tenant strings that
// would break out of the SVG if they were not escaped.
func nestedFlow() automation.Flow {
	return automation.Flow{
		Name:    `Orders "</svg><script>alert(1)</script>`,
		Trigger: automation.Trigger{Type: automation.TriggerWebhook},
		Steps: []automation.Step{
			{Name: "check", Type: automation.StepFilter, Condition: "trigger.body.ok"},
			{Name: "route", Type: automation.StepSwitch, Cases: []automation.Case{
				{When: `trigger.body.type == "</text><script>x</script>"`, Steps: []automation.Step{
					{Name: "paid", Type: automation.StepSet, Values: json.RawMessage(`{}`)}}},
				{When: "trigger.body.type == 'refund'", Steps: []automation.Step{
					{Name: "refund", Type: automation.StepHTTP, URL: "https://example.com"},
					{Name: "each", Type: automation.StepForEach, Items: json.RawMessage(`"trigger.body.lines"`), Steps: []automation.Step{
						{Name: "line", Type: automation.StepSet, When: "item.qty > 0 && '<b>' != ''", Values: json.RawMessage(`{}`)}}},
				}},
			}, Default: []automation.Step{{Name: "other", Type: automation.StepSet, Values: json.RawMessage(`{}`)}}},
			{Name: "reply", Type: automation.StepRespond, StatusCode: 200},
		},
		OnError: []automation.Step{{Name: "alert", Type: automation.StepHTTP, URL: "https://example.com/alert"}},
	}
}

func TestFlowPictureDrawsNestedSteps(t *testing.T) {
	svg := string(flowPicture(nestedFlow(), nil))
	boxes, text := parseSVG(t, svg)
	for _, name := range []string{"check", "route", "paid", "refund", "each", "line", "other", "reply", "alert"} {
		if _, ok := boxes[name]; !ok {
			t.Errorf("no box for step %q", name)
		}
	}
	for _, want := range []string{"Trigger", "case 1: trigger.body.type ==", "case 2: trigger.body.type ==", "default",
		"for each item of", "when item.qty > 0", "onError", "FOR_EACH", "SWITCH"} {
		if !strings.Contains(text, want) {
			t.Errorf("the picture's text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(svg, "<script") || strings.Contains(svg, "</text><script") {
		t.Errorf("a tenant string reached the picture unescaped:\n%s", svg)
	}
	// Steps in order down the page; cases side by side under their
	// SWITCH; a loop's body under the loop; onError to the right of all.
	b := boxes
	switch {
	case !(b[""].y < b["check"].y && b["check"].y < b["route"].y && b["route"].y < b["paid"].y && b["other"].y < b["reply"].y):
		t.Errorf("steps are not drawn in order down the page: %+v", b)
	case !(b["paid"].y == b["refund"].y && b["paid"].y == b["other"].y && b["paid"].x < b["refund"].x && b["refund"].x < b["other"].x):
		t.Errorf("the SWITCH cases are not side by side: paid %+v refund %+v other %+v", b["paid"], b["refund"], b["other"])
	case !(b["refund"].y < b["each"].y && b["each"].y < b["line"].y && b["line"].x == b["each"].x):
		t.Errorf("the loop body is not under its FOR_EACH: each %+v line %+v", b["each"], b["line"])
	case !(b["alert"].x > b["other"].x):
		t.Errorf("onError is not apart: alert %+v", b["alert"])
	}
	// Each box links to its step's panel.
	anchors := stepAnchors(nestedFlow())
	for name, id := range anchors {
		if !strings.Contains(svg, `<a href="#`+id+`">`) {
			t.Errorf("no link to %s (%s)", id, name)
		}
	}
	if len(anchors) != 9 {
		t.Errorf("anchors = %v, want one per step", anchors)
	}
}

func TestRunPictureColoursSteps(t *testing.T) {
	f := nestedFlow()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(ms int) *time.Time { v := t0.Add(time.Duration(ms) * time.Millisecond); return &v }
	res := func(name string, st automation.StepStatus, from, to int) automation.StepResult {
		return automation.StepResult{Name: name, Status: st, StartedAt: at(from), FinishedAt: at(to), DurationMs: int64(to - from), Attempts: 1}
	}
	route := res("route", automation.StepSucceeded, 10, 400)
	each := res("each", automation.StepFailed, 30, 400)
	each.Iterations = []automation.Iteration{
		{Index: 0, Status: automation.StepSucceeded, Steps: []automation.StepResult{res("line", automation.StepSucceeded, 31, 32)}},
		{Index: 1, Status: automation.StepFailed, Steps: []automation.StepResult{res("line", automation.StepFailed, 33, 34)}},
	}
	refund := res("refund", automation.StepSucceeded, 11, 29)
	refund.Attempts = 3
	route.Steps = []automation.StepResult{refund, each}
	run := automation.Run{ID: "run_1", Status: automation.RunFailed, Created: t0, Started: at(0), Finished: at(2000),
		Steps: []automation.StepResult{res("check", automation.StepSucceeded, 1, 2), route,
			{Name: "reply", Status: automation.StepSkipped}},
		OnErrorSteps: []automation.StepResult{res("alert", automation.StepSucceeded, 1900, 1950)},
	}
	v := newRunView(f, run)
	boxes, _ := parseSVG(t, string(v.Picture))
	for name, want := range map[string]string{
		"check": "st-succeeded", "route": "st-succeeded", "refund": "st-succeeded", "each": "st-failed",
		"line": "st-failed", "paid": "st-unreached", "other": "st-unreached", "reply": "st-skipped", "alert": "st-succeeded",
	} {
		if !strings.Contains(boxes[name].class, want) {
			t.Errorf("box %s has class %q, want %s", name, boxes[name].class, want)
		}
	}
	for _, e := range v.Panels.Entries {
		if e.Step.Name == "line" && (len(e.Results) != 2 || e.Results[1].Item != "item 1" || e.Status != "failed") {
			t.Errorf("the line step's panel: %+v", e)
		}
	}

	// The timeline: a bar per result on one axis, the retried step says
	// so, and onError's bar stands after a gap.
	tl := string(v.Timeline)
	if _, err := xml.NewDecoder(strings.NewReader(tl)).Token(); err != nil || !strings.Contains(tl, "×3") {
		t.Errorf("timeline lacks the attempts of refund:\n%s", tl)
	}
	bars := map[string]float64{}
	dec := xml.NewDecoder(strings.NewReader(tl))
	label := ""
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if el, ok := tok.(xml.StartElement); ok && el.Name.Local == "rect" {
			for _, a := range el.Attr {
				if a.Name.Local == "x" {
					bars[label], _ = strconv.ParseFloat(a.Value, 64)
				}
			}
		}
		if cd, ok := tok.(xml.CharData); ok {
			label = strings.TrimSpace(string(cd))
		}
	}
	if !(bars["alert [onError]"] > bars["each"]+300) {
		t.Errorf("onError's bar does not stand after the gap: %v", bars)
	}

	// A RUNNING run waiting for its next attempt: the step where it stands
	// is waiting, the ones after it not reached.
	waiting := automation.Run{ID: "run_2", Status: automation.RunRunning, Created: t0, Started: at(0), NextAttemptAt: at(60000),
		Steps: []automation.StepResult{res("check", automation.StepSucceeded, 1, 2)}}
	boxes, _ = parseSVG(t, string(newRunView(f, waiting).Picture))
	if !strings.Contains(boxes["route"].class, "st-waiting") || !strings.Contains(boxes["reply"].class, "st-unreached") {
		t.Errorf("waiting run: route %q, reply %q", boxes["route"].class, boxes["reply"].class)
	}
	if tl := string(newRunView(f, waiting).Timeline); !strings.Contains(tl, "waiting") {
		t.Errorf("the timeline of a waiting run does not show the wait:\n%s", tl)
	}
}

// The flow page and the run page carry the pictures.
func TestFlowAndRunPagesDrawPictures(t *testing.T) {
	e := newEnv(t)
	f := e.flow(t, e.p, "Router", automation.Step{Name: "route", Type: automation.StepSwitch, Cases: []automation.Case{
		{When: "trigger.body.kind == 'a'", Steps: []automation.Step{{Name: "inner", Type: automation.StepSet, Values: json.RawMessage(`{"x":1}`)}}},
	}})
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")
	wantPage(t, b.get("/ui/flows/"+f.ID), http.StatusOK, `<svg class="flow-picture"`, `data-step="inner"`,
		`<a href="#trigger">`, `<details id="trigger" class="panel">`,
		`case 1: trigger.body.kind == &#39;a&#39;`, `<details id="step-2" class="panel">`, "route › case 1 › ")

	ctx := context.Background()
	if _, err := e.svc.EnableFlow(ctx, e.p, f.ID); err != nil {
		t.Fatal(err)
	}
	wf, err := e.svc.WebhookFlow(ctx, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	run, err := receiveWebhook(ctx, e.svc, wf, automation.TriggerData{Method: "POST", Body: json.RawMessage(`{"kind":"a"}`)})
	if err != nil {
		t.Fatal(err)
	}
	// Queued, it is RUNNING: the page reloads itself, the first step is
	// where the run stands.
	wantPage(t, b.get("/ui/flows/"+f.ID+"/runs/"+run.ID), http.StatusOK, `<meta http-equiv="refresh" content="2">`,
		`<g class="node type-switch st-running" data-step="route">`, `<g class="node type-set st-unreached" data-step="inner">`)
	if _, err := e.svc.ExecuteRun(ctx, e.p.ID, run.ID); err != nil {
		t.Fatal(err)
	}
	done := b.get("/ui/flows/" + f.ID + "/runs/" + run.ID)
	wantPage(t, done, http.StatusOK, `<g class="node type-set st-succeeded" data-step="inner">`,
		`<svg class="timeline"`, `<details id="step-2" class="panel st-succeeded">`, "Output")
	if strings.Contains(done.body, `http-equiv="refresh"`) {
		t.Error("a finished run's page reloads itself")
	}
}
