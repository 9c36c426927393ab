package ebscheduler

import (
	"errors"
	"strings"
	"testing"

	"flowservice/pkg/automation"
	"flowservice/pkg/engine"
)

func TestExpression(t *testing.T) {
	tests := []struct{ spec, want string }{
		{"* * * * *", "cron(* * * * ? *)"},
		{"*/5 * * * *", "cron(0/5 * * * ? *)"},
		{"5/15 * * * *", "cron(5/15 * * * ? *)"},
		{"0 */2 * * *", "cron(0 0/2 * * ? *)"},
		{"0,30 9-17 * * *", "cron(0,30 9-17 * * ? *)"},
		{"0-30/10 * * * *", "cron(0,10,20,30 * * * ? *)"},
		{"1,2,3,7 * * * *", "cron(1-3,7 * * * ? *)"},
		{"8,9 * * * *", "cron(8,9 * * * ? *)"},
		{"50-59 * * * *", "cron(50-59 * * * ? *)"},
		// Day of the month only: day-of-week becomes ?.
		{"0 0 1 * *", "cron(0 0 1 * ? *)"},
		{"0 0 */2 * *", "cron(0 0 1/2 * ? *)"},
		{"0 0 1,15 1-6 *", "cron(0 0 1,15 1-6 ? *)"},
		{"0 0 1 jan,jul *", "cron(0 0 1 1,7 ? *)"},
		{"0 0 1 */3 *", "cron(0 0 1 1/3 ? *)"},
		// Day of the week only: day-of-month becomes ?, days become names
		// (standard 0 = Sunday; EventBridge numbers Sunday 1).
		{"30 9 * * 1-5", "cron(30 9 ? * MON-FRI *)"},
		{"0 18 * * 0", "cron(0 18 ? * SUN *)"},
		{"0 18 * * 6,0", "cron(0 18 ? * SUN,SAT *)"},
		{"0 18 * * 5,6,0", "cron(0 18 ? * SUN,FRI,SAT *)"},
		{"0 18 * * 4-6,0", "cron(0 18 ? * SUN,THU-SAT *)"},
		{"0 8 * * mon,wed-fri", "cron(0 8 ? * MON,WED-FRI *)"},
		{"0 8 * * */2", "cron(0 8 ? * SUN,TUE,THU,SAT *)"},
		{"0 8 ? * 1", "cron(0 8 ? * MON *)"},
		{"0 8 1 * ?", "cron(0 8 1 * ? *)"},
		// Both restricted, but one of them is every day: either day is any day.
		{"0 8 1-31 * 1", "cron(0 8 * * ? *)"},
		{"0 8 1 * 0-6", "cron(0 8 * * ? *)"},
		// Descriptors.
		{"@hourly", "cron(0 * * * ? *)"},
		{"@daily", "cron(0 0 * * ? *)"},
		{"@midnight", "cron(0 0 * * ? *)"},
		{"@weekly", "cron(0 0 ? * SUN *)"},
		{"@monthly", "cron(0 0 1 * ? *)"},
		{"@yearly", "cron(0 0 1 1 ? *)"},
		{"@annually", "cron(0 0 1 1 ? *)"},
		{"  0 12 * * *  ", "cron(0 12 * * ? *)"},
	}
	for _, tt := range tests {
		got, err := Expression(tt.spec)
		if err != nil || got != tt.want {
			t.Errorf("Expression(%q) = %q, %v; want %q", tt.spec, got, err, tt.want)
		}
	}
}

func TestExpressionRefused(t *testing.T) {
	tests := []struct{ spec, wantInMessage string }{
		// Standard cron runs on the 1st and on Mondays; EventBridge cannot.
		{"0 0 1 * 1", "both the day of the month and the day of the week"},
		{"0 0 1,15 * mon-fri", "both"},
		// robfig ANDs a stepped * with the other day field: not expressible either.
		{"0 0 */2 * 1", "both"},
		{"0 0 * * 7", "above maximum"},
		{"60 * * * *", "above maximum"},
		{"* * * *", "expected exactly 5 fields"},
		{"0 0 * * * *", "expected exactly 5 fields"},
		{"@every 5m", "five fields"},
		{"CRON_TZ=UTC 0 0 * * *", "five fields"},
		{"@fortnightly", "unrecognized descriptor"},
		{"", "empty spec"},
	}
	for _, tt := range tests {
		got, err := Expression(tt.spec)
		if err == nil {
			t.Errorf("Expression(%q) = %q, want an error", tt.spec, got)
			continue
		}
		var e *automation.Error
		if !errors.Is(err, automation.ErrInvalid) || !errors.As(err, &e) || !strings.Contains(e.Message, tt.wantInMessage) {
			t.Errorf("Expression(%q) error = %v, want an invalid error saying %q", tt.spec, err, tt.wantInMessage)
		}
	}
}

func TestChecker(t *testing.T) {
	c := Checker{engine.Checker{}}
	var _ automation.Checker = c
	tests := []struct {
		spec, tz, wantErr string
	}{
		{"*/5 * * * *", "Europe/Berlin", ""},
		{"@weekly", "", ""},
		{"0 0 1 * 1", "UTC", "both the day of the month and the day of the week"},
		{"0 0 * * *", "Mars/Olympus", "IANA"},
		{"0 0 * *", "UTC", "five fields"},
	}
	for _, tt := range tests {
		err := c.Cron(tt.spec, tt.tz)
		if tt.wantErr == "" {
			if err != nil {
				t.Errorf("Cron(%q, %q) = %v", tt.spec, tt.tz, err)
			}
			continue
		}
		if !errors.Is(err, automation.ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Cron(%q, %q) = %v, want an invalid error saying %q", tt.spec, tt.tz, err, tt.wantErr)
		}
	}
	// Expressions and templates are the wrapped Checker's.
	if err := c.Expression("trigger.body.x =="); !errors.Is(err, automation.ErrInvalid) {
		t.Errorf("Expression = %v, want invalid", err)
	}
}
