package sqsqueue_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"flowservice/pkg/automation"
	"flowservice/pkg/sqsqueue"
)

// stubMessages is a MessageHandler with a canned outcome per body.
type stubMessages struct {
	outcome map[string]error
	// meet, when over 1, holds each call until that many are in flight
	// together (at most 10 s): a runner that handles the records of a
	// batch one at a time never gets there, and peak stays 1.
	meet     int32
	met      chan struct{}
	meetOnce sync.Once
	inFlight atomic.Int32
	peak     atomic.Int32
}

func (s *stubMessages) HandleMessage(ctx context.Context, body []byte) error {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	if s.meet > 1 {
		if n >= s.meet {
			s.meetOnce.Do(func() { close(s.met) })
		}
		select {
		case <-s.met:
		case <-time.After(10 * time.Second):
		}
	}
	return s.outcome[string(body)]
}

// TestRunnerReportsFailedRecords: every record whose handling failed, and
// only those, is reported; the batch itself never fails; records run
// concurrently.
func TestRunnerReportsFailedRecords(t *testing.T) {
	stub := &stubMessages{outcome: map[string]error{
		"ok":        nil,
		"retry":     fmt.Errorf("%w: store busy", automation.ErrRetry),
		"exhausted": fmt.Errorf("%w: gave up", automation.ErrExhausted),
		"other":     errors.New("network down"),
	}, meet: 2, met: make(chan struct{})}
	h := sqsqueue.Runner(stub, sqsqueue.Backoff{}, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	ev := events.SQSEvent{}
	for i, b := range []string{"ok", "retry", "ok", "exhausted", "other"} {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i), Body: b})
	}
	resp, err := h(context.Background(), ev)
	if err != nil {
		t.Fatalf("batch error %v: the whole batch would come back", err)
	}
	var got []string
	for _, f := range resp.BatchItemFailures {
		got = append(got, f.ItemIdentifier)
	}
	if want := []string{"m1", "m3", "m4"}; !slices.Equal(got, want) {
		t.Errorf("BatchItemFailures = %v, want %v", got, want)
	}
	if stub.peak.Load() < 2 {
		t.Errorf("records ran one at a time (peak %d)", stub.peak.Load())
	}

	resp, _ = h(context.Background(), events.SQSEvent{Records: ev.Records[:1]})
	if resp.BatchItemFailures == nil || len(resp.BatchItemFailures) != 0 {
		t.Errorf("all good: BatchItemFailures = %#v, want an empty list", resp.BatchItemFailures)
	}
}

// recordVisibility is a Visibility that records the timeouts it was asked
// for, by receipt handle, and the messages sent (failing them if sendErr).
type recordVisibility struct {
	mu      sync.Mutex
	set     map[string]int32
	sent    []*sqs.SendMessageInput
	sendErr error
}

func (v *recordVisibility) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.sendErr != nil {
		return nil, v.sendErr
	}
	v.sent = append(v.sent, in)
	return &sqs.SendMessageOutput{}, nil
}

func (v *recordVisibility) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.set[*in.ReceiptHandle] = in.VisibilityTimeout
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// TestRunnerBacksOffByTheRun: a message whose run is to be tried later
// comes back when the run says (its visibility changed to that time, capped
// at SQS's 12 hours), not after the queue's flat timeout; a bounce off a
// live attempt is no error in the log.
func TestRunnerBacksOffByTheRun(t *testing.T) {
	now := time.Now()
	stub := &stubMessages{outcome: map[string]error{
		"retry":   &automation.RetryLater{At: now.Add(40 * time.Second), Err: fmt.Errorf("%w: 503", automation.ErrRetry)},
		"claimed": &automation.RetryLater{At: now.Add(90 * time.Second), Err: automation.RunClaimed("run_x")},
		"far":     &automation.RetryLater{At: now.Add(48 * time.Hour), Err: fmt.Errorf("%w: 503", automation.ErrRetry)},
		"broken":  errors.New("network down"),
	}}
	vis := &recordVisibility{set: map[string]int32{}}
	var logs strings.Builder
	var mu sync.Mutex
	h := sqsqueue.Runner(stub, sqsqueue.Backoff{Client: vis, QueueURL: "q"}, slog.New(slog.NewJSONHandler(syncWriter{&mu, &logs}, nil)))
	ev := events.SQSEvent{}
	for _, b := range []string{"retry", "claimed", "far", "broken"} {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: b, ReceiptHandle: "rh-" + b, Body: b})
	}
	resp, err := h(context.Background(), ev)
	if err != nil || len(resp.BatchItemFailures) != 4 {
		t.Fatalf("resp = %+v, %v: want all four back on the queue", resp, err)
	}
	near := func(got int32, want time.Duration) bool {
		return time.Duration(got)*time.Second >= want-2*time.Second && time.Duration(got)*time.Second <= want+time.Second
	}
	if got := vis.set["rh-retry"]; !near(got, 40*time.Second) {
		t.Errorf("retry visibility = %ds, want about 40s", got)
	}
	if got := vis.set["rh-claimed"]; !near(got, 90*time.Second) {
		t.Errorf("claimed visibility = %ds, want about 90s", got)
	}
	if got := vis.set["rh-far"]; got != int32(sqsqueue.MaxVisibility/time.Second) {
		t.Errorf("far visibility = %ds, want the 12 h cap", got)
	}
	if _, ok := vis.set["rh-broken"]; ok {
		t.Error("a plain failure changed its visibility; it keeps the queue's timeout")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) && !strings.Contains(line, "network down") {
			t.Errorf("error logged for an expected outcome: %s", line)
		}
	}
}

