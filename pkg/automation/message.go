package automation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Message kinds on a run queue (SQS).
const (
	MessageRun      = "run"      // execute the queued run RunID
	MessageSchedule = "schedule" // a schedule fired: start a run of FlowID
	MessagePoll     = "poll"     // a POLL flow's schedule fired: poll FlowID
)

// QueueMessage is the body of a run queue message. Queue adapters write
// "run" messages; schedulers (EventBridge Scheduler) write "schedule" ones
// through an input template; the runner reads both.
type QueueMessage struct {
	Kind    string `json:"kind"`
	Project string `json:"project"`
	RunID   string `json:"runId,omitempty"`
	FlowID  string `json:"flowId,omitempty"`
	// ExecutionID names one firing of a schedule; ScheduledTime is when it
	// was due (RFC 3339). Both come from the scheduler.
	ExecutionID   string `json:"executionId,omitempty"`
	ScheduledTime string `json:"scheduledTime,omitempty"`
	// PayloadRef names where a run too large for a message was stored.
	PayloadRef string `json:"payloadRef,omitempty"`
	// NotBefore is when a run paused by a WAIT step is due (Delayer): a
	// message seen earlier is sent on again, without claiming the run,
	// unless the run is due already or ended (RunRuntime.DueReader).
	NotBefore *time.Time `json:"notBefore,omitempty"`
}

// HandleMessage does what one queue message asks: executes a run, or starts
// and executes the run of a schedule firing. It returns nil when the message
// is done with, ErrExhausted when the run failed for good, and otherwise an
// error that asks to see the message again: ErrRetry, or a RunClaimed error
// (IsRunClaimed) when another attempt holds the run, which is the expected
// hand-over of "Who executes a run", not a failure to log as one.
func (s *RunService) HandleMessage(ctx context.Context, body []byte) error {
	var m QueueMessage
	if err := json.Unmarshal(body, &m); err != nil {
		// A message nobody can read will not improve with retries; let it
		// go to the dead-letter queue with a clear reason.
		return fmt.Errorf("%w: unreadable queue message: %w", ErrExhausted, err)
	}
	switch m.Kind {
	case MessageRun:
		if m.NotBefore != nil && s.clock().Before(*m.NotBefore) {
			switch s.earlyDue(ctx, m) {
			case dueNow:
				return s.handleRun(ctx, m.Project, m.RunID)
			case dueNever:
				return nil
			}
			if d, ok := s.delayer(); ok {
				if err := d.EnqueueAfter(ctx, Run{ID: m.RunID, Project: m.Project}, *m.NotBefore); err != nil {
					return fmt.Errorf("%w: %w", ErrRetry, err)
				}
				return nil
			}
		}
		return s.handleRun(ctx, m.Project, m.RunID)
	case MessageSchedule:
		fired, err := time.Parse(time.RFC3339, m.ScheduledTime)
		if err != nil {
			fired = s.clock()
		}
		key := m.ExecutionID
		if key == "" {
			key = m.ScheduledTime
		}
		r, err := s.StartScheduledRun(ctx, m.Project, m.FlowID, fired, key)
		if IsFlowNotScheduled(err) || IsNotFound(err) {
			return nil // disabled or deleted since the schedule fired
		}
		if IsRunQuotaExceeded(err) {
			// Skipped, as on flowd: the next firing is another chance, and
			// a retry would only hold the queue.
			s.log.WarnContext(ctx, "scheduled run over the runsPerMinute quota: skipped", "project", m.Project, "flow", m.FlowID, "err", err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: start scheduled run of %s: %w", ErrRetry, m.FlowID, err)
		}
		return s.handleRun(ctx, r.Project, r.ID)
	case MessagePoll:
		// Runs of new items are queued as messages of their own. A failed
		// request is the flow's lastError, not an error here: the next
		// firing is its retry; a poll that could not record is seen again.
		err := s.PollFlow(ctx, m.Project, m.FlowID)
		if IsFlowNotScheduled(err) || IsNotFound(err) {
			return nil
		}
		if err == nil && m.NotBefore == nil {
			// A scheduler's firing, not a poll it queued: an interval under
			// the scheduler's minute polls again within it.
			err = s.pollsWithinMinute(ctx, m.Project, m.FlowID)
		}
		if err != nil {
			return fmt.Errorf("%w: poll %s: %w", ErrRetry, m.FlowID, err)
		}
		return nil
	default:
		return fmt.Errorf("%w: queue message of unknown kind %q", ErrExhausted, m.Kind)
	}
}

// RetryLater is the error HandleMessage returns for a message to see again:
// when (At), and why (Err: ErrRetry with its cause, or RunClaimed for the
// hand-over). A runner backs off by it, changing the message's visibility
// to At instead of a flat timeout, so that the run's own attempts (counted
// by ClaimRun, bounded by RunPolicy.MaxAttempts) decide when it is
// exhausted, not the queue's receive count: a bounce off a live attempt is
// not an attempt.
type RetryLater struct {
	At  time.Time
	Err error
}

func (e *RetryLater) Error() string { return e.Err.Error() }
func (e *RetryLater) Unwrap() error { return e.Err }

// handleRun executes a run for a message and maps the outcome to
// HandleMessage's errors.
func (s *RunService) handleRun(ctx context.Context, project, runID string) error {
	at, err := s.ExecuteRun(ctx, project, runID)
	switch at.Outcome {
	case OutcomeClaimed:
		return &RetryLater{At: s.clock().Add(policyOf(s.rt).Lease()), Err: RunClaimed(runID)}
	case OutcomeRetry:
		when := at.RetryAt
		if when.IsZero() {
			when = s.clock().Add(policyOf(s.rt).Backoff(at.Attempts))
		}
		return &RetryLater{At: when, Err: err}
	}
	return err
}

// policyOf is the run policy of a runtime, defaults applied.
func policyOf(rt *RunRuntime) RunPolicy {
	if rt == nil {
		return RunPolicy{}.WithDefaults()
	}
	return rt.Policy.WithDefaults()
}

// delayer is the runtime's Delayer, if it has one.
func (s *RunService) delayer() (Delayer, bool) {
	if s.rt == nil || s.rt.Delayer == nil {
		return nil, false
	}
	return s.rt.Delayer, true
}

// What an early delivery of a parked run's message finds (earlyDue).
type earlyFinding int

const (
	dueLater earlyFinding = iota // not due yet, or not known: sent on
	dueNow                       // made due meanwhile: executed now
	dueNever                     // ended or gone: the message is done with
)

// earlyDue looks at the run of message m, which came before its NotBefore
// (SQS delays at most 15 minutes, so a long wait comes back every 15
// minutes). A decision or a callback makes the parked run due in the
// store's write and then sends a message to wake it; when that message is
// lost (the send failed, or the function died between the two), this
// look is what resumes the run within one delivery interval instead of at
// the waitpoint's expiry. Only early deliveries pay the read, once each;
// a failed read sends the message on as before.
func (s *RunService) earlyDue(ctx context.Context, m QueueMessage) earlyFinding {
	if s.rt == nil || s.rt.DueReader == nil {
		return dueLater
	}
	status, next, err := s.rt.DueReader.RunDue(ctx, m.Project, m.RunID)
	switch {
	case IsNotFound(err):
		return dueNever // deleted with its flow, or its retention ended
	case err != nil:
		s.log.WarnContext(ctx, "read a parked run's due time; its message is sent on", "run", m.RunID, "err", err)
		return dueLater
	case status.Final():
		return dueNever // cancelled or finished while it waited
	case next != nil && !s.clock().Before(*next):
		return dueNow
	}
	return dueLater
}
