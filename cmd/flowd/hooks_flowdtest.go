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
func testHooks(s *cronscheduler.Scheduler) {
	d, err := time.ParseDuration(os.Getenv("FLOWD_TEST_TICK"))
	if err != nil || d <= 0 {
		return
	}
	s.UseParser(func(string, string) (cron.Schedule, *time.Location, error) {
		return aligned(d), time.UTC, nil
	})
}

type aligned time.Duration

func (a aligned) Next(t time.Time) time.Time {
	return t.Truncate(time.Duration(a)).Add(time.Duration(a))
}
