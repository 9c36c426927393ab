package dashboard

import (
	"html"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

// TestWaitInSwitchIsDrawnWaiting: a run paused at a WAIT inside a SWITCH's
// branch draws the WAIT and the SWITCH amber (waiting) and the steps not
// reached yet pale, not green and grey (skipped).
func TestWaitInSwitchIsDrawnWaiting(t *testing.T) {
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	next := at.Add(10 * time.Minute)
	f := automation.Flow{Name: "waits", Steps: []automation.Step{
		{Name: "route", Type: automation.StepSwitch, Cases: []automation.Case{{When: "true", Steps: []automation.Step{
			{Name: "pause", Type: automation.StepWait, Duration: "10m"}, {Name: "after", Type: automation.StepSet}}}}},
		{Name: "reply", Type: automation.StepRespond},
	}}
	r := automation.Run{Status: automation.RunRunning, WaitingFor: automation.WaitingWait, NextAttemptAt: &next, Steps: []automation.StepResult{
		{Name: "route", Type: automation.StepSwitch, Status: automation.StepRunning, StartedAt: &at, Steps: []automation.StepResult{
			{Name: "pause", Type: automation.StepWait, Status: automation.StepSucceeded, StartedAt: &at, FinishedAt: &at},
			{Name: "after", Type: automation.StepSet, Status: automation.StepPending}}},
		{Name: "reply", Type: automation.StepRespond, Status: automation.StepPending},
	}}
	pic := string(newRunView(f, r).Picture)
	for step, want := range map[string]string{"route": "st-waiting", "pause": "st-waiting", "after": "st-unreached", "reply": "st-unreached"} {
		i := strings.Index(pic, `data-step="`+step+`"`)
		if i < 0 {
			t.Fatalf("no box for %s", step)
		}
		if cls := pic[strings.LastIndex(pic[:i], `class="`):i]; !strings.Contains(cls, want) {
			t.Errorf("%s is drawn %q, want %s", step, cls, want)
		}
	}
}

// TestPictureFitsLabelsAndOnError: a long case condition is drawn whole
// (wrapped), the onError frame lies inside the picture, the picture scales
// to its frame's width, and a SWITCH's settings list its conditions
// without "steps": null.
func TestPictureFitsLabelsAndOnError(t *testing.T) {
	cond := `trigger.body.type == "order.created" && trigger.body.total > 100`
	f := automation.Flow{Name: "fits", Steps: []automation.Step{
		{Name: "route", Type: automation.StepSwitch, Cases: []automation.Case{{When: cond, Steps: []automation.Step{{Name: "big", Type: automation.StepSet}}}},
			Default: []automation.Step{{Name: "small", Type: automation.StepSet}}},
	}, OnError: []automation.Step{{Name: "alert", Type: automation.StepHTTP}}}
	pic := string(flowPicture(f, nil))
	var text strings.Builder
	for _, m := range regexp.MustCompile(`<tspan[^>]*>([^<]*)</tspan>`).FindAllStringSubmatch(pic, -1) {
		text.WriteString(html.UnescapeString(m[1]) + " ")
	}
	if !strings.Contains(strings.Join(strings.Fields(text.String()), " "), "case 1: "+cond) {
		t.Errorf("the case's condition is not drawn whole: %q", text.String())
	}
	w, _ := strconv.Atoi(regexp.MustCompile(`<svg[^>]* width="(\d+)"`).FindStringSubmatch(pic)[1])
	m := regexp.MustCompile(`class="frame onerror-frame" x="(\d+)" y="\d+" width="(\d+)"`).FindStringSubmatch(pic)
	x, fw := atoi(m[1]), atoi(m[2])
	if x+fw+1 > w {
		t.Errorf("the onError frame ends at %d, past the picture's width %d", x+fw, w)
	}
	if s := stepSettings(shallow(f.Steps[0])); strings.Contains(s, "null") || !strings.Contains(s, `"when": "trigger.body.type`) {
		t.Errorf("SWITCH settings:\n%s", s)
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// TestDiffFoldsUnchangedLines: long runs of unchanged lines fold into one
// row counting them, with three lines kept around each change.
func TestDiffFoldsUnchangedLines(t *testing.T) {
	var a, b []string
	for i := range 40 {
		a = append(a, "line "+strconv.Itoa(i))
	}
	b = append(b, a...)
	b[20] = "changed"
	rows := foldRows(lineDiff(a, b), diffContext)
	var kinds []string
	for _, r := range rows {
		k := r.Kind
		if r.Kind == "fold" {
			k += ":" + strconv.Itoa(r.Folded)
		}
		kinds = append(kinds, k)
	}
	want := "fold:17 same same same change same same same fold:16"
	if got := strings.Join(kinds, " "); got != want {
		t.Errorf("folded rows = %s, want %s", got, want)
	}
}
