package cronscheduler

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"flowservice/internal/testwait"
	"flowservice/pkg/automation"
	"flowservice/pkg/automation/schedtest"
)

func TestContract(t *testing.T) {
	schedtest.Run(t, func(t *testing.T) schedtest.Env {
		s := started(&recorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		return schedtest.Env{
			Scheduler: s,
			Lookup: func(_ context.Context, project, flowID string) (string, string, bool, error) {
				c, tz, ok := s.lookup(project, flowID)
				return c, tz, ok, nil
			},
		}
	})
}

// firing is one StartScheduledRun call.
type firing struct {
	project, flowID string
	firedAt         time.Time
	key             string
}

// recorder is a Starter that records firings, answers with err, and, when
// hold is set, blocks each call until hold is closed.
type recorder struct {
	mu    sync.Mutex
	calls []firing
	err   error
	fired chan firing   // optional: each call is sent here too
	hold  chan struct{} // optional
}

func (r *recorder) StartScheduledRun(ctx context.Context, project, flowID string, firedAt time.Time, key string) (automation.Run, error) {
	f := firing{project, flowID, firedAt, key}
	r.mu.Lock()
	r.calls = append(r.calls, f)
	r.mu.Unlock()
	if r.fired != nil {
		r.fired <- f
	}
	if r.hold != nil {
		select {
		case <-r.hold:
		case <-ctx.Done():
			return automation.Run{}, ctx.Err()
		}
	}
	if r.err != nil {
		return automation.Run{}, r.err
	}
	return automation.Run{ID: "run_x", Project: project, FlowID: flowID}, nil
}

func (r *recorder) firings() []firing {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]firing(nil), r.calls...)
}

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time)         { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func at(s string) time.Time              { t, _ := time.Parse(time.RFC3339Nano, s); return t }
func logTo(b *bytes.Buffer) *slog.Logger { return slog.New(slog.NewTextHandler(b, nil)) }

func (s *Scheduler) entryOf(t *testing.T, f automation.Flow) *entry {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[key{f.Project, f.ID}]
	if !ok {
		t.Fatalf("no entry for flow %s", f.ID)
	}
	return e
}

// TestFiring drives an entry as the cron runner does, on an injected clock:
// each firing is named by its due time in the flow's time zone, also when
// the runner wakes late.
func TestFiring(t *testing.T) {
	tests := []struct {
		name, cron, tz string
		registered     string
		wakes          []string // when the runner calls Run
		want           []string // firedAt (= key) of each firing
	}{
		{"every five minutes", "*/5 * * * *", "UTC", "2026-03-02T10:02:11Z",
			[]string{"2026-03-02T10:05:00.003Z", "2026-03-02T10:10:00.001Z"},
			[]string{"2026-03-02T10:05:00Z", "2026-03-02T10:10:00Z"}},
		{"late wake-up takes the latest due time", "*/5 * * * *", "UTC", "2026-03-02T10:02:11Z",
			[]string{"2026-03-02T10:21:30Z"},
			[]string{"2026-03-02T10:20:00Z"}},
		{"time zone in winter and summer", "0 9 * * *", "Europe/Berlin", "2026-03-28T00:00:00Z",
			[]string{"2026-03-28T08:00:00.5Z", "2026-03-29T07:00:00.5Z"},
			[]string{"2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z"}},
		{"descriptor", "@daily", "America/New_York", "2026-01-10T12:00:00Z",
			[]string{"2026-01-11T05:00:01Z"},
			[]string{"2026-01-11T05:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			s := started(rec, slog.New(slog.NewTextHandler(io.Discard, nil)))
			c := &clock{t: at(tt.registered)}
			s.now = c.now
			f := schedtest.ScheduleFlow("prj_1", tt.cron, tt.tz)
			if err := s.SyncSchedule(context.Background(), f); err != nil {
				t.Fatal(err)
			}
			e := s.entryOf(t, f)
			for _, w := range tt.wakes {
				c.set(at(w))
				e.Run()
			}
			got := rec.firings()
			if len(got) != len(tt.want) {
				t.Fatalf("%d firings, want %d: %+v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.project != "prj_1" || g.flowID != f.ID || g.key != w || !g.firedAt.Equal(at(w)) || g.firedAt.Location() != time.UTC {
					t.Errorf("firing %d = %+v, want %s of %s keyed %s (UTC)", i, g, f.ID, w, w)
				}
			}
		})
	}
}

// TestNextInTimeZone checks the runner sees the flow's time zone: the next
// firing of 09:00 Berlin is 08:00 UTC in winter.
func TestNextInTimeZone(t *testing.T) {
	s := started(&recorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f := schedtest.ScheduleFlow("prj_1", "0 9 * * 1-5", "Europe/Berlin")
	if err := s.SyncSchedule(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	got := s.entryOf(t, f).schedule.Next(at("2026-01-09T09:00:00Z")) // a Friday, after 09:00 Berlin
	if want := at("2026-01-12T08:00:00Z"); !got.Equal(want) || got.Location() != time.UTC {
		t.Errorf("Next = %v, want %v (Monday 09:00 Berlin, in UTC)", got, want)
	}
}

// TestFireErrors: a failing start is logged, never fatal; a flow disabled or
// deleted under way is noted, not reported as an error.
func TestFireErrors(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantLevel string
		wantText  string
	}{
		{"store down", errors.New("database is locked"), "level=ERROR", "database is locked"},
		{"disabled meanwhile", automation.Conflict("FLOW_NOT_SCHEDULED", "flow is not an active schedule flow"),
			"level=INFO", "no longer scheduled"},
		{"deleted meanwhile", automation.NotFound("flow", "flw_gone"), "level=INFO", "no longer scheduled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			s := started(&recorder{err: tt.err}, logTo(&logs))
			f := schedtest.ScheduleFlow("prj_1", "* * * * *", "UTC")
			if err := s.SyncSchedule(context.Background(), f); err != nil {
				t.Fatal(err)
			}
			s.fire(s.entryOf(t, f), at("2026-03-02T10:05:00Z"))
			out := logs.String()
			if !strings.Contains(out, tt.wantLevel) || !strings.Contains(out, tt.wantText) || !strings.Contains(out, f.ID) {
				t.Errorf("log = %q, want %s with %q and the flow ID", out, tt.wantLevel, tt.wantText)
			}
			if _, _, ok := s.lookup("prj_1", f.ID); !ok {
				t.Error("a failed firing dropped the schedule")
			}
		})
	}
}

func TestLoad(t *testing.T) {
	s := started(&recorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	good := schedtest.ScheduleFlow("prj_1", "0 6 * * *", "UTC")
	bad := schedtest.ScheduleFlow("prj_1", "0 6 * *", "UTC")
	hook := schedtest.WebhookFlow("prj_1")
	err := s.Load(context.Background(), []automation.Flow{bad, good, hook})
	if err == nil || !strings.Contains(err.Error(), bad.ID) || !errors.Is(err, automation.ErrInvalid) {
		t.Errorf("Load = %v, want an invalid-spec error naming %s", err, bad.ID)
	}
	if c, _, ok := s.lookup("prj_1", good.ID); !ok || c != "0 6 * * *" {
		t.Errorf("good flow after Load: %q %v, want its schedule", c, ok)
	}
	for _, f := range []automation.Flow{bad, hook} {
		if _, _, ok := s.lookup("prj_1", f.ID); ok {
			t.Errorf("flow %s has a schedule after Load", f.ID)
		}
	}
}

// everySecond makes s parse specs with a seconds field, so that a test can
// watch the real cron runner fire within a second.
func everySecond(s *Scheduler) {
	withSeconds := cron.NewParser(cron.Second | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
	s.parse = func(spec, tz string) (cron.Schedule, *time.Location, error) {
		sched, err := withSeconds.Parse(spec)
		return sched, time.UTC, err
	}
}

// startHeld starts a real runner on an every-second schedule whose Starter
// holds each firing until rec.hold is closed, and returns the first firing.
func startHeld(t *testing.T, rec *recorder) (*Scheduler, automation.Flow, firing) {
	t.Helper()
	s := New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	everySecond(s)
	f := schedtest.ScheduleFlow("prj_1", "* * * * * *", "UTC")
	if err := s.SyncSchedule(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	s.Start(rec)
	select {
	case got := <-rec.fired:
		return s, f, got
	case <-time.After(testwait.Hang): // bounds a hang only: a loaded machine fires late
		s.cancel()
		t.Fatalf("no firing within %s of an every-second schedule", testwait.Hang)
		return nil, f, firing{}
	}
}

// TestRealFiring runs the real cron runner: the firing reaches the Starter
// named by a whole second, and Stop waits for a firing under way.
func TestRealFiring(t *testing.T) {
	t.Parallel()
	rec := &recorder{fired: make(chan firing, 10), hold: make(chan struct{})}
	s, f, got := startHeld(t, rec)
	if got.flowID != f.ID || got.firedAt.Nanosecond() != 0 || got.key != got.firedAt.Format(time.RFC3339) {
		t.Errorf("firing = %+v, want flow %s at a whole second, keyed by it", got, f.ID)
	}
	// Loose: the firing is named by a recent second, not another time; a
	// loaded machine receives it late.
	if d := time.Since(got.firedAt); d < 0 || d > time.Minute {
		t.Errorf("firedAt %v is %v from now", got.firedAt, d)
	}

	// The firing is held inside StartScheduledRun: Stop must wait for it.
	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background()) }()
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while a firing was under way", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(rec.hold)
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Stop = %v", err)
		}
	case <-time.After(testwait.Hang):
		t.Fatal("Stop did not return after the firing finished")
	}
	if n := len(rec.firings()); n != 1 {
		t.Errorf("%d firings, want 1 (each firing once, none after Stop)", n)
	}
}

// TestStopGivesUp: Stop returns when its context ends and cancels the
// firing under way, whose error is logged.
func TestStopGivesUp(t *testing.T) {
	t.Parallel()
	rec := &recorder{fired: make(chan firing, 10), hold: make(chan struct{})}
	defer close(rec.hold)
	s, _, _ := startHeld(t, rec)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Stop = %v, want the deadline", err)
	}
	// The cancelled firing returns at once; the runner's wait ends.
	if err := s.Stop(context.Background()); err != nil {
		t.Errorf("second Stop = %v", err)
	}
}

// started is a Scheduler whose firings start runs through st, for tests
// that fire entries by hand (fire) without starting the cron runner.
func started(st Starter, log *slog.Logger) *Scheduler {
	s := New(log)
	s.start = st
	return s
}
