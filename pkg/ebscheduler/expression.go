package ebscheduler

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"flowservice/pkg/automation"
)

// specParser reads specs as cronspec.Parse does (five fields or the fixed
// descriptors), so a spec means here what it means to flowd's cron.
var specParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// starBit is robfig's mark of a field written with * or ?: it makes the two
// day fields AND instead of OR.
const starBit = 1 << 63

var dayNames = [...]string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}

// Expression converts a five-field cron spec or descriptor (@hourly, @daily,
// @weekly, @monthly, @yearly) into EventBridge Scheduler's
// cron(minutes hours day-of-month month day-of-week year) with the same
// firing times. EventBridge needs ? in one of the day fields, so a spec that
// restricts both (standard cron then runs on either) cannot be expressed and
// is an automation.ErrInvalid error, as are specs cronspec.Parse refuses.
// Call it when validating definitions for the AWS backend, so such a flow is
// a 400 at create time rather than a failure at enable.
func Expression(spec string) (string, error) {
	s := strings.TrimSpace(spec)
	if strings.HasPrefix(s, "@every") || strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return "", automation.Invalid("cron %q: use five fields or one of @yearly, @monthly, @weekly, @daily, @hourly", spec)
	}
	parsed, err := specParser.Parse(s)
	if err != nil {
		return "", automation.Invalid("cron %q: %v", spec, err)
	}
	ss, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return "", automation.Invalid("cron %q: not a calendar schedule", spec)
	}

	// Fields written with * or ? carry robfig's star bit: then the day
	// fields AND (the starred one, if it is every day, drops out); with
	// neither starred they OR. EventBridge has only the AND-with-? form.
	domAll, dowAll := full(ss.Dom, 1, 31), full(ss.Dow, 0, 6)
	var dom, dow string
	switch {
	case ss.Dom&starBit == 0 && ss.Dow&starBit == 0 && (domAll || dowAll):
		dom, dow = "*", "?" // either day: one of them is every day
	case (ss.Dom&starBit != 0 || ss.Dow&starBit != 0) && dowAll:
		dom, dow = field(ss.Dom, 1, 31, nil), "?"
	case (ss.Dom&starBit != 0 || ss.Dow&starBit != 0) && domAll:
		dom, dow = "?", field(ss.Dow, 0, 6, dayNames[:])
	default:
		return "", automation.Invalid("cron %q restricts both the day of the month and the day of the week: "+
			"EventBridge Scheduler cannot combine them; use * for one of the two", spec)
	}
	return fmt.Sprintf("cron(%s %s %s %s %s *)",
		field(ss.Minute, 0, 59, nil), field(ss.Hour, 0, 23, nil), dom,
		field(ss.Month, 1, 12, nil), dow), nil
}

// full reports whether the set b holds every value from lo to hi.
func full(b uint64, lo, hi uint) bool {
	for v := lo; v <= hi; v++ {
		if b&(1<<v) == 0 {
			return false
		}
	}
	return true
}

// field writes the set b of values in lo..hi in EventBridge's syntax: * for
// all, start/step for a progression that runs to the end (*/5 is 0/5), and
// otherwise a list of values and ranges. names, if set, replaces numbers
// (day-of-week names mean the same in both numberings).
func field(b uint64, lo, hi uint, names []string) string {
	if full(b, lo, hi) {
		return "*"
	}
	var vals []uint
	for v := lo; v <= hi; v++ {
		if b&(1<<v) != 0 {
			vals = append(vals, v)
		}
	}
	name := func(v uint) string {
		if names != nil {
			return names[v-lo]
		}
		return strconv.Itoa(int(v))
	}
	if names == nil && len(vals) >= 3 {
		step := vals[1] - vals[0]
		progression := step > 1 && vals[len(vals)-1]+step > hi
		for i := 2; progression && i < len(vals); i++ {
			progression = vals[i]-vals[i-1] == step
		}
		if progression {
			return name(vals[0]) + "/" + strconv.Itoa(int(step))
		}
	}
	var parts []string
	for i := 0; i < len(vals); {
		j := i
		for j+1 < len(vals) && vals[j+1] == vals[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, name(vals[i]))
		case j == i+1:
			parts = append(parts, name(vals[i]), name(vals[j]))
		default:
			parts = append(parts, name(vals[i])+"-"+name(vals[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// Checker is an automation.Checker for the AWS backend: its Cron also
// refuses specs EventBridge Scheduler cannot express, so that such a flow is
// a 400 at create and update time (definitions are checked when saved), not a
// failure when it is enabled. Wire it as Checker{engine.Checker{}}.
type Checker struct{ automation.Checker }

// PollEvery refuses a POLL interval EventBridge Scheduler cannot keep
// (automation.PollChecker).
func (c Checker) PollEvery(d time.Duration) error { return checkRate(d) }

// Cron checks spec with the wrapped Checker, then converts it.
func (c Checker) Cron(spec, timezone string) error {
	if err := c.Checker.Cron(spec, timezone); err != nil {
		return err
	}
	_, err := Expression(spec)
	return err
}
