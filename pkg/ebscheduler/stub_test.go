package ebscheduler

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"flowservice/pkg/automation"
	"flowservice/pkg/automation/schedtest"
)

// stub answers each call with the next error queued for its operation (nil
// when none is left) and records the calls, to test error mapping.
type stub struct {
	errs    map[string][]error
	calls   []string
	creates []*scheduler.CreateScheduleInput
	updates []*scheduler.UpdateScheduleInput
}

func (s *stub) next(op string) error {
	s.calls = append(s.calls, op)
	q := s.errs[op]
	if len(q) == 0 {
		return nil
	}
	s.errs[op] = q[1:]
	return q[0]
}

func (s *stub) CreateSchedule(_ context.Context, in *scheduler.CreateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	s.creates = append(s.creates, in)
	return &scheduler.CreateScheduleOutput{}, s.next("create")
}

func (s *stub) UpdateSchedule(_ context.Context, in *scheduler.UpdateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error) {
	s.updates = append(s.updates, in)
	return &scheduler.UpdateScheduleOutput{}, s.next("update")
}

func (s *stub) DeleteSchedule(context.Context, *scheduler.DeleteScheduleInput, ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error) {
	return &scheduler.DeleteScheduleOutput{}, s.next("delete")
}

func (s *stub) GetSchedule(context.Context, *scheduler.GetScheduleInput, ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error) {
	return &scheduler.GetScheduleOutput{}, s.next("get")
}

var (
	conflict = &types.ConflictException{Message: aws.String("schedule exists")}
	notFound = &types.ResourceNotFoundException{Message: aws.String("no such schedule")}
	throttle = &types.ThrottlingException{Message: aws.String("slow down")}
	invalid  = &types.ValidationException{Message: aws.String("bad expression")}
)

func testConfig() Config {
	return Config{Group: "flows", Prefix: "test", QueueARN: "arn:aws:sqs:us-east-1:123456789012:runs",
		RoleARN: "arn:aws:iam::123456789012:role/scheduler"}
}

func TestErrorMapping(t *testing.T) {
	active := schedtest.ScheduleFlow("prj_1", "0 9 * * 1-5", "Europe/Berlin")
	inactive := active
	inactive.Status = automation.FlowInactive
	bothDays := schedtest.ScheduleFlow("prj_1", "0 9 1 * 1", "UTC")

	tests := []struct {
		name      string
		flow      automation.Flow
		remove    bool // RemoveSchedule instead of SyncSchedule
		errs      map[string][]error
		wantCalls string
		wantErr   error // nil, or what the error wraps
	}{
		{"new schedule", active, false, nil, "create", nil},
		{"existing schedule is updated", active, false,
			map[string][]error{"create": {conflict}}, "create update", nil},
		{"deleted between create and update", active, false,
			map[string][]error{"create": {conflict}, "update": {notFound}}, "create update create", nil},
		{"gives up after three rounds", active, false,
			map[string][]error{"create": {conflict, conflict, conflict}, "update": {notFound, notFound, notFound}},
			"create update create update create update", notFound},
		{"create fails", active, false, map[string][]error{"create": {throttle}}, "create", throttle},
		{"update fails", active, false, map[string][]error{"create": {conflict}, "update": {invalid}}, "create update", invalid},
		{"spec EventBridge cannot express", bothDays, false, nil, "", automation.ErrInvalid},
		{"inactive flow deletes", inactive, false, nil, "delete", nil},
		{"inactive flow without schedule", inactive, false, map[string][]error{"delete": {notFound}}, "delete", nil},
		{"delete fails", inactive, false, map[string][]error{"delete": {throttle}}, "delete", throttle},
		{"remove", active, true, nil, "delete", nil},
		{"remove missing", active, true, map[string][]error{"delete": {notFound}}, "delete", nil},
		{"remove fails", active, true, map[string][]error{"delete": {throttle}}, "delete", throttle},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &stub{errs: tt.errs}
			if api.errs == nil {
				api.errs = map[string][]error{}
			}
			s, err := New(api, testConfig())
			if err != nil {
				t.Fatal(err)
			}
			if tt.remove {
				err = s.RemoveSchedule(context.Background(), tt.flow.Project, tt.flow.ID)
			} else {
				err = s.SyncSchedule(context.Background(), tt.flow)
			}
			if got := strings.Join(api.calls, " "); got != tt.wantCalls {
				t.Errorf("calls = %q, want %q", got, tt.wantCalls)
			}
			switch {
			case tt.wantErr == nil && err != nil:
				t.Errorf("err = %v, want nil", err)
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("err = %v, want one wrapping %v", err, tt.wantErr)
			case err != nil && !strings.HasPrefix(err.Error(), "ebscheduler: ") || err != nil && !strings.Contains(err.Error(), tt.flow.ID):
				t.Errorf("err = %q, want it to say ebscheduler and name the flow", err)
			}
		})
	}
}

