package dynamostore_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"flowservice/pkg/automation"
)

// TestInsightItemsExpire: a finished run is counted in its flow's day item
// of the runs table, which expires by the table's TTL InsightRetention
// after its day and which no index holds (no createdSort, no projectFlow).
func TestInsightItemsExpire(t *testing.T) {
	t.Parallel() // fresh tables of its own on the shared moto_server
	ctx := t.Context()
	s, client, tables := newStore(t)
	f := newFlow("prj_ins", "flw_ins", 0)
	if err := s.CreateFlow(ctx, f); err != nil {
		t.Fatal(err)
	}
	r := automation.Run{ID: automation.NewID(automation.PrefixRun), Project: f.Project, FlowID: f.ID,
		Status: automation.RunRunning, Created: base, Trigger: automation.TriggerData{Body: json.RawMessage(`{}`)}}
	if err := s.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	c, err := s.ClaimRun(ctx, f.Project, r.ID, base, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	fin, ms := base.Add(7*time.Hour), int64(250) // 19:00 UTC, bin 9 (≤ 300 ms)
	c.Status, c.Started, c.Finished, c.DurationMs, c.Error = automation.RunFailed, &base, &fin, &ms, "x"
	if err := s.FinishRun(ctx, c); err != nil {
		t.Fatal(err)
	}
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &tables.Runs, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "insights#flw_ins#20260301"}}})
	if err != nil || out.Item == nil {
		t.Fatalf("the day item: %v, %v", out, err)
	}
	number := func(name string) string {
		n, _ := out.Item[name].(*types.AttributeValueMemberN)
		if n == nil {
			return ""
		}
		return n.Value
	}
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	if want := strconv.FormatInt(day.Add(24*time.Hour+automation.InsightRetention).Unix(), 10); number("expiresAt") != want {
		t.Errorf("expiresAt = %s, want %s (the day's end and %v)", number("expiresAt"), want, automation.InsightRetention)
	}
	if number("h19f") != "1" || number("h19b9") != "1" || number("h19s") != "" {
		t.Errorf("counters = %v, want h19f and h19b9 at 1 and nothing else of the hour", out.Item)
	}
	for _, attr := range []string{"createdSort", "projectFlow", "projectFlowStatus", "projectRunStatus"} {
		if _, ok := out.Item[attr]; ok {
			t.Errorf("the day item has %s: an index would hold it", attr)
		}
	}
}
