package dashboard

import (
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

// stepEntry is one step of a definition as the flow and run pages list it
// under the picture: the anchor its box links to, where it sits ("route ›
// case 1"), its settings and, on a run page, its results.
type stepEntry struct {
	Anchor, Where string
	Step          automation.Step
	Settings      string
	OnError       bool
	Status        string // run page: succeeded, failed, skipped, waiting, running, unreached
	Results       []occurrence
}

// occurrence is one result of a step in a run: a FOR_EACH body step has
// one per item.
type occurrence struct {
	Item   string // "item 2", or "" outside a loop
	Result automation.StepResult
}

// stepEntries lists f's steps in WalkSteps order, onError last.
func stepEntries(f automation.Flow) []stepEntry {
	anchors := stepAnchors(f)
	var out []stepEntry
	var walk func(steps []automation.Step, where string, onErr bool)
	walk = func(steps []automation.Step, where string, onErr bool) {
		for _, s := range steps {
			out = append(out, stepEntry{Anchor: anchors[s.Name], Where: where, Step: s, Settings: stepSettings(shallow(s)), OnError: onErr})
			in := where + s.Name + " › "
			for i, c := range s.Cases {
				walk(c.Steps, fmt.Sprintf("%scase %d › ", in, i+1), onErr)
			}
			if s.Default != nil {
				walk(s.Default, in+"default › ", onErr)
			}
			if s.Steps != nil {
				walk(s.Steps, in+"each item › ", onErr)
			}
		}
	}
	walk(f.Steps, "", false)
	walk(f.OnError, "onError › ", true)
	return out
}

// shallow is s without the steps nested in it: those are listed apart.
func shallow(s automation.Step) automation.Step {
	if s.Cases != nil {
		cases := make([]automation.Case, len(s.Cases)) // a copy: s shares the flow's
		for i, c := range s.Cases {
			cases[i] = automation.Case{When: c.When}
		}
		s.Cases = cases
	}
	s.Default, s.Steps = nil, nil
	return s
}

// panels are what the boxes of a picture open: the trigger's (its
// settings on the flow page, the data that started the run on a run page)
// and each step's.
type panels struct {
	TriggerLabel string // what Trigger shows
	Trigger      string // JSON
	Entries      []stepEntry
}

// flowPanels are the flow page's panels: settings, secrets masked.
func flowPanels(f automation.Flow) panels {
	b, _ := json.MarshalIndent(f.Trigger, "", "  ") // a Trigger always marshals
	return panels{TriggerLabel: "settings", Trigger: string(b), Entries: stepEntries(f)}
}

// runView is what the run page draws from a run and its flow.
type runView struct {
	Picture  template.HTML
	Timeline template.HTML
	Panels   panels
}

// occurrences gathers every result of every step of r by name, in the
// order they ran: inside SWITCH branches and per FOR_EACH item.
func occurrences(r automation.Run) map[string][]occurrence {
	out := map[string][]occurrence{}
	var walk func(rs []automation.StepResult, item string)
	walk = func(rs []automation.StepResult, item string) {
		for _, s := range rs {
			out[s.Name] = append(out[s.Name], occurrence{Item: item, Result: s})
			walk(s.Steps, item)
			for _, it := range s.Iterations {
				walk(it.Steps, fmt.Sprintf("item %d", it.Index))
			}
		}
	}
	walk(r.Steps, "")
	walk(r.OnErrorSteps, "")
	return out
}

// newRunView colours f's picture by r's results. A step with no result is
// "waiting" when it is where a RUNNING run stands (the first top-level step
// without one; "running" unless the run waits for a later attempt or a
// WAIT), otherwise "unreached".
func newRunView(f automation.Flow, r automation.Run) runView {
	occ := occurrences(r)
	current := ""
	if r.Status == automation.RunRunning {
		for _, s := range f.Steps {
			if len(occ[s.Name]) == 0 {
				current = s.Name
				break
			}
		}
	}
	// A run paused by a WAIT (at any depth: in a SWITCH's branch too)
	// stands at the WAIT it ran last: amber, not green.
	waitingAt := ""
	if r.Status == automation.RunRunning && r.WaitingFor == automation.WaitingWait {
		var last time.Time
		for name, got := range occ {
			for _, o := range got {
				if o.Result.Type == automation.StepWait && o.Result.Status == automation.StepSucceeded &&
					o.Result.StartedAt != nil && !o.Result.StartedAt.Before(last) {
					last, waitingAt = *o.Result.StartedAt, name
				}
			}
		}
	}
	status := func(name string) string {
		got := occ[name]
		if name == waitingAt {
			return "waiting"
		}
		if len(got) == 0 {
			switch {
			case name != current:
				return "unreached"
			case r.NextAttemptAt != nil:
				return "waiting"
			default:
				return "running"
			}
		}
		st := "skipped"
		for _, o := range got {
			switch o.Result.Status {
			case automation.StepFailed:
				return "failed"
			case automation.StepSucceeded:
				st = "succeeded"
			case automation.StepRunning:
				// A SWITCH whose branch holds the step the run waits at.
				if st != "succeeded" {
					st = "waiting"
					if r.NextAttemptAt == nil {
						st = "running"
					}
				}
			case automation.StepPending:
				if st == "skipped" {
					st = "unreached"
				}
			}
		}
		return st
	}
	entries := stepEntries(f)
	for i := range entries {
		entries[i].Status = status(entries[i].Step.Name)
		entries[i].Results = occ[entries[i].Step.Name]
	}
	trigger, _ := json.MarshalIndent(r.Trigger, "", "  ") // TriggerData always marshals
	return runView{Picture: flowPicture(f, status), Timeline: timeline(r),
		Panels: panels{TriggerLabel: "the data that started this run", Trigger: string(trigger), Entries: entries}}
}

// timeline draws a run's step results as bars on one time axis, from the
// run's start to its end (or its next attempt): a wait or a retry between
// attempts is the empty space between bars.
func timeline(r automation.Run) template.HTML {
	type row struct {
		label, tip string
		from, to   time.Time
		attempts   int
		class      string
	}
	var rows []row
	var walk func(rs []automation.StepResult, item string)
	walk = func(rs []automation.StepResult, item string) {
		for _, s := range rs {
			if s.StartedAt != nil && len(rows) < 200 {
				to := *s.StartedAt
				if s.FinishedAt != nil {
					to = *s.FinishedAt
				}
				label := s.Name
				if item != "" {
					label += " [" + item + "]"
				}
				rows = append(rows, row{label: label, from: *s.StartedAt, to: to, attempts: s.Attempts,
					class: "st-" + strings.ToLower(string(s.Status)),
					tip:   fmt.Sprintf("%s: %s, %d ms, %d attempt(s), from %s", label, s.Status, s.DurationMs, max(s.Attempts, 1), s.StartedAt.UTC().Format(time.RFC3339Nano))})
			}
			walk(s.Steps, item)
			for _, it := range s.Iterations {
				walk(it.Steps, fmt.Sprintf("item %d", it.Index))
			}
		}
	}
	walk(r.Steps, "")
	walk(r.OnErrorSteps, "onError")
	if len(rows) == 0 && r.NextAttemptAt == nil {
		return ""
	}
	start := r.Created
	if r.Started != nil && r.Started.Before(start) {
		start = *r.Started
	}
	end := start
	for _, rw := range rows {
		if rw.from.Before(start) {
			start = rw.from
		}
		if rw.to.After(end) {
			end = rw.to
		}
	}
	if r.Finished != nil && r.Finished.After(end) {
		end = *r.Finished
	}
	if r.NextAttemptAt != nil && r.NextAttemptAt.After(end) {
		end = *r.NextAttemptAt
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Millisecond
	}
	const labelW, barW, rowH, infoW = 170, 380, 22, 90
	x := func(t time.Time) float64 { return labelW + float64(barW)*float64(t.Sub(start))/float64(span) }
	n := len(rows)
	if r.NextAttemptAt != nil {
		n++
	}
	width, height := labelW+barW+infoW, n*rowH+24
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="Step timeline">`,
		width, height, width, height)
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, labelW, n*rowH+4, labelW+barW, n*rowH+4)
	fmt.Fprintf(&b, `<text class="tick" x="%d" y="%d">0</text><text class="tick" x="%d" y="%d" text-anchor="end">%s</text>`,
		labelW, n*rowH+18, labelW+barW, n*rowH+18, esc(span.Round(time.Millisecond).String()))
	for i, rw := range rows {
		y := i * rowH
		x0, x1 := x(rw.from), x(rw.to)
		fmt.Fprintf(&b, `<g class="bar %s"><title>%s</title><text class="label" x="0" y="%d">%s</text>`, rw.class, esc(rw.tip), y+15, esc(fitText(rw.label)))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" rx="3"/>`, x0, y+4, max(x1-x0, 2), rowH-8)
		info := fmt.Sprintf("%d ms", rw.to.Sub(rw.from).Milliseconds())
		if rw.attempts > 1 {
			info += fmt.Sprintf(" ×%d", rw.attempts)
		}
		fmt.Fprintf(&b, `<text class="info" x="%d" y="%d">%s</text></g>`, labelW+barW+6, y+15, esc(info))
	}
	if r.NextAttemptAt != nil {
		y := len(rows) * rowH
		from := start
		if len(rows) > 0 {
			from = rows[len(rows)-1].to
		}
		label := "waiting"
		if r.WaitingFor != "" {
			label = "waiting: " + string(r.WaitingFor)
		}
		fmt.Fprintf(&b, `<g class="bar waiting"><title>%s</title><text class="label" x="0" y="%d">%s</text>`,
			esc("next attempt at "+r.NextAttemptAt.UTC().Format(time.RFC3339)), y+15, esc(fitText(label)))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" rx="3"/></g>`, x(from), y+4, max(x(*r.NextAttemptAt)-x(from), 2), rowH-8)
	}
	b.WriteString(`</svg>`)
	// Every tenant string above went through esc.
	return template.HTML(b.String())
}