// TestRequest checks what a schedule is made of, for create and update
// alike.
func TestRequest(t *testing.T) {
	api := &stub{errs: map[string][]error{"create": {conflict}}}
	cfg := testConfig()
	cfg.DeadLetterARN = "arn:aws:sqs:us-east-1:123456789012:runs-dlq"
	s, err := New(api, cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := schedtest.ScheduleFlow("prj_1", "*/15 8-18 * * 1-5", "")
	if err := s.SyncSchedule(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	if len(api.creates) != 1 || len(api.updates) != 1 {
		t.Fatalf("%d creates, %d updates, want 1 each", len(api.creates), len(api.updates))
	}
	c, u := api.creates[0], api.updates[0]
	for _, r := range []struct {
		what                  string
		name, group, expr, tz *string
		window                *types.FlexibleTimeWindow
		target                *types.Target
		state                 types.ScheduleState
	}{
		{"create", c.Name, c.GroupName, c.ScheduleExpression, c.ScheduleExpressionTimezone, c.FlexibleTimeWindow, c.Target, c.State},
		{"update", u.Name, u.GroupName, u.ScheduleExpression, u.ScheduleExpressionTimezone, u.FlexibleTimeWindow, u.Target, u.State},
	} {
		if got, want := aws.ToString(r.name), "test-"+f.ID; got != want || len(got) > 64 {
			t.Errorf("%s: name = %q, want %q", r.what, got, want)
		}
		if aws.ToString(r.group) != "flows" {
			t.Errorf("%s: group = %q, want flows", r.what, aws.ToString(r.group))
		}
		if got, want := aws.ToString(r.expr), "cron(0/15 8-18 ? * MON-FRI *)"; got != want {
			t.Errorf("%s: expression = %q, want %q", r.what, got, want)
		}
		if aws.ToString(r.tz) != "UTC" {
			t.Errorf("%s: time zone = %q, want UTC for a flow without one", r.what, aws.ToString(r.tz))
		}
		if r.window == nil || r.window.Mode != types.FlexibleTimeWindowModeOff {
			t.Errorf("%s: flexible time window = %+v, want OFF", r.what, r.window)
		}
		if r.state != types.ScheduleStateEnabled {
			t.Errorf("%s: state = %q, want ENABLED", r.what, r.state)
		}
		tg := r.target
		if tg == nil || aws.ToString(tg.Arn) != cfg.QueueARN || aws.ToString(tg.RoleArn) != cfg.RoleARN ||
			tg.DeadLetterConfig == nil || aws.ToString(tg.DeadLetterConfig.Arn) != cfg.DeadLetterARN {
			t.Fatalf("%s: target = %+v, want the queue, the role and the dead-letter queue", r.what, tg)
		}
		checkInput(t, r.what, aws.ToString(tg.Input), "prj_1", f.ID)
	}
}

func TestNew(t *testing.T) {
	ok := testConfig()
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string
	}{
		{"valid", func(*Config) {}, ""},
		{"defaults", func(c *Config) { c.Group, c.Prefix = "", "" }, ""},
		{"no queue", func(c *Config) { c.QueueARN = "" }, "queue ARN"},
		{"no role", func(c *Config) { c.RoleARN = "" }, "role ARN"},
		{"longest prefix", func(c *Config) { c.Prefix = strings.Repeat("p", 33) }, ""},
		{"prefix too long", func(c *Config) { c.Prefix = strings.Repeat("p", 34) }, "at most 33"},
		{"bad character", func(c *Config) { c.Prefix = "flows/prod" }, "at most 33"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.change(&cfg)
			s, err := New(&stub{}, cfg)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("New = %v", err)
				}
				if n := s.Name(automation.NewID(automation.PrefixFlow)); len(n) > 64 {
					t.Errorf("name %q is longer than 64", n)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("New = %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
	s, _ := New(&stub{}, Config{QueueARN: "q", RoleARN: "r"})
	if s.Group() != "default" || s.Name("flw_x") != "flow-flw_x" {
		t.Errorf("defaults: group %q, name %q", s.Group(), s.Name("flw_x"))
	}
}
