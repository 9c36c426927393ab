package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"flowservice/pkg/automation"
)

var _ automation.InsightStore = (*Store)(nil)

// The schema has one column per bin: a change of automation.DurationBins
// is a new migration, which this fails to compile without.
var _ [32 - automation.DurationBinCount]struct{}
var _ [automation.DurationBinCount - 32]struct{}

// insightUpserts holds, per duration bin, the one statement a finish adds
// to its transaction: the hour's row made or added to, returning how many
// runs it now counts (1: the flow's first finish of the hour).
var insightUpserts = func() [automation.DurationBinCount]string {
	var out [automation.DurationBinCount]string
	for i := range out {
		b := "b" + strconv.Itoa(i)
		out[i] = `INSERT INTO flow_insights (flow, hour, succeeded, failed, timeout, ` + b + `) VALUES (?1, ?2, ?3::bigint, ?4::bigint, ?5::bigint, 1)
			ON CONFLICT (flow, hour) DO UPDATE SET succeeded = flow_insights.succeeded + ?3, failed = flow_insights.failed + ?4,
			timeout = flow_insights.timeout + ?5, ` + b + ` = flow_insights.` + b + ` + 1
			RETURNING succeeded + failed + timeout`
	}
	return out
}()

// addInsight counts a finished run in its flow's hour, inside the finish's
// transaction (FinishRun, InsertFinishedRun): one upsert of one row by its
// primary key. The first finish of a flow in an hour also drops that
// flow's hours past the retention, one indexed delete an hour at most, so
// that a flow keeps at most InsightRetention of rows without a sweep.
func (s *Store) addInsight(ctx context.Context, tx *txn, r automation.Run) error {
	in := automation.InsightOf(r)
	var ok, failed, timeout int
	switch in.Status {
	case automation.RunFailed:
		failed = 1
	case automation.RunTimeout:
		timeout = 1
	default:
		ok = 1
	}
	hour := unixHour(in.Hour)
	var runs int64
	if err := s.queryRow(ctx, tx, insightUpserts[in.Bin], r.FlowID, hour, ok, failed, timeout).Scan(&runs); err != nil {
		return fmt.Errorf("count run %s in its flow's insights: %w", r.ID, err)
	}
	if runs == 1 {
		if _, err := s.exec(ctx, tx, `DELETE FROM flow_insights WHERE flow = ? AND hour <= ?`,
			r.FlowID, hour-int64(automation.InsightRetention/time.Hour)); err != nil {
			return fmt.Errorf("drop old insights of flow %s: %w", r.FlowID, err)
		}
	}
	return nil
}

func unixHour(t time.Time) int64 { return t.Unix() / 3600 }

// insightsSQL reads a flow's hours in a span, through the primary key,
// with the flow's project checked on the flow row.
var insightsSQL = func() string {
	cols := make([]string, automation.DurationBinCount)
	for i := range cols {
		cols[i] = "i.b" + strconv.Itoa(i)
	}
	return `SELECT i.hour, i.succeeded, i.failed, i.timeout, ` + strings.Join(cols, ", ") + `
		FROM flow_insights i JOIN flows f ON f.id = i.flow
		WHERE i.flow = ? AND f.project = ? AND i.hour >= ? AND i.hour < ? ORDER BY i.hour`
}()

// FlowInsights reads the flow's hourly counters with hours in [from, until).
func (s *Store) FlowInsights(ctx context.Context, project, flowID string, from, until time.Time) ([]automation.InsightCell, error) {
	first, end := unixHour(from), unixHour(until)
	if until.After(time.Unix(end*3600, 0)) {
		end++ // an hour that began before until is in
	}
	if from.After(time.Unix(first*3600, 0)) {
		first++
	}
	rows, err := s.query(ctx, insightsSQL, flowID, project, first, end)
	if err != nil {
		return nil, fmt.Errorf("pgstore: insights of flow %s: %w", flowID, err)
	}
	defer rows.Close()
	var out []automation.InsightCell
	for rows.Next() {
		var c automation.InsightCell
		var hour int64
		dest := []any{&hour, &c.Succeeded, &c.Failed, &c.Timeout}
		for i := range c.Bins {
			dest = append(dest, &c.Bins[i])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("pgstore: insights of flow %s: %w", flowID, err)
		}
		c.Hour = time.Unix(hour*3600, 0).UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("pgstore: insights of flow %s: %w", flowID, err)
	}
	return out, nil
}
