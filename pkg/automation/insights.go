package automation

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"time"
)

// Run insights: a flow's finished runs counted by the hour as they finish,
// so that "how many runs, how many failed, how long they took" over a day,
// a week or a month is read from a few hundred small counters, never from
// the runs themselves (docs/api.md, "Insights"; bounds in
// docs/reliability.md).
//
// Each hour of a flow keeps the runs that finished in it by status
// (succeeded, failed, timeout) and by duration, in DurationBins: a fixed
// log-scale histogram whose bins merge by adding, so the percentiles of any
// span are those of the sum of its hours' bins.

// InsightPeriod is the span GET /flows/{flowId}/insights covers.
type InsightPeriod string

// The periods, and how each is bucketed: 24 hourly buckets, or whole UTC
// days (7 and 30), the current hour or day last, under way.
const (
	InsightsDay   InsightPeriod = "24h"
	InsightsWeek  InsightPeriod = "7d"
	InsightsMonth InsightPeriod = "30d"
)

// InsightPeriods lists the periods in the order messages name them.
var InsightPeriods = []InsightPeriod{InsightsDay, InsightsWeek, InsightsMonth}

// buckets is how many buckets of what size a period has.
func (p InsightPeriod) buckets() (n int, size time.Duration) {
	switch p {
	case InsightsWeek:
		return 7, 24 * time.Hour
	case InsightsMonth:
		return 30, 24 * time.Hour
	}
	return 24, time.Hour
}

// ParseInsightPeriod checks the period a client asks for; "" is 24h.
func ParseInsightPeriod(s string) (InsightPeriod, error) {
	if s == "" {
		return InsightsDay, nil
	}
	for _, p := range InsightPeriods {
		if string(p) == s {
			return p, nil
		}
	}
	names := make([]string, len(InsightPeriods))
	for i, p := range InsightPeriods {
		names[i] = string(p)
	}
	return "", InvalidCode("INVALID_PARAMETER", "period must be one of %s, got %q",
		strings.Join(names, ", "), ClipID(s))
}

// InsightRetention is how long a flow's hourly counters are kept: the 30
// days of the longest period and the day under way. SQLite drops older
// hours as a flow's next hour begins; DynamoDB's TTL removes them.
const InsightRetention = 31 * 24 * time.Hour

// DurationBins are the upper bounds, in milliseconds, of the duration
// histogram's bins: about 1.5 times apart below 100 s (1, 1.5, 2, 3, 5, 7
// per decade), coarser above, and one more bin past the last bound for
// runs over a day. A percentile is reported as the upper bound of its bin,
// so it is at most about 1.5 times the true value up to 100 s.
var DurationBins = [...]int64{
	10, 15, 20, 30, 50, 70,
	100, 150, 200, 300, 500, 700,
	1_000, 1_500, 2_000, 3_000, 5_000, 7_000,
	10_000, 15_000, 20_000, 30_000, 50_000, 70_000,
	100_000, 200_000, 500_000,
	1_000_000, 3_600_000, 21_600_000, 86_400_000,
}

// DurationBinCount is the number of bins: one per bound and the overflow.
const DurationBinCount = len(DurationBins) + 1

// DurationBin is the bin a duration of ms milliseconds counts in.
func DurationBin(ms int64) int {
	for i, b := range DurationBins {
		if ms <= b {
			return i
		}
	}
	return len(DurationBins)
}

// binValue is what a percentile in bin i reports: the bin's upper bound,
// and for the overflow bin the last bound (the run took at least a day).
func binValue(i int) int64 {
	return DurationBins[min(i, len(DurationBins)-1)]
}

// InsightCell is one hour of a flow's counters, as a store keeps them.
type InsightCell struct {
	Hour      time.Time // the hour's start, UTC
	Succeeded int64
	Failed    int64
	Timeout   int64
	Bins      [DurationBinCount]int64 // runs by duration; they sum to the three counts
}

// Runs is the number of runs the cell counts.
func (c InsightCell) Runs() int64 { return c.Succeeded + c.Failed + c.Timeout }

