package dynamostore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

var _ automation.InsightStore = (*Store)(nil)

// A flow's insight counters (automation.InsightCell) are items of the runs
// table, one per flow and UTC day: id insights#<flowId>#<YYYYMMDD>, with
// project, expiresAt (the table's TTL: the day's end plus
// automation.InsightRetention) and, per hour HH that saw a finish,
// counters hHHs, hHHf and hHHt (succeeded, failed, timeout) and hHHbN (the
// hour's runs in duration bin N). An item carries no index attribute, so no
// index holds it. Attributes appear as the ADDs make them: a day's item
// holds only its hours' non-zero counters, at most 24 x 35 of them (about
// 8 KB), in practice a few per hour.
const insightPrefix = "insights#"

func insightKey(flowID string, day time.Time) map[string]types.AttributeValue {
	return runKey(insightPrefix + flowID + "#" + day.UTC().Format("20060102"))
}

// insightStatus is the letter of each status counter.
var insightStatus = map[automation.RunStatus]string{
	automation.RunSucceeded: "s", automation.RunFailed: "f", automation.RunTimeout: "t",
}

// addInsight counts a finished run in its flow's day item: one UpdateItem
// that ADDs 1 to the hour's status counter and duration bin. It follows
// the finish as addStats does, not inside it: the day item is as hot as
// the flow item (every finish of the flow that day), and a transaction over
// it and the run would contend the same way. The counters are best effort:
// a process that dies between the finish and this write loses that run's
// count, and a retried finish (RUN_FINISHED) adds nothing.
func (s *Store) addInsight(ctx context.Context, r automation.Run) error {
	if s.t.Runs == "" {
		return nil
	}
	in := automation.InsightOf(r)
	day := in.Hour.Truncate(24 * time.Hour)
	hh := fmt.Sprintf("h%02d", in.Hour.Hour())
	expires := day.Add(24*time.Hour + automation.InsightRetention).Unix()
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.t.Runs, Key: insightKey(r.FlowID, day),
		UpdateExpression: aws.String("ADD #c :one, #b :one SET #p = :project, #e = :expires"),
		ExpressionAttributeNames: map[string]string{
			"#c": hh + insightStatus[in.Status], "#b": hh + "b" + strconv.Itoa(in.Bin),
			"#p": attrProject, "#e": attrExpiresAt,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": num(1), ":project": str(r.Project), ":expires": num(expires),
		},
	})
	return err
}

// FlowInsights reads the day items that [from, until) touches (at most 30
// for the longest period, one BatchGetItem; eventually consistent: a run
// that finished a moment ago may not count yet) and returns their hours in
// the span, oldest first.
func (s *Store) FlowInsights(ctx context.Context, project, flowID string, from, until time.Time) ([]automation.InsightCell, error) {
	if s.t.Runs == "" {
		return nil, nil
	}
	var keys []map[string]types.AttributeValue
	for day := from.UTC().Truncate(24 * time.Hour); day.Before(until); day = day.Add(24 * time.Hour) {
		keys = append(keys, insightKey(flowID, day))
	}
	items, err := s.batchGet(ctx, s.t.Runs, keys)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: insights of flow %s: %w", flowID, err)
	}
	var out []automation.InsightCell
	for _, it := range items {
		rd := reader{item: it}
		if rd.str(attrProject) != project {
			continue // another project's flow reads as one without runs
		}
		date, ok := strings.CutPrefix(rd.str(attrID), insightPrefix+flowID+"#")
		day, err := time.Parse("20060102", date)
		if !ok || err != nil || rd.err != nil {
			return nil, fmt.Errorf("dynamostore: insights of flow %s: malformed item %s", flowID, rd.str(attrID))
		}
		cells, err := decodeInsightDay(day, it)
		if err != nil {
			return nil, fmt.Errorf("dynamostore: insights of flow %s: %w", flowID, err)
		}
		for _, c := range cells {
			if !c.Hour.Before(from) && c.Hour.Before(until) {
				out = append(out, c)
			}
		}
	}
	slices.SortFunc(out, func(a, b automation.InsightCell) int { return a.Hour.Compare(b.Hour) })
	return out, nil
}

// decodeInsightDay reads the hour counters of one day item.
func decodeInsightDay(day time.Time, item map[string]types.AttributeValue) ([]automation.InsightCell, error) {
	hours := map[int]*automation.InsightCell{}
	for name, v := range item {
		if len(name) < 4 || name[0] != 'h' {
			continue
		}
		h, err := strconv.Atoi(name[1:3])
		if err != nil || h < 0 || h > 23 {
			continue
		}
		n, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			return nil, fmt.Errorf("attribute %s: want a number, got %T", name, v)
		}
		count, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("attribute %s: %w", name, err)
		}
		c := hours[h]
		if c == nil {
			c = &automation.InsightCell{Hour: day.Add(time.Duration(h) * time.Hour)}
			hours[h] = c
		}
		switch rest := name[3:]; {
		case rest == "s":
			c.Succeeded += count
		case rest == "f":
			c.Failed += count
		case rest == "t":
			c.Timeout += count
		case rest[0] == 'b':
			bin, err := strconv.Atoi(rest[1:])
			if err != nil || bin < 0 || bin >= automation.DurationBinCount {
				return nil, fmt.Errorf("attribute %s: no such duration bin", name)
			}
			c.Bins[bin] += count
		}
	}
	out := make([]automation.InsightCell, 0, len(hours))
	for _, c := range hours {
		out = append(out, *c)
	}
	return out, nil
}
