package dashboard

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"flowservice/pkg/automation"
)

var svgRE = regexp.MustCompile(`(?s)<svg class="insights [^"]*".*?</svg>`)

// chartShape parses an insights chart as XML and counts its bar slots (one
// per bucket, each with a title) and its bars by class.
func chartShape(t *testing.T, svg string) (slots int, bars map[string]int, titles []string) {
	t.Helper()
	bars = map[string]int{}
	dec := xml.NewDecoder(strings.NewReader(svg))
	inTitle := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return slots, bars, titles
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v\n%s", err, svg)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			inTitle = el.Name.Local == "title"
			for _, a := range el.Attr {
				if el.Name.Local == "rect" && a.Name.Local == "class" {
					if a.Value == "slot" {
						slots++
					} else {
						bars[a.Value]++
					}
				}
			}
		case xml.CharData:
			if inTitle {
				titles = append(titles, string(el))
			}
		case xml.EndElement:
			inTitle = false
		}
	}
}

// TestFlowPageShowsInsights: the flow page draws its flow's runs as two
// server-made charts (runs per bucket, succeeded and failed stacked; p95
// per bucket) with the period's figures, for each period; a bad period
// is a 400 page naming it; the project page shows the flow in its overview.
func TestFlowPageShowsInsights(t *testing.T) {
	e := newEnv(t)
	f := e.flow(t, e.p, "charted")
	quiet := e.flow(t, e.p, "quiet")
	// One instant a little in the past: always in the last 24 hours and in
	// one bucket, whenever the test runs.
	fin := time.Now().UTC().Truncate(time.Millisecond).Add(-2 * time.Minute)
	for _, c := range []struct {
		ms     int64
		status automation.RunStatus
	}{{120, automation.RunSucceeded}, {120, automation.RunSucceeded}, {2500, automation.RunFailed}} {
		began, ms := fin.Add(-time.Duration(c.ms)*time.Millisecond), c.ms
		r := automation.Run{ID: automation.NewID(automation.PrefixRun), Project: e.p.ID, FlowID: f.ID, Status: c.status,
			Created: began, Started: &began, Finished: &fin, DurationMs: &ms, Steps: []automation.StepResult{},
			Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}}
		if err := e.store.(automation.FinishedRuns).InsertFinishedRun(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	b := e.browser(t)
	wantRedirect(t, b.signin(e.key), "/ui/flows")

	for _, c := range []struct {
		query, label string
		buckets      int
	}{{"", "24 hours", 24}, {"?period=7d", "7 days", 7}, {"?period=30d", "30 days", 30}} {
		p := b.get("/ui/flows/" + f.ID + c.query)
		wantPage(t, p, http.StatusOK, "Runs in the last "+c.label, "3: 2 succeeded, 1 failed, 0 timed out",
			"33.3 %", "p50 ≤ 150 ms, p95 ≤ 3 s")
		charts := svgRE.FindAllString(p.body, -1)
		if len(charts) != 2 {
			t.Fatalf("%s: %d charts on the flow page, want 2 (runs, p95)", c.label, len(charts))
		}
		slots, bars, titles := chartShape(t, charts[0])
		if slots != c.buckets || bars["bar-ok"] != 1 || bars["bar-failed"] != 1 || len(titles) != c.buckets {
			t.Errorf("%s runs chart: %d slots, bars %v, %d titles; want %d slots, one bucket with a green and a red bar",
				c.label, slots, bars, len(titles), c.buckets)
		}
		if !strings.Contains(strings.Join(titles, "\n"), "3 runs, 1 did not succeed, p95 ≤ 3 s") {
			t.Errorf("%s: no bar says its figures: %q", c.label, titles)
		}
		if slots, bars, _ := chartShape(t, charts[1]); slots != c.buckets || bars["bar-p95"] != 1 {
			t.Errorf("%s p95 chart: %d slots, bars %v", c.label, slots, bars)
		}
	}
	// A flow without runs: the frame, no bars, dashes for the figures.
	p := b.get("/ui/flows/" + quiet.ID)
	wantPage(t, p, http.StatusOK, "0: 0 succeeded, 0 failed, 0 timed out", "p50 —, p95 —")
	if _, bars, _ := chartShape(t, svgRE.FindString(p.body)); len(bars) != 0 {
		t.Errorf("a flow without runs has bars: %v", bars)
	}

	bad := b.get("/ui/flows/" + f.ID + "?period=1y")
	wantPage(t, bad, http.StatusBadRequest, "period must be one of 24h, 7d, 30d")

	proj := b.get("/ui/project?period=7d")
	wantPage(t, proj, http.StatusOK, "Runs in the last 7 days", ">charted</a>", ">quiet</a>", "33.3 %")
	if n := len(svgRE.FindAllString(proj.body, -1)); n != 4 {
		t.Errorf("the project page has %d charts, want 4 (the total's two, one per flow)", n)
	}
}