// RunInsight is what one finished run adds to its flow's counters: the
// hour it finished in (its creation when it has no finish time), its
// duration's bin, and which status counter it adds 1 to.
type RunInsight struct {
	Hour   time.Time
	Bin    int
	Status RunStatus // SUCCEEDED, FAILED or TIMEOUT
}

// InsightOf is RunInsight for a final run.
func InsightOf(r Run) RunInsight {
	at := r.Created
	if r.Finished != nil {
		at = *r.Finished
	}
	var ms int64
	switch {
	case r.DurationMs != nil:
		ms = *r.DurationMs
	case r.Finished != nil && r.Started != nil:
		ms = r.Finished.Sub(*r.Started).Milliseconds()
	}
	status := r.Status
	if status != RunFailed && status != RunTimeout {
		status = RunSucceeded
	}
	return RunInsight{Hour: at.UTC().Truncate(time.Hour), Bin: DurationBin(ms), Status: status}
}

// InsightStore reads the counters that RunStore.FinishRun and
// FinishedRuns.InsertFinishedRun keep as runs finish (flowd: in the
// finish's own transaction; DynamoDB: an update right after it, best
// effort), for InsightRetention.
type InsightStore interface {
	// FlowInsights returns the flow's hourly counters with Hour in
	// [from, until), oldest first; hours without a finished run are left
	// out, and so is everything of a flow of another project.
	FlowInsights(ctx context.Context, project, flowID string, from, until time.Time) ([]InsightCell, error)
}

// Insights is a flow's runs over a period, as GET .../insights answers.
// Failed and Timeout count the runs that ended so; FailureRate and each
// bucket's Failed count both (every run that did not succeed).
type Insights struct {
	Runs        int64            `json:"runs"`
	Succeeded   int64            `json:"succeeded"`
	Failed      int64            `json:"failed"`
	Timeout     int64            `json:"timeout"`
	FailureRate float64          `json:"failureRate"`
	DurationMs  InsightDurations `json:"durationMs"`
	Buckets     []InsightBucket  `json:"buckets"`
}

// InsightDurations are percentiles of run durations, in milliseconds, as
// the upper bounds of DurationBins; null without runs.
type InsightDurations struct {
	P50 *int64 `json:"p50"`
	P95 *int64 `json:"p95"`
}

// InsightBucket is one hour or day of a period, oldest first.
type InsightBucket struct {
	Start  time.Time `json:"-"`
	Runs   int64     `json:"runs"`
	Failed int64     `json:"failed"` // FAILED and TIMEOUT
	P95Ms  *int64    `json:"p95Ms"`
}

// MarshalJSON writes Start in TimeFormat.
func (b InsightBucket) MarshalJSON() ([]byte, error) {
	type plain InsightBucket
	return json.Marshal(struct {
		Start stamp `json:"start"`
		plain
	}{stamp(b.Start), plain(b)})
}

// FlowInsights sums a flow's counters over the period (InsightPeriod; ""
// is 24h) ending now, by the service's clock: 24 hourly buckets, or 7 or
// 30 daily ones (UTC days), the current one last. A flow missing from the
// project is FLOW_NOT_FOUND.
func (s *RunService) FlowInsights(ctx context.Context, p Project, flowID, period string) (Insights, error) {
	per, err := ParseInsightPeriod(period)
	if err != nil {
		return Insights{}, err
	}
	if _, err := s.store.Flow(ctx, p.ID, flowID); err != nil {
		return Insights{}, wrap("flow insights", err)
	}
	w := per.window(s.clock())
	cells, err := s.store.FlowInsights(ctx, p.ID, flowID, w.from, w.until())
	if err != nil {
		return Insights{}, wrap("flow insights", err)
	}
	return w.summarize(cells), nil
}

// MaxOverviewFlows bounds the project overview: the insights of a
// project's first flows (creation order), one store read each.
const MaxOverviewFlows = 25

