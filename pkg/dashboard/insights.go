package dashboard

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"net/http"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

// Run insights drawn by the server (docs/dashboard.md, "Run insights"):
// bar charts as inline SVG from GET .../insights's figures, no script. The
// flow page shows its flow's runs per bucket (succeeded and failed
// stacked) and p95 duration per bucket; the project page shows each of the
// first flows' runs as a small chart, and all of them together.

// insightsView is one period of insights as a page shows it.
type insightsView struct {
	Period      string
	Periods     []periodLink
	In          automation.Insights
	Runs        template.HTML // the runs chart
	Durations   template.HTML // the p95 chart
	FailureRate string
	P50, P95    string
}

// periodLink is one choice of period above a chart.
type periodLink struct {
	Name, Label string
	Current     bool
}

var periodLabels = map[automation.InsightPeriod]string{
	automation.InsightsDay:   "24 hours",
	automation.InsightsWeek:  "7 days",
	automation.InsightsMonth: "30 days",
}

// insightPeriod is the period a page was asked for (?period=), checked as
// the API checks it: a bad one is a 400 naming the parameter.
func insightPeriod(r *http.Request) (automation.InsightPeriod, error) {
	return automation.ParseInsightPeriod(r.URL.Query().Get("period"))
}

func newInsightsView(in automation.Insights, per automation.InsightPeriod) *insightsView {
	v := &insightsView{Period: periodLabels[per], In: in,
		Runs: runsChart(in, per, 720, 140), Durations: p95Chart(in, per, 720, 100),
		FailureRate: "—", P50: durationText(in.DurationMs.P50), P95: durationText(in.DurationMs.P95)}
	if in.Runs > 0 {
		v.FailureRate = fmt.Sprintf("%.1f %%", in.FailureRate*100)
	}
	for _, p := range automation.InsightPeriods {
		v.Periods = append(v.Periods, periodLink{Name: string(p), Label: periodLabels[p], Current: p == per})
	}
	return v
}

// durationText shows a percentile: the bound of its bin, so "≤".
func durationText(ms *int64) string {
	switch {
	case ms == nil:
		return "—"
	case *ms >= automation.DurationBins[len(automation.DurationBins)-1]:
		return "≥ 1 d"
	case *ms < 1000:
		return fmt.Sprintf("≤ %d ms", *ms)
	case *ms < 60_000:
		return "≤ " + trimZero(float64(*ms)/1000) + " s"
	case *ms < 3_600_000:
		return "≤ " + trimZero(float64(*ms)/60_000) + " min"
	}
	return "≤ " + trimZero(float64(*ms)/3_600_000) + " h"
}

func trimZero(f float64) string { return strings.TrimSuffix(fmt.Sprintf("%.1f", f), ".0") }

// bucketLabel names a bucket's start: its hour, or its day.
func bucketLabel(t time.Time, per automation.InsightPeriod) string {
	if per == automation.InsightsDay {
		return t.UTC().Format("Jan 2 15:04") + " UTC"
	}
	return t.UTC().Format("Mon Jan 2") + " (UTC)"
}

// runsChart draws each bucket's runs as a bar, its failed part (FAILED and
// TIMEOUT) on top in red, scaled to the busiest bucket; each bar's title
// gives its figures. w and h are the drawing's size in its own units (it
// scales to its box).
func runsChart(in automation.Insights, per automation.InsightPeriod, w, h int) template.HTML {
	var most int64
	for _, b := range in.Buckets {
		most = max(most, b.Runs)
	}
	return chart(in, per, w, h, "insights-runs",
		fmt.Sprintf("Runs per %s: %d runs, %d did not succeed", unitOf(per), in.Runs, in.Failed+in.Timeout),
		func(sb *strings.Builder, b automation.InsightBucket, x, bw, plot float64) {
			if b.Runs == 0 {
				return
			}
			total := plot * float64(b.Runs) / float64(most)
			failed := plot * float64(b.Failed) / float64(most)
			fmt.Fprintf(sb, `<rect class="bar-ok" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`,
				x, plot-total, bw, total-failed)
			if b.Failed > 0 {
				fmt.Fprintf(sb, `<rect class="bar-failed" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`,
					x, plot-total, bw, failed)
			}
		})
}

