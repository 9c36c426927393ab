// Package cronspec reads the schedules of SCHEDULE triggers: five cron
// fields or a fixed descriptor, in an IANA time zone. It is its own package
// so that flowd's scheduler parses as validation does without importing
// the engine.
package cronspec

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"flowservice/pkg/automation"
)

// cronParser takes the five standard fields and the fixed descriptors.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

const cronHelp = "use five fields (minute hour day-of-month month day-of-week, for example \"*/5 * * * *\") " +
	"or one of @yearly, @monthly, @weekly, @daily, @hourly"

// Parse parses a five-field spec or a fixed descriptor in an IANA time
// zone ("" is UTC), returning the schedule and its location. Validation
// (the engine's Checker) and the schedulers parse with it, so that what
// validates is what runs. Refusals are automation.ErrInvalid errors.
func Parse(spec, timezone string) (cron.Schedule, *time.Location, error) {
	loc := time.UTC
	if timezone != "" {
		l, err := time.LoadLocation(timezone)
		// "Local" depends on the host, so it means different things on flowd
		// and on Lambda: only IANA names are allowed.
		if err != nil || timezone == "Local" {
			return nil, nil, automation.Invalid("timezone %q is not an IANA time zone name such as \"UTC\" or \"Europe/Paris\"", timezone)
		}
		loc = l
	}
	s := strings.TrimSpace(spec)
	switch {
	case s == "":
		return nil, nil, automation.Invalid("cron is required: %s", cronHelp)
	case strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ="):
		return nil, nil, automation.Invalid("cron %q: set the time zone in the timezone field, not in the spec", spec)
	case strings.HasPrefix(s, "@every"):
		// EventBridge Scheduler has no equivalent; the fixed forms map to cron.
		return nil, nil, automation.Invalid("cron %q: @every is not supported: %s", spec, cronHelp)
	}
	sched, err := cronParser.Parse(s)
	if err != nil {
		return nil, nil, automation.Invalid("cron %q: %v: %s", spec, err, cronHelp)
	}
	return sched, loc, nil
}
