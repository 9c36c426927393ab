package dashboard

import (
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"strconv"
	"strings"
	"unicode/utf8"

	"flowservice/pkg/automation"
)

// The flow picture is an inline SVG the server draws from a definition: no
// script is needed to see it, and every string in it comes from a tenant,
// so every one goes through html.EscapeString (attribute and text alike).
//
// Layout: the trigger on top, the steps below it in order, joined by
// arrows. A SWITCH puts its cases side by side under it, each headed by its
// condition; a FOR_EACH draws its body in a dashed frame; a `when` is a
// line above its step. onError steps stand apart, to the right, in a frame
// of their own. Each step is a link to its anchor on the page (its
// settings on the flow page, its results on the run page).

const (
	boxW    = 200 // a step's box
	boxH    = 44
	whenH   = 18 // the `when` line above a box
	gapY    = 26 // between steps: the arrow
	colGap  = 18 // between SWITCH cases
	pad     = 12 // inside frames
	labelH  = 20 // a case's condition, a frame's title
	maxText = 28 // runes shown of a name or condition; the rest is in <title>

	charW         = 7   // the width of a character of a frame label, about
	lineH         = 15  // a line of a frame label
	maxCaseW      = 320 // the widest a case's frame grows for its condition
	maxLabelLines = 4   // lines of a case's condition; the rest is in <title>
)

// pictureStatus says how a run left a step, by name: succeeded, failed,
// skipped, waiting, running or unreached (the flow page passes none).
type pictureStatus func(name string) string

// pnode is one box of the picture with what nests in it.
type pnode struct {
	step   *automation.Step // nil for the trigger
	anchor string           // element id the box links to
	title  string           // first line
	sub    string           // second line
	when   string
	cols   []*pcol // SWITCH cases, then default
	body   *pseq   // FOR_EACH
	bodyOf string  // FOR_EACH: its items expression
	w, h   int
}

// pseq is steps one under the other.
type pseq struct {
	nodes []*pnode
	w, h  int
}

// pcol is a SWITCH case: its condition over its steps.
type pcol struct {
	label string
	lines []string // label wrapped to the frame's width
	rows  int      // label lines of the tallest label of its SWITCH: the cases' steps start level
	seq   *pseq
	w, h  int
}

// stepAnchors numbers a flow's steps in WalkSteps order, onError last: the
// ids of the boxes' targets ("step-3"), the same on every page of a flow
// and safe in an id and a URL fragment whatever the step's name.
func stepAnchors(f automation.Flow) map[string]string {
	ids := map[string]string{}
	n := 0
	visit := func(s *automation.Step) {
		n++
		if _, dup := ids[s.Name]; !dup {
			ids[s.Name] = "step-" + strconv.Itoa(n)
		}
	}
	automation.WalkSteps(f.Steps, visit)
	automation.WalkSteps(f.OnError, visit)
	return ids
}

// flowPicture draws f; status colours the steps (nil: no colours). Each
// box links to #its-anchor on the same page.
func flowPicture(f automation.Flow, status pictureStatus) template.HTML {
	anchors := stepAnchors(f)
	main := &pseq{nodes: append([]*pnode{triggerNode(f.Trigger)}, buildSeq(f.Steps, anchors).nodes...)}
	measureSeq(main)
	var onErr *pseq
	width, height := main.w+2*pad, main.h+2*pad
	errX := 0
	if len(f.OnError) > 0 {
		onErr = buildSeq(f.OnError, anchors)
		measureSeq(onErr)
		errX = width + colGap
		width = errX + onErr.w + 3*pad // the frame and its stroke, inside the picture
		height = max(height, onErr.h+labelH+3*pad)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="flow-picture" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" aria-label="%s">`,
		width, height, width, height, esc("Steps of "+f.Name))
	b.WriteString(`<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" class="arrowhead"/></marker></defs>`)
	drawSeq(&b, main, pad+main.w/2, pad, status)
	if onErr != nil {
		fmt.Fprintf(&b, `<g class="onerror"><rect class="frame onerror-frame" x="%d" y="%d" width="%d" height="%d" rx="8"/>`,
			errX, pad/2, onErr.w+2*pad, onErr.h+labelH+2*pad)
		fmt.Fprintf(&b, `<text class="frame-label" x="%d" y="%d">onError: once a run has failed</text>`, errX+pad, pad/2+labelH-4)
		drawSeq(&b, onErr, errX+pad+onErr.w/2, pad/2+labelH+pad, status)
		b.WriteString(`</g>`)
	}
	b.WriteString(`</svg>`)
	// Every tenant string above went through esc.
	return template.HTML(b.String())
}

