//go:build flowdtest

package main

import (
	"os"
	"time"

	"github.com/robfig/cron/v3"

	"flowservice/pkg/cronscheduler"
)

// testHooks, in the flowd the whole-process tests build (the flowdtest
// tag; never a release), reads FLOWD_TEST_TICK: every SCHEDULE flow fires
// at each multiple of that duration instead of its cron, so that a test
// sees several ticks in seconds. The ticks are aligned on the clock, as
// cron's are, so every node computes the same firing times.
//
// FLOWD_TEST_POLL_TICK does the same for POLL flows, whose `every` is at
// least 10 s: they poll at each multiple of it, aligned alike on every node,
// so that a tick polled by two nodes would be seen.
func testHooks(s *cronscheduler.Scheduler) {
	if d, err := time.ParseDuration(os.Getenv("FLOWD_TEST_TICK")); err == nil && d > 0 {
		s.UseParser(func(string, string) (cron.Schedule, *time.Location, error) {
			return aligned(d), time.UTC, nil
		})
	}
	if d, err := time.ParseDuration(os.Getenv("FLOWD_TEST_POLL_TICK")); err == nil && d > 0 {
		s.UsePollSchedule(func(time.Duration) cron.Schedule { return aligned(d) })
	}
}

type aligned time.Duration

func (a aligned) Next(t time.Time) time.Time {
	return t.Truncate(time.Duration(a)).Add(time.Duration(a))
}