// ProjectInsights is the project overview: the insights of the project's
// first MaxOverviewFlows flows over one period, read at one clock reading
// so that their buckets line up, and of those flows together (their
// counters merged, percentiles included). More says the project has more
// flows than the overview shows.
type ProjectInsights struct {
	Total Insights
	Flows []FlowInsights
	More  bool
}

// FlowInsights is one flow of the project overview.
type FlowInsights struct {
	Flow     FlowSummary
	Insights Insights
}

// ProjectInsights reads the overview of the project's flows (see the
// type) over period, as FlowInsights takes it.
func (s *RunService) ProjectInsights(ctx context.Context, p Project, period string) (ProjectInsights, error) {
	per, err := ParseInsightPeriod(period)
	if err != nil {
		return ProjectInsights{}, err
	}
	page, err := s.store.ListFlows(ctx, p.ID, ListQuery{Limit: MaxOverviewFlows})
	if err != nil {
		return ProjectInsights{}, wrap("project insights", err)
	}
	w := per.window(s.clock())
	out := ProjectInsights{More: page.Next != ""}
	var all []InsightCell
	for _, f := range page.Items {
		cells, err := s.store.FlowInsights(ctx, p.ID, f.ID, w.from, w.until())
		if err != nil {
			return ProjectInsights{}, wrap("project insights", err)
		}
		all = append(all, cells...)
		out.Flows = append(out.Flows, FlowInsights{Flow: f.Summary(), Insights: w.summarize(cells)})
	}
	out.Total = w.summarize(all)
	return out, nil
}

// insightWindow is a period's buckets at one reading of the clock: n of
// size from from on.
type insightWindow struct {
	from time.Time
	size time.Duration
	n    int
}

func (p InsightPeriod) window(now time.Time) insightWindow {
	n, size := p.buckets()
	last := now.UTC().Truncate(size) // hours and UTC days both align
	return insightWindow{from: last.Add(-time.Duration(n-1) * size), size: size, n: n}
}

func (w insightWindow) until() time.Time { return w.from.Add(time.Duration(w.n) * w.size) }

// summarize adds cells into the window's buckets, and the whole.
func (w insightWindow) summarize(cells []InsightCell) Insights {
	from, size, n := w.from, w.size, w.n
	bins := make([][DurationBinCount]int64, n)
	out := Insights{Buckets: make([]InsightBucket, n)}
	for i := range out.Buckets {
		out.Buckets[i].Start = from.Add(time.Duration(i) * size)
	}
	var all [DurationBinCount]int64
	for _, c := range cells {
		i := int(c.Hour.Sub(from) / size)
		if c.Hour.Before(from) || i >= n {
			continue // a store may answer a little more than asked
		}
		b := &out.Buckets[i]
		b.Runs += c.Runs()
		b.Failed += c.Failed + c.Timeout
		out.Succeeded += c.Succeeded
		out.Failed += c.Failed
		out.Timeout += c.Timeout
		for k, v := range c.Bins {
			bins[i][k] += v
			all[k] += v
		}
	}
	for i := range out.Buckets {
		out.Buckets[i].P95Ms = percentile(bins[i][:], 0.95)
	}
	out.Runs = out.Succeeded + out.Failed + out.Timeout
	if out.Runs > 0 {
		out.FailureRate = math.Round(float64(out.Failed+out.Timeout)/float64(out.Runs)*1e4) / 1e4
	}
	out.DurationMs = InsightDurations{P50: percentile(all[:], 0.5), P95: percentile(all[:], 0.95)}
	return out
}

// percentile is the q-th percentile of a histogram by nearest rank (the
// smallest bin holding at least q of the runs), as its bin's upper bound;
// nil for an empty histogram.
func percentile(bins []int64, q float64) *int64 {
	var total int64
	for _, v := range bins {
		total += v
	}
	if total == 0 {
		return nil
	}
	rank := int64(math.Ceil(q * float64(total)))
	var seen int64
	for i, v := range bins {
		if seen += v; seen >= max(rank, 1) {
			ms := binValue(i)
			return &ms
		}
	}
	ms := binValue(len(bins) - 1)
	return &ms
}
