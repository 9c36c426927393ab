// Package ebscheduler is the AWS automation.Scheduler: one EventBridge
// Scheduler schedule per ACTIVE SCHEDULE or POLL flow, whose target is the
// run queue (SQS); a POLL flow's sends a "poll" message every interval. Each firing sends a "schedule" automation.QueueMessage naming the
// project and flow, with the firing's execution ID and scheduled time filled
// in by EventBridge Scheduler; the runner starts the run from it
// (Service.HandleMessage), and the execution ID deduplicates redeliveries.
package ebscheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"flowservice/pkg/automation"
)

// Context attributes EventBridge Scheduler replaces in a target's Input
// when it invokes the target.
const (
	ExecutionIDAttribute   = "<aws.scheduler.execution-id>"
	ScheduledTimeAttribute = "<aws.scheduler.scheduled-time>" // e.g. 2022-03-22T18:59:43Z
)

// Client is the part of the EventBridge Scheduler API the adapter uses;
// *scheduler.Client implements it.
type Client interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
	GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error)
}

var _ Client = (*scheduler.Client)(nil)

// Config says where schedules live and what they send to.
type Config struct {
	// Group is the schedule group (it must exist); "" is "default".
	Group string
	// Prefix starts every schedule name, "<Prefix>-<flowID>", so that one
	// group can hold several deployments; "" is "flow". At most 33
	// characters: names are limited to 64.
	Prefix string
	// QueueARN is the run queue, the schedules' target.
	QueueARN string
	// RoleARN is the role EventBridge Scheduler assumes to send to the
	// queue (sqs:SendMessage on QueueARN).
	RoleARN string
	// DeadLetterARN, if set, is an SQS queue for firings EventBridge
	// Scheduler could not deliver after its retries.
	DeadLetterARN string
}

// Scheduler keeps EventBridge Scheduler schedules in step with flows.
type Scheduler struct {
	api Client
	cfg Config
}

var _ automation.Scheduler = (*Scheduler)(nil)

// maxName is EventBridge Scheduler's limit on schedule names; flow IDs are
// 30 characters (flw_ and 26), which leaves 33 for the prefix and its dash.
const maxName = 64

var namePrefix = regexp.MustCompile(`^[0-9a-zA-Z_.-]+$`)

// New returns a Scheduler using api with cfg.
func New(api Client, cfg Config) (*Scheduler, error) {
	if cfg.Group == "" {
		cfg.Group = "default"
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "flow"
	}
	switch {
	case api == nil:
		return nil, errors.New("ebscheduler: no client")
	case cfg.QueueARN == "" || cfg.RoleARN == "":
		return nil, errors.New("ebscheduler: the queue ARN and the role ARN are required")
	case !namePrefix.MatchString(cfg.Prefix) || len(cfg.Prefix)+1+len(automation.NewID(automation.PrefixFlow)) > maxName:
		return nil, fmt.Errorf("ebscheduler: schedule name prefix %q: want at most 33 characters of 0-9 a-z A-Z - _ and dots", cfg.Prefix)
	}
	return &Scheduler{api: api, cfg: cfg}, nil
}

// Name is the schedule name of a flow.
func (s *Scheduler) Name(flowID string) string { return s.cfg.Prefix + "-" + flowID }

// Group is the schedule group the Scheduler keeps its schedules in.
func (s *Scheduler) Group() string { return s.cfg.Group }