// TestRunnerRequeuesLateBounces: a bounce (automation.IsRunClaimed) at
// sqsqueue.DefaultRequeueAt receives or more sends a copy of the message (its body, its attributes, delayed to
// the run's time within SQS's 15 minutes) and acknowledges the old one;
// below it, or when the copy cannot be sent, the message is bounced by its
// visibility and stays on the queue. A failed attempt or a plain failure is
// never requeued: those keep counting toward the DLQ.
func TestRunnerRequeuesLateBounces(t *testing.T) {
	now := time.Now()
	stub := &stubMessages{outcome: map[string]error{
		"early":  &automation.RetryLater{At: now.Add(90 * time.Second), Err: automation.RunClaimed("run_x")},
		"late":   &automation.RetryLater{At: now.Add(90 * time.Second), Err: automation.RunClaimed("run_x")},
		"far":    &automation.RetryLater{At: now.Add(48 * time.Hour), Err: automation.RunClaimed("run_y")},
		"failed": &automation.RetryLater{At: now.Add(40 * time.Second), Err: fmt.Errorf("%w: 503", automation.ErrRetry)},
		"broken": errors.New("network down"),
	}}
	count := map[string]string{"early": "4", "late": "5", "far": "9", "failed": "9", "broken": "9"}
	event := func() events.SQSEvent {
		ev := events.SQSEvent{}
		for _, b := range []string{"early", "late", "far", "failed", "broken"} {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: b, ReceiptHandle: "rh-" + b, Body: b,
				Attributes:        map[string]string{"ApproximateReceiveCount": count[b]},
				MessageAttributes: map[string]events.SQSMessageAttribute{"trace": {DataType: "String", StringValue: aws.String("t-" + b)}}})
		}
		return ev
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	failures := func(resp events.SQSEventResponse) []string {
		var ids []string
		for _, f := range resp.BatchItemFailures {
			ids = append(ids, f.ItemIdentifier)
		}
		slices.Sort(ids)
		return ids
	}

	vis := &recordVisibility{set: map[string]int32{}}
	resp, _ := sqsqueue.Runner(stub, sqsqueue.Backoff{Client: vis, QueueURL: "q"}, log)(context.Background(), event())
	if got := failures(resp); !slices.Equal(got, []string{"broken", "early", "failed"}) {
		t.Errorf("failures = %v, want broken, early and failed back on the queue, late and far acknowledged", got)
	}
	if _, ok := vis.set["rh-early"]; !ok || len(vis.set) != 2 || vis.set["rh-failed"] < 38 {
		t.Errorf("visibility changed for %v, want rh-early and rh-failed (a failed attempt keeps its receive count)", vis.set)
	}
	delays := map[string]int32{}
	for _, in := range vis.sent {
		body := aws.ToString(in.MessageBody)
		delays[body] = in.DelaySeconds
		if a := in.MessageAttributes["trace"]; aws.ToString(a.StringValue) != "t-"+body || aws.ToString(a.DataType) != "String" || aws.ToString(in.QueueUrl) != "q" {
			t.Errorf("copy of %s = %+v, want its attributes on queue q", body, in)
		}
	}
	if len(delays) != 2 || delays["late"] < 88 || delays["late"] > 91 || delays["far"] != int32(sqsqueue.MaxDelay/time.Second) {
		t.Errorf("copies sent with delays %v, want late about 90 s and far 900 s", delays)
	}

	failing := &recordVisibility{set: map[string]int32{}, sendErr: errors.New("throttled")}
	resp, _ = sqsqueue.Runner(stub, sqsqueue.Backoff{Client: failing, QueueURL: "q"}, log)(context.Background(), event())
	if got := failures(resp); !slices.Equal(got, []string{"broken", "early", "failed", "far", "late"}) {
		t.Errorf("failures with the send failing = %v, want all five back on the queue", got)
	}
	if got := failing.set["rh-far"]; got != int32(sqsqueue.MaxVisibility/time.Second) || len(failing.set) != 4 {
		t.Errorf("visibility with the send failing = %v, want the four backoffs by visibility, far at 12 h", failing.set)
	}

	requeueAt2 := &recordVisibility{set: map[string]int32{}}
	resp, _ = sqsqueue.Runner(stub, sqsqueue.Backoff{Client: requeueAt2, QueueURL: "q", RequeueAt: 3}, log)(context.Background(), event())
	if got := failures(resp); !slices.Equal(got, []string{"broken", "failed"}) || len(requeueAt2.sent) != 3 {
		t.Errorf("RequeueAt 3: failures %v, %d copies; want broken and failed, three copies", got, len(requeueAt2.sent))
	}
}

type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