// p95Chart draws each bucket's p95 duration as a bar on a log scale (the
// bins are log-scale too), scaled to the slowest bucket.
func p95Chart(in automation.Insights, per automation.InsightPeriod, w, h int) template.HTML {
	var most float64
	for _, b := range in.Buckets {
		if b.P95Ms != nil {
			most = max(most, math.Log10(float64(*b.P95Ms)+1))
		}
	}
	return chart(in, per, w, h, "insights-p95",
		fmt.Sprintf("p95 duration per %s (log scale): %s over the period", unitOf(per), durationText(in.DurationMs.P95)),
		func(sb *strings.Builder, b automation.InsightBucket, x, bw, plot float64) {
			if b.P95Ms == nil || most == 0 {
				return
			}
			bar := max(plot*math.Log10(float64(*b.P95Ms)+1)/most, 1)
			fmt.Fprintf(sb, `<rect class="bar-p95" x="%.1f" y="%.1f" width="%.1f" height="%.1f"/>`, x, plot-bar, bw, bar)
		})
}

func unitOf(per automation.InsightPeriod) string {
	if per == automation.InsightsDay {
		return "hour"
	}
	return "day"
}

// chart is the frame both charts share: a bar slot per bucket with its
// title (what a pointer over it shows), a base line, and the first and
// last bucket named under it. bar draws a bucket's bar in its slot.
func chart(in automation.Insights, per automation.InsightPeriod, w, h int, class, label string,
	bar func(sb *strings.Builder, b automation.InsightBucket, x, bw, plot float64)) template.HTML {
	labels := h >= 80 // a small chart (the overview's) names no bucket
	axis := 2
	if labels {
		axis = 16 // room for the labels under the bars
	}
	plot := float64(h - axis)
	var sb strings.Builder
	fmt.Fprintf(&sb, `<svg class="insights %s" viewBox="0 0 %d %d" role="img" aria-label="%s" xmlns="http://www.w3.org/2000/svg">`,
		class, w, h, html.EscapeString(label))
	n := max(len(in.Buckets), 1)
	slot := float64(w) / float64(n)
	bw := max(slot*0.8, 1)
	for i, b := range in.Buckets {
		x := float64(i)*slot + (slot-bw)/2
		fmt.Fprintf(&sb, `<g><title>%s: %d runs, %d did not succeed, p95 %s</title>`,
			html.EscapeString(bucketLabel(b.Start, per)), b.Runs, b.Failed, html.EscapeString(durationText(b.P95Ms)))
		// A transparent slot, so that the title shows over empty buckets too.
		fmt.Fprintf(&sb, `<rect class="slot" x="%.1f" y="0" width="%.1f" height="%.1f"/>`, float64(i)*slot, slot, plot)
		bar(&sb, b, x, bw, plot)
		sb.WriteString(`</g>`)
	}
	fmt.Fprintf(&sb, `<line class="axis" x1="0" y1="%.1f" x2="%d" y2="%.1f"/>`, plot, w, plot)
	if labels && len(in.Buckets) > 0 {
		first, last := in.Buckets[0].Start, in.Buckets[len(in.Buckets)-1].Start
		fmt.Fprintf(&sb, `<text x="0" y="%d">%s</text>`, h-3, html.EscapeString(bucketLabel(first, per)))
		fmt.Fprintf(&sb, `<text x="%d" y="%d" text-anchor="end">%s</text>`, w, h-3, html.EscapeString(bucketLabel(last, per)))
	}
	sb.WriteString(`</svg>`)
	return template.HTML(sb.String()) // every text in it is escaped above
}

// overviewRow is one flow of the project overview.
type overviewRow struct {
	Flow        automation.FlowSummary
	In          automation.Insights
	Chart       template.HTML
	FailureRate string
	P95         string
}

// overviewView is the project page's overview of its flows' runs.
type overviewView struct {
	Total *insightsView
	Rows  []overviewRow
	More  bool
	Max   int
}

func newOverviewView(pi automation.ProjectInsights, per automation.InsightPeriod) *overviewView {
	ov := &overviewView{Total: newInsightsView(pi.Total, per), More: pi.More, Max: automation.MaxOverviewFlows}
	for _, f := range pi.Flows {
		row := overviewRow{Flow: f.Flow, In: f.Insights, Chart: runsChart(f.Insights, per, 240, 40),
			FailureRate: "—", P95: durationText(f.Insights.DurationMs.P95)}
		if f.Insights.Runs > 0 {
			row.FailureRate = fmt.Sprintf("%.1f %%", f.Insights.FailureRate*100)
		}
		ov.Rows = append(ov.Rows, row)
	}
	return ov
}