// SyncSchedule makes f's schedule exist while f is an ACTIVE SCHEDULE flow
// and not otherwise: it creates the schedule, or updates it when it exists.
// A spec EventBridge cannot express is an automation.ErrInvalid error.
func (s *Scheduler) SyncSchedule(ctx context.Context, f automation.Flow) error {
	var expr, tz, input string
	var err error
	switch {
	case f.Status != automation.FlowActive:
		return s.RemoveSchedule(ctx, f.Project, f.ID)
	case f.Trigger.Type == automation.TriggerSchedule && f.Trigger.Schedule != nil:
		if expr, err = Expression(f.Trigger.Schedule.Cron); err == nil {
			input, err = Input(f.Project, f.ID)
		}
		tz = f.Trigger.Schedule.Timezone
		if tz == "" {
			tz = "UTC" // the validator's default
		}
	case f.Trigger.Type == automation.TriggerPoll && f.Trigger.Poll != nil:
		if expr, err = PollRate(f.Trigger.Poll); err == nil {
			input, err = PollInput(f.Project, f.ID)
		}
		tz = "UTC"
	default:
		return s.RemoveSchedule(ctx, f.Project, f.ID)
	}
	if err != nil {
		return fmt.Errorf("ebscheduler: schedule flow %s: %w", f.ID, err)
	}
	target := &types.Target{
		Arn: aws.String(s.cfg.QueueARN), RoleArn: aws.String(s.cfg.RoleARN), Input: aws.String(input),
	}
	if s.cfg.DeadLetterARN != "" {
		target.DeadLetterConfig = &types.DeadLetterConfig{Arn: aws.String(s.cfg.DeadLetterARN)}
	}
	name, desc := s.Name(f.ID), fmt.Sprintf("flow %s of project %s", f.ID, f.Project)
	window := &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff}

	// Create, or update what exists. Another writer may delete or create the
	// schedule between the two calls (a concurrent disable or enable), so go
	// round again, a few times at most: the last writer wins, as with the
	// flow itself.
	for range 3 {
		_, err = s.api.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
			Name: aws.String(name), GroupName: aws.String(s.cfg.Group), Description: aws.String(desc),
			ScheduleExpression: aws.String(expr), ScheduleExpressionTimezone: aws.String(tz),
			FlexibleTimeWindow: window, Target: target, State: types.ScheduleStateEnabled,
		})
		var conflict *types.ConflictException
		if !errors.As(err, &conflict) {
			break
		}
		_, err = s.api.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
			Name: aws.String(name), GroupName: aws.String(s.cfg.Group), Description: aws.String(desc),
			ScheduleExpression: aws.String(expr), ScheduleExpressionTimezone: aws.String(tz),
			FlexibleTimeWindow: window, Target: target, State: types.ScheduleStateEnabled,
		})
		var missing *types.ResourceNotFoundException
		if !errors.As(err, &missing) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("ebscheduler: put schedule %s: %w", name, err)
	}
	return nil
}

// RemoveSchedule deletes a flow's schedule; a missing one is not an error.
// Schedule names come from the flow ID alone, which is unique across
// projects; the Service checks the flow belongs to project before calling.
func (s *Scheduler) RemoveSchedule(ctx context.Context, project, flowID string) error {
	name := s.Name(flowID)
	_, err := s.api.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{
		Name: aws.String(name), GroupName: aws.String(s.cfg.Group),
	})
	var missing *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		return fmt.Errorf("ebscheduler: delete schedule %s: %w", name, err)
	}
	return nil
}

// PollRate is the rate expression of a POLL flow's schedule. EventBridge
// Scheduler's rates are whole minutes: an interval under a minute fires
// every minute, and the runner queues the polls due within it
// (automation.PollDelayer); one over a minute must be whole minutes, any
// other is an automation.ErrInvalid error.
func PollRate(p *automation.Poll) (string, error) {
	d, err := p.Interval()
	if err != nil {
		return "", automation.Invalid("trigger.poll.%v", err)
	}
	if err := checkRate(d); err != nil {
		return "", err
	}
	if n := int(d / time.Minute); n > 1 {
		return fmt.Sprintf("rate(%d minutes)", n), nil
	}
	return "rate(1 minute)", nil
}

func checkRate(d time.Duration) error {
	if d > time.Minute && d%time.Minute != 0 {
		return automation.Invalid("trigger.poll.every %q: on AWS polls of a minute or more are scheduled by EventBridge Scheduler, in whole minutes: use such as \"2m\", or under a minute", d)
	}
	return nil
}

// PollInput is the target input of a POLL flow's schedule: a "poll"
// automation.QueueMessage.
func PollInput(project, flowID string) (string, error) {
	b, err := json.Marshal(automation.QueueMessage{Kind: automation.MessagePoll, Project: project, FlowID: flowID})
	if err != nil {
		return "", fmt.Errorf("encode poll message: %w", err)
	}
	return string(b), nil
}

// Input is the target input of a flow's schedule: a "schedule"
// automation.QueueMessage whose executionId and scheduledTime are context
// attributes. They sit inside JSON strings, so the substituted values are
// JSON strings too, and the template itself is valid JSON.
func Input(project, flowID string) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	// The default escapes < and > as \u003c and \u003e, and EventBridge
	// Scheduler would no longer see the attributes.
	enc.SetEscapeHTML(false)
	err := enc.Encode(automation.QueueMessage{
		Kind: automation.MessageSchedule, Project: project, FlowID: flowID,
		ExecutionID: ExecutionIDAttribute, ScheduledTime: ScheduledTimeAttribute,
	})
	if err != nil {
		return "", fmt.Errorf("encode schedule message: %w", err)
	}
	return string(bytes.TrimSpace(b.Bytes())), nil
}
