package ebscheduler

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"flowservice/pkg/automation/schedtest"
	"flowservice/pkg/awstest"
)

func TestMain(m *testing.M) { os.Exit(awstest.Main(m)) }

// openMoto returns a Scheduler on moto_server in a schedule group of its
// own, and its client to look with. moto never fires schedules:
// these tests see what was stored, and checkInput what a firing would send.
func openMoto(t *testing.T) (*Scheduler, *scheduler.Client) {
	t.Helper()
	client := scheduler.NewFromConfig(awstest.Start(t))
	group := awstest.UniqueName(t, "flows")
	ctx := context.Background()
	if _, err := client.CreateScheduleGroup(ctx, &scheduler.CreateScheduleGroupInput{Name: aws.String(group)}); err != nil {
		t.Fatalf("create schedule group: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteScheduleGroup(context.Background(), &scheduler.DeleteScheduleGroupInput{Name: aws.String(group)})
	})
	s, err := New(client, Config{Group: group, Prefix: "flowservice",
		QueueARN: "arn:aws:sqs:us-east-1:123456789012:runs", RoleARN: "arn:aws:iam::123456789012:role/scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	return s, client
}

// getSchedule returns the stored schedule of a flow, or nil if there is none.
func getSchedule(ctx context.Context, s *Scheduler, client *scheduler.Client, flowID string) (*scheduler.GetScheduleOutput, error) {
	out, err := client.GetSchedule(ctx, &scheduler.GetScheduleInput{
		Name: aws.String(s.Name(flowID)), GroupName: aws.String(s.Group())})
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return nil, nil
	}
	return out, err
}

func TestContractOnMoto(t *testing.T) {
	schedtest.Run(t, func(t *testing.T) schedtest.Env {
		s, client := openMoto(t)
		return schedtest.Env{
			Scheduler:  s,
			Expression: Expression,
			Lookup: func(ctx context.Context, project, flowID string) (string, string, bool, error) {
				out, err := getSchedule(ctx, s, client, flowID)
				if out == nil || err != nil {
					return "", "", false, err
				}
				return aws.ToString(out.ScheduleExpression), aws.ToString(out.ScheduleExpressionTimezone), true, nil
			},
		}
	})
}

// TestStoredScheduleOnMoto checks the whole stored schedule: its target is
// the queue with the role, window OFF, and the input a valid "schedule"
// message template, after create and after update.
func TestStoredScheduleOnMoto(t *testing.T) {
	ctx := context.Background()
	s, client := openMoto(t)
	f := schedtest.ScheduleFlow("prj_moto", "0 9 * * 1-5", "Europe/Berlin")
	for _, step := range []struct{ what, cron, wantExpr string }{
		{"created", "0 9 * * 1-5", "cron(0 9 ? * MON-FRI *)"},
		{"updated", "@monthly", "cron(0 0 1 * ? *)"},
	} {
		f.Trigger.Schedule.Cron = step.cron
		if err := s.SyncSchedule(ctx, f); err != nil {
			t.Fatalf("%s: SyncSchedule: %v", step.what, err)
		}
		out, err := getSchedule(ctx, s, client, f.ID)
		if err != nil || out == nil {
			t.Fatalf("%s: GetSchedule = %v, %v", step.what, out, err)
		}
		if got := aws.ToString(out.ScheduleExpression); got != step.wantExpr {
			t.Errorf("%s: expression = %q, want %q", step.what, got, step.wantExpr)
		}
		if got := aws.ToString(out.ScheduleExpressionTimezone); got != "Europe/Berlin" {
			t.Errorf("%s: time zone = %q", step.what, got)
		}
		if aws.ToString(out.GroupName) != s.Group() || aws.ToString(out.Name) != "flowservice-"+f.ID {
			t.Errorf("%s: schedule %s in group %s", step.what, aws.ToString(out.Name), aws.ToString(out.GroupName))
		}
		if out.FlexibleTimeWindow == nil || out.FlexibleTimeWindow.Mode != types.FlexibleTimeWindowModeOff {
			t.Errorf("%s: flexible time window = %+v, want OFF", step.what, out.FlexibleTimeWindow)
		}
		if out.State != types.ScheduleStateEnabled {
			t.Errorf("%s: state = %q", step.what, out.State)
		}
		tg := out.Target
		if tg == nil || aws.ToString(tg.Arn) != "arn:aws:sqs:us-east-1:123456789012:runs" ||
			aws.ToString(tg.RoleArn) != "arn:aws:iam::123456789012:role/scheduler" {
			t.Fatalf("%s: target = %+v, want the run queue with the role", step.what, tg)
		}
		checkInput(t, step.what, aws.ToString(tg.Input), "prj_moto", f.ID)
	}
}
