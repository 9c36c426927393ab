package dashboard

import (
	"fmt"
	"net/http"
	"strconv"

	"flowservice/pkg/automation"
)

// The project page: the plan, each limit with what the project uses of it
// and what happens past it (docs/reliability.md), as GET /api/v1/project
// answers them; and the overview of its flows' runs (insights.go).

func (d *Dashboard) projectRoutes() {
	d.mux.Handle("GET /ui/project", d.auth(d.projectPage))
}

// limitRow is one limit as the page shows it.
type limitRow struct {
	Name, Limit, Usage, Past string
}

func (d *Dashboard) projectPage(w http.ResponseWriter, r *http.Request) {
	info, err := d.svc.ProjectInfo(r.Context(), project(r))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	l, u := info.Limits, info.Usage
	rows := []limitRow{
		{"webhooksPerSecond", count(l.WebhooksPerSecond, "a second"), "", "429 with Retry-After, no run"},
		{"concurrentRuns", count(l.ConcurrentRuns, "at once"), "", "the run waits"},
		{"outboundPerMinute", count(l.OutboundPerMinute, "HTTP requests a minute"), "", "the step waits"},
		{"flows", count(l.Flows, "flows"), strconv.FormatInt(u.Flows, 10), "403 QUOTA_EXCEEDED"},
		{"storedBytes", size(l.StoredBytes), byteSize(u.StoredBytes), "webhooks 429, old runs still purged"},
		{"versionsPerFlow", count(l.VersionsPerFlow, "versions a flow"), "", "the oldest pruned, except those running runs use"},
		{"aiTokensPerDay", count(l.AITokensPerDay, "model tokens a day (UTC)"), group(u.AITokensToday) + " today", "AI steps fail QUOTA_EXCEEDED"},
	}
	per, err := insightPeriod(r)
	if err != nil {
		d.fail(w, r, err)
		return
	}
	pi, err := d.svc.ProjectInsights(r.Context(), project(r), string(per))
	if err != nil {
		d.fail(w, r, err)
		return
	}
	d.render(w, r, http.StatusOK, "project", view{Title: "Project", Nav: "project",
		Data: struct {
			Info     automation.ProjectInfo
			Rows     []limitRow
			Overview *overviewView
		}{info, rows, newOverviewView(pi, per)}})
}

// count shows a limit of a number of things; nil is unlimited.
func count(n *int64, what string) string {
	if n == nil {
		return "unlimited"
	}
	return fmt.Sprintf("%s %s", group(*n), what)
}

// size shows a limit of bytes; nil is unlimited.
func size(n *int64) string {
	if n == nil {
		return "unlimited"
	}
	return byteSize(*n)
}

// byteSize shows bytes in binary units, as the plans state them (1 GiB).
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[i])
}

// group writes n with thousands separated by commas (6,000).
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