func triggerNode(t automation.Trigger) *pnode {
	n := &pnode{anchor: "trigger", title: "Trigger", sub: string(t.Type)}
	switch {
	case t.Webhook != nil:
		n.sub = "Webhook " + t.Webhook.HTTPMethod + " " + t.Webhook.Path
	case t.Type == automation.TriggerWebhook:
		n.sub = "Webhook POST"
	case t.Schedule != nil:
		n.sub = "Schedule " + t.Schedule.Cron
	case t.Poll != nil:
		n.sub = "Poll every " + t.Poll.Every
	}
	return n
}

func buildSeq(steps []automation.Step, anchors map[string]string) *pseq {
	s := &pseq{}
	for i := range steps {
		st := &steps[i]
		n := &pnode{step: st, anchor: anchors[st.Name], title: st.Name, sub: string(st.Type), when: st.When}
		switch st.Type {
		case automation.StepSwitch:
			for j, c := range st.Cases {
				n.cols = append(n.cols, &pcol{label: fmt.Sprintf("case %d: %s", j+1, c.When), seq: buildSeq(c.Steps, anchors)})
			}
			if st.Default != nil || len(st.Cases) == 0 {
				n.cols = append(n.cols, &pcol{label: "default", seq: buildSeq(st.Default, anchors)})
			}
		case automation.StepForEach:
			n.body = buildSeq(st.Steps, anchors)
			n.bodyOf = strings.TrimSpace(string(st.Items))
			var expr string
			if json.Unmarshal(st.Items, &expr) == nil {
				n.bodyOf = expr // an expression, shown without its JSON quotes
			}
		}
		s.nodes = append(s.nodes, n)
	}
	return s
}

func measureSeq(s *pseq) {
	s.w, s.h = boxW, 0
	if len(s.nodes) == 0 {
		s.h = labelH // "no steps"
		return
	}
	for i, n := range s.nodes {
		measureNode(n)
		s.w = max(s.w, n.w)
		s.h += n.h
		if i > 0 {
			s.h += gapY
		}
	}
}

func measureNode(n *pnode) {
	n.w, n.h = boxW, boxH
	if n.when != "" {
		n.h += whenH
	}
	switch {
	case n.cols != nil:
		row, tallest := 0, 0
		for i, c := range n.cols {
			measureSeq(c.seq)
			// A case is as wide as its steps or its condition (up to
			// maxCaseW), and its condition wraps on up to maxLabelLines.
			c.w = max(c.seq.w+2*pad, min(utf8.RuneCountInString(c.label)*charW+2*pad, maxCaseW))
			c.lines = wrapLabel(c.label, (c.w-2*pad)/charW, maxLabelLines)
			row += c.w
			if i > 0 {
				row += colGap
			}
		}
		rows := 0
		for _, c := range n.cols {
			rows = max(rows, len(c.lines))
		}
		for _, c := range n.cols {
			c.rows = rows
			c.h = rows*lineH + 6 + c.seq.h + 2*pad
			tallest = max(tallest, c.h)
		}
		n.w = max(n.w, row)
		n.h += gapY + tallest
	case n.body != nil:
		measureSeq(n.body)
		n.w = max(n.w, n.body.w+2*pad)
		n.h += gapY + labelH + n.body.h + 2*pad
	}
}

// drawSeq draws s centred on cx from y down.
func drawSeq(b *strings.Builder, s *pseq, cx, y int, status pictureStatus) {
	if len(s.nodes) == 0 {
		fmt.Fprintf(b, `<text class="empty-seq" x="%d" y="%d" text-anchor="middle">no steps</text>`, cx, y+14)
		return
	}
	for i, n := range s.nodes {
		if i > 0 {
			fmt.Fprintf(b, `<line class="edge" x1="%d" y1="%d" x2="%d" y2="%d" marker-end="url(#arrow)"/>`, cx, y-gapY, cx, y-2)
		}
		drawNode(b, n, cx, y, status)
		y += n.h + gapY
	}
}

