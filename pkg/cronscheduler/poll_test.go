package cronscheduler

import (
	"bytes"
	"context"
	"testing"

	"flowservice/pkg/automation"
)

// pollRecorder is a Starter that polls: each PollFlow is sent on polled.
type pollRecorder struct {
	recorder
	polled chan string
}

func (p *pollRecorder) PollFlow(ctx context.Context, project, flowID string) error {
	p.polled <- flowID
	return nil
}

// TestPollEntries: an ACTIVE POLL flow gets an entry every `every` that
// polls (and starts no scheduled run), polls at once when enabled on a
// started scheduler, keeps its entry on an unrelated sync, and loses it
// when disabled.
func TestPollEntries(t *testing.T) {
	var logs bytes.Buffer
	s := New(logTo(&logs))
	p := &pollRecorder{polled: make(chan string, 4)}
	s.Start(p)
	t.Cleanup(func() { s.Stop(context.Background()) })

	f := automation.Flow{ID: "flw_poll", Project: "p1", Status: automation.FlowActive, TriggerType: automation.TriggerPoll,
		Trigger: automation.Trigger{Type: automation.TriggerPoll, Poll: &automation.Poll{Every: "90s", Items: "response.body", Key: "item.id",
			Request: automation.PollRequest{URL: "https://api.example.com/items"}}}}
	if err := s.SyncSchedule(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if got := <-p.polled; got != f.ID {
		t.Fatalf("polled %q at enabling", got)
	}
	e := s.entryOf(t, f)
	if !e.poll || e.cron != "@every 1m30s" || e.schedule.Next(at("2026-03-02T10:00:00Z")) != at("2026-03-02T10:01:30Z") {
		t.Fatalf("entry poll=%v cron %q next %v", e.poll, e.cron, e.schedule.Next(at("2026-03-02T10:00:00Z")))
	}
	// The cron runner's call polls again; no scheduled run is started.
	e.Run()
	if got := <-p.polled; got != f.ID {
		t.Fatalf("polled %q on firing", got)
	}
	if len(p.firings()) != 0 {
		t.Errorf("a poll entry started scheduled runs: %+v", p.firings())
	}
	// An unrelated sync keeps the entry: no extra poll.
	f.Name = "renamed"
	if err := s.SyncSchedule(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if s.entryOf(t, f) != e {
		t.Error("an unchanged poll got a new entry")
	}
	f.Status = automation.FlowInactive
	if err := s.SyncSchedule(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.lookup(f.Project, f.ID); ok {
		t.Error("a disabled POLL flow kept its entry")
	}
	select {
	case got := <-p.polled:
		t.Errorf("polled %q after the unrelated sync or the disable", got)
	default:
	}
}
