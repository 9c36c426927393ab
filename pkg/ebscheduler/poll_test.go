package ebscheduler

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"flowservice/pkg/automation"
)

func pollFlow(every string) automation.Flow {
	return automation.Flow{ID: automation.NewID(automation.PrefixFlow), Project: "prj_moto", Status: automation.FlowActive,
		TriggerType: automation.TriggerPoll, Trigger: automation.Trigger{Type: automation.TriggerPoll, Poll: &automation.Poll{
			Every: every, Request: automation.PollRequest{URL: "https://api.example.com/items"}, Items: "response.body", Key: "item.id"}}}
}

// TestPollScheduleOnMoto: an ACTIVE POLL flow gets a rate schedule that
// sends a "poll" message to the run queue, updated with its interval and
// removed when the flow is disabled.
func TestPollScheduleOnMoto(t *testing.T) {
	ctx := context.Background()
	s, client := openMoto(t)
	f := pollFlow("1m")
	for _, step := range []struct{ every, want string }{{"1m", "rate(1 minute)"}, {"2h", "rate(120 minutes)"}} {
		f.Trigger.Poll.Every = step.every
		if err := s.SyncSchedule(ctx, f); err != nil {
			t.Fatalf("every %s: %v", step.every, err)
		}
		out, err := getSchedule(ctx, s, client, f.ID)
		if err != nil || out == nil {
			t.Fatalf("every %s: GetSchedule = %v, %v", step.every, out, err)
		}
		if got := aws.ToString(out.ScheduleExpression); got != step.want {
			t.Errorf("every %s: expression %q, want %q", step.every, got, step.want)
		}
		var m automation.QueueMessage
		if err := json.Unmarshal([]byte(aws.ToString(out.Target.Input)), &m); err != nil ||
			m != (automation.QueueMessage{Kind: automation.MessagePoll, Project: "prj_moto", FlowID: f.ID}) {
			t.Errorf("every %s: input %s (%v), want a poll message", step.every, aws.ToString(out.Target.Input), err)
		}
	}
	f.Status = automation.FlowInactive
	if err := s.SyncSchedule(ctx, f); err != nil {
		t.Fatal(err)
	}
	if out, err := getSchedule(ctx, s, client, f.ID); out != nil || err != nil {
		t.Errorf("a disabled POLL flow kept its schedule: %v %v", out, err)
	}
}

// TestPollRate: EventBridge Scheduler's rates are whole minutes: under a
// minute fires every minute (the runner polls again within it), over a
// minute must be whole minutes, else a 400 at save time
// (Checker.PollEvery) and at sync.
func TestPollRate(t *testing.T) {
	for every, want := range map[string]string{"1m": "rate(1 minute)", "5m": "rate(5 minutes)", "24h": "rate(1440 minutes)",
		"30s": "rate(1 minute)", "10s": "rate(1 minute)", "90s": "", "61s": ""} {
		got, err := PollRate(pollFlow(every).Trigger.Poll)
		if got != want || (want == "") != errors.Is(err, automation.ErrInvalid) {
			t.Errorf("PollRate(%s) = %q, %v; want %q", every, got, err, want)
		}
	}
	if err := (Checker{}).PollEvery(90 * time.Second); !errors.Is(err, automation.ErrInvalid) {
		t.Errorf("PollEvery(90s) = %v", err)
	}
	if err := (Checker{}).PollEvery(30 * time.Second); err != nil {
		t.Errorf("PollEvery(30s) = %v", err)
	}
	if err := (Checker{}).PollEvery(5 * time.Minute); err != nil {
		t.Errorf("PollEvery(5m) = %v", err)
	}
}