func drawNode(b *strings.Builder, n *pnode, cx, y int, status pictureStatus) {
	bottom := y + n.h
	cls := "node"
	name := ""
	if n.step != nil {
		name = n.step.Name
		cls += " type-" + strings.ToLower(string(n.step.Type))
		if status != nil {
			cls += " st-" + status(name)
		}
	} else {
		cls += " trigger"
	}
	fmt.Fprintf(b, `<g class="%s" data-step="%s">`, cls, esc(name))
	if n.when != "" {
		fmt.Fprintf(b, `<text class="when" x="%d" y="%d" text-anchor="middle"><title>%s</title>when %s</text>`,
			cx, y+whenH-5, esc("when "+n.when), esc(fitText(n.when)))
		y += whenH
	}
	tip := n.title + " (" + n.sub + ")"
	if n.step != nil && status != nil {
		tip += ": " + strings.ToUpper(status(name))
	}
	fmt.Fprintf(b, `<a href="#%s"><title>%s</title><rect class="box" x="%d" y="%d" width="%d" height="%d" rx="6"/>`,
		esc(n.anchor), esc(tip), cx-boxW/2, y, boxW, boxH)
	fmt.Fprintf(b, `<text class="name" x="%d" y="%d" text-anchor="middle">%s</text>`, cx, y+19, esc(fitText(n.title)))
	fmt.Fprintf(b, `<text class="kind" x="%d" y="%d" text-anchor="middle">%s</text></a>`, cx, y+36, esc(fitText(n.sub)))
	below := y + boxH + gapY
	switch {
	case n.cols != nil:
		row := 0
		for i, c := range n.cols {
			if i > 0 {
				row += colGap
			}
			row += c.w
		}
		x := cx - row/2
		for _, c := range n.cols {
			ccx := x + c.w/2
			fmt.Fprintf(b, `<path class="edge" d="M%d,%d V%d H%d V%d" fill="none" marker-end="url(#arrow)"/>`,
				cx, y+boxH, y+boxH+gapY/2, ccx, below-2)
			fmt.Fprintf(b, `<rect class="frame case" x="%d" y="%d" width="%d" height="%d" rx="8"/>`, x, below, c.w, c.h)
			// The whole condition is in the frame, wrapped, and in its
			// tooltip; the label takes focus so that a keyboard reads it.
			fmt.Fprintf(b, `<text class="frame-label" tabindex="0" x="%d" y="%d" text-anchor="middle"><title>%s</title>`, ccx, below+lineH, esc(c.label))
			for i, l := range c.lines {
				fmt.Fprintf(b, `<tspan x="%d" dy="%d">%s</tspan>`, ccx, min(i, 1)*lineH, esc(l))
			}
			b.WriteString(`</text>`)
			drawSeq(b, c.seq, ccx, below+c.rows*lineH+6+pad, status)
			// The branches join again under the SWITCH.
			fmt.Fprintf(b, `<path class="edge" d="M%d,%d V%d H%d" fill="none"/>`, ccx, below+c.h, bottom, cx)
			x += c.w + colGap
		}
	case n.body != nil:
		fw := n.body.w + 2*pad
		fmt.Fprintf(b, `<line class="edge" x1="%d" y1="%d" x2="%d" y2="%d" marker-end="url(#arrow)"/>`, cx, y+boxH, cx, below-2)
		fmt.Fprintf(b, `<rect class="frame loop" x="%d" y="%d" width="%d" height="%d" rx="8"/>`,
			cx-fw/2, below, fw, labelH+n.body.h+2*pad)
		label := "for each item of " + n.bodyOf
		fmt.Fprintf(b, `<text class="frame-label" x="%d" y="%d"><title>%s</title>%s</text>`,
			cx-fw/2+pad, below+labelH-4, esc(label), esc(fitWidth(label, fw)))
		drawSeq(b, n.body, cx, below+labelH+pad, status)
	}
	b.WriteString(`</g>`)
}

func esc(s string) string { return html.EscapeString(s) }

// fitText shortens s to maxText runes; the whole text is in the box's
// <title>.
func fitText(s string) string { return fitRunes(s, maxText) }

// fitWidth shortens a small label to what a frame w pixels wide holds.
func fitWidth(s string, w int) string { return fitRunes(s, max((w-2*pad)/6, maxText)) }

// wrapLabel cuts s into lines of at most width runes, at spaces where it
// can, at most lines lines (the last ending "…" when s is longer).
func wrapLabel(s string, width, lines int) []string {
	width = max(width, 8)
	words := strings.Fields(s)
	var out []string
	cur := ""
	for _, w := range words {
		for utf8.RuneCountInString(w) > width { // a word longer than a line
			if cur != "" {
				out, cur = append(out, cur), ""
			}
			r := []rune(w)
			out, w = append(out, string(r[:width])), string(r[width:])
		}
		switch {
		case cur == "":
			cur = w
		case utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(w) <= width:
			cur += " " + w
		default:
			out, cur = append(out, cur), w
		}
	}
	if cur != "" || len(out) == 0 {
		out = append(out, cur)
	}
	if len(out) > lines {
		out = out[:lines]
		out[lines-1] = fitRunes(out[lines-1]+" …", width)
		if !strings.HasSuffix(out[lines-1], "…") {
			out[lines-1] += "…"
		}
	}
	return out
}

func fitRunes(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
